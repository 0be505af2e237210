"""The gate: accept a candidate skill over the current one on the selection split.

`paired` (the default) accepts only when the one-sided paired per-item comparison
(bv.core.paired: the candidate better than the current skill, each item's score the mean over
its finished repeats) is significant at this decision's share of alpha. The shares halve: the
run's j-th decision is tested at alpha / 2^j, so over any number of steps they sum below alpha,
and a run whose edits cannot help ends with an accepted edit at most alpha of the time (the
family-wise rate over the run, by the union bound; docs/optimize.md). `greater` accepts whenever
the candidate's selection score is higher, as the reference does: it follows noise and is here
to compare. Rows that failed (no verdict) are left out and counted, never scored as wrong."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bv.core.paired import PairedComparison, paired_comparison
from bv.core.records import JudgedRow
from bv.core.stats import item_estimate

GATES = ("paired", "greater")
_FIELDS = (
    "n_items",
    "mean_a",
    "mean_b",
    "diff",
    "ci95",
    "p_value",
    "method",
    "improved",
    "regressed",
    "unchanged",
    "alternative",
    "bound",
)


def step_alpha(alpha: float, decision: int) -> float:
    """The share of the run's alpha its `decision`-th gate decision (1-based) is tested at."""
    return alpha / 2**decision


@dataclass(frozen=True)
class Decision:
    accepted: bool
    gate: str
    alpha: float  # the run's
    decision: int  # the how-manieth gate decision of the run (1-based)
    comparison: PairedComparison  # one-sided at step_alpha(alpha, decision)
    failed: tuple[int, int] = (0, 0)  # failed rows left out: the current skill's, the candidate's

    def to_json(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "gate": self.gate,
            "alpha": self.alpha,
            "decision": self.decision,
            "step_alpha": step_alpha(self.alpha, self.decision),
            "failed_rows": {"current": self.failed[0], "candidate": self.failed[1]},
            **comparison_json(self.comparison),
        }


def _finite(value: Any) -> Any:
    """JSON has no NaN: an undefined figure is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (tuple, list)):
        return [_finite(v) for v in value]
    return value


def decide(
    current: Mapping[str, Sequence[float]],
    candidate: Mapping[str, Sequence[float]],
    gate: str,
    alpha: float,
    decision: int = 1,
    failed: tuple[int, int] = (0, 0),
) -> Decision:
    """The run's `decision`-th gate decision, on the items both sides have a finished row of."""
    share = step_alpha(alpha, decision)
    comparison = paired_comparison(current, candidate, alternative="greater", alpha=share)
    if gate == "paired":
        accepted = comparison.p_value < share
    elif gate == "greater":
        accepted = comparison.mean_b > comparison.mean_a
    else:
        raise ValueError(f"unknown gate {gate!r} (one of {', '.join(GATES)})")
    return Decision(accepted, gate, alpha, decision, comparison, failed)


def failed(row: JudgedRow) -> bool:
    """A row with no verdict: its rollout or its judging failed."""
    return bool(row.get("error")) or row.get("hard") is None


def finished_scores(rows: Sequence[JudgedRow]) -> tuple[dict[str, list[float]], int]:
    """Item id -> the scores of its finished rows, and how many rows failed (left out: a failed
    row is no evidence about the skill; an item with none finished is not compared)."""
    out: dict[str, list[float]] = {}
    for row in rows:
        if not failed(row):
            out.setdefault(str(row["id"]), []).append(1.0 if row.get("hard") == 1 else 0.0)
    return out, sum(1 for row in rows if failed(row))


def estimate(rows_scores: Mapping[str, Sequence[float]]) -> dict[str, Any]:
    """One side's item-level accuracy with its 95% interval, as the history and report write it."""
    e = item_estimate(rows_scores)
    return {
        "n_items": e.n_items,
        "accuracy": _finite(e.mean),
        "ci95": _finite(list(e.ci95)),
        "method": e.method,
    }


def comparison_json(comparison: PairedComparison) -> dict[str, Any]:
    c = asdict(comparison)
    return {name: _finite(c[name]) for name in _FIELDS}


def paired(a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]]) -> dict[str, Any]:
    """b against a, two-sided, as the final test comparison reports it."""
    return comparison_json(paired_comparison(a, b, alternative="two-sided"))
