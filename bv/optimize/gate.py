"""The gate: accept a candidate skill over the current one on the selection split.

`paired` (the default) accepts only when the one-sided paired per-item test (bv.core.stats:
the candidate better than the current skill, each item's score the mean over its repeats) is
significant at alpha, so a candidate no better than the current skill is accepted at most an
alpha share of the time. `greater` accepts whenever the candidate's selection score is higher,
as the reference does; with a sampling target that follows noise, and it is here to compare."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bv.core.records import JudgedRow
from bv.core.stats import PairedComparison, item_estimate, paired_comparison

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
)


@dataclass(frozen=True)
class Decision:
    accepted: bool
    gate: str
    alpha: float
    comparison: PairedComparison

    def to_json(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "gate": self.gate,
            "alpha": self.alpha,
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
    current: Mapping[str, Sequence[float]], candidate: Mapping[str, Sequence[float]], gate: str, alpha: float
) -> Decision:
    comparison = paired_comparison(current, candidate, alternative="greater")
    if gate == "paired":
        accepted = comparison.p_value <= alpha
    elif gate == "greater":
        accepted = comparison.mean_b > comparison.mean_a
    else:
        raise ValueError(f"unknown gate {gate!r} (one of {', '.join(GATES)})")
    return Decision(accepted, gate, alpha, comparison)


def scores(rows: Sequence[JudgedRow]) -> dict[str, list[float]]:
    """Item id -> its per-run scores; a row that failed (no verdict) scores 0, as bv report counts it."""
    out: dict[str, list[float]] = {}
    for row in rows:
        out.setdefault(str(row["id"]), []).append(1.0 if row.get("hard") == 1 else 0.0)
    return out


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
