"""What a run's history says of its current skill: the scores later candidates are paired with,
the rejections since it was set, and the best skill so far. Pure functions of the rows
history.jsonl holds, so a resumed run reads the same state it left."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bv.optimize.gate import estimate


def current_scores(history: Sequence[Mapping[str, Any]]) -> tuple[dict[str, list[float]], int]:
    """The current skill's selection scores (finished rows) and its failed rows: those of the last
    row that set the skill, pooled with every re-score of it since (`refresh`)."""
    later: list[Mapping[str, Any]] = []
    for row in reversed(history):
        if row["kind"] == "seed" or row.get("accepted"):
            scores = {k: list(v) for k, v in row["scores"].items()}
            failed = int(row.get("failed_rows") or 0)
            for again in reversed(later):
                for item, runs in again["scores"].items():
                    scores.setdefault(item, []).extend(runs)
                failed += int(again.get("failed_rows") or 0)
            return scores, failed
        if row.get("refresh"):
            later.append(row["refresh"])
    raise AssertionError("a history starts with the seed's row")


def rejections(history: Sequence[Mapping[str, Any]]) -> int:
    """Gated candidates rejected in a row since the current skill was set."""
    count = 0
    for row in reversed(history):
        if row["kind"] == "seed" or row.get("accepted"):
            return count
        count += bool(row.get("gate"))
    return count


def best_after(
    gate: str,
    best: dict[str, Any],
    row: Mapping[str, Any],
    ref: Mapping[str, Any],
    scores: Mapping[str, list[float]],
) -> dict[str, Any]:
    """The best skill after a step. Under `greater` it is the current skill: every skill kept
    beat the one before it (the current skill's score may have been pooled with a re-score
    since, so its recorded score is no fair yardstick). Under `paired`, the accepted skill with
    the highest selection score."""
    accuracy = estimate(scores)["accuracy"]
    if not row["accepted"] or accuracy is None:
        return best
    if gate == "greater" or best["accuracy"] is None or accuracy > best["accuracy"]:
        return {**ref, "step": row["step"], "accuracy": accuracy}
    return best
