"""The gate: accept a candidate skill over the current one on the selection split.

`greater` (the default) accepts whenever the candidate's selection score is higher than the
current skill's. It follows noise as often as real gains, and that is what the bench measured
to find the most (docs/optimize.md, "Choosing the defaults"): what keeps a run safe is the test
split's confirmation at its end (bv.optimize.guard), not this gate. `paired` accepts only when
the exact one-sided sign-flip test (bv.core.signflip: the candidate better than the current
skill, each item's score the mean over its finished repeats) rejects at this decision's share
of alpha. The shares halve: the run's j-th decision is tested at alpha / 2^j, so over any number
of steps they sum below alpha, and a run whose edits cannot help ends with an accepted edit at
most alpha of the time (by the union bound). Rows that failed (no verdict) are left out and
counted, never scored as wrong."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from bv.core.paired import PairedComparison, paired_comparison
from bv.core.records import JudgedRow
from bv.core.signflip import sign_flip_test
from bv.core.stats import item_estimate

GATES = ("greater", "paired")
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
    comparison: PairedComparison  # the two sides' figures (its p is replaced by the test's)
    failed: tuple[int, int] = (0, 0)  # failed rows left out: the current skill's, the candidate's
    test: str = ""  # the test that decided a paired gate; "" for greater

    def to_json(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "gate": self.gate,
            "alpha": self.alpha,
            "decision": self.decision,
            "step_alpha": step_alpha(self.alpha, self.decision),
            "failed_rows": {"current": self.failed[0], "candidate": self.failed[1]},
            **comparison_json(self.comparison),
            "test": self.test,
        }


def finite(value: Any) -> Any:
    """JSON has no NaN: an undefined figure is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (tuple, list)):
        return [finite(v) for v in value]
    return value


def decide(
    current: Mapping[str, Sequence[float]],
    candidate: Mapping[str, Sequence[float]],
    gate: str,
    alpha: float,
    decision: int = 1,
    failed: tuple[int, int] = (0, 0),
) -> Decision:
    """The run's `decision`-th gate decision, on the items both sides have a finished row of. The
    record keeps the two sides' figures; a paired gate's p is its exact test's."""
    share = step_alpha(alpha, decision)
    comparison = paired_comparison(current, candidate, alternative="greater", alpha=share)
    if gate == "paired":
        test = sign_flip_test(current, candidate, alpha=share)
        comparison = replace(comparison, p_value=test.p_value)
        return Decision(test.rejects, gate, alpha, decision, comparison, failed, test.method)
    if gate == "greater":
        return Decision(comparison.mean_b > comparison.mean_a, gate, alpha, decision, comparison, failed)
    raise ValueError(f"unknown gate {gate!r} (one of {', '.join(GATES)})")


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
        "accuracy": finite(e.mean),
        "ci95": finite(list(e.ci95)),
        "method": e.method,
    }


def comparison_json(comparison: PairedComparison) -> dict[str, Any]:
    c = asdict(comparison)
    return {name: finite(c[name]) for name in _FIELDS}


def paired(a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]]) -> dict[str, Any]:
    """b against a, two-sided, as the final test comparison reports it."""
    return comparison_json(paired_comparison(a, b, alternative="two-sided"))
