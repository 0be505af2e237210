"""Planning a comparison (Miller, "Adding Error Bars to Evals", arXiv 2411.00640, section 5):
the smallest difference these items and runs detect, and the items or runs a difference needs.
The statistics it builds on are bv.core.stats's; docs/reports.md works an example on 388 items.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bv.core.stats import mean, sample_variance


@dataclass(frozen=True)
class PowerPlan:
    """What a paired comparison on these items can detect (Miller, section 5).

    Var(d) at K runs per item splits into the items' true differences plus run-to-run noise:
    Var(d; K) = between + noise_per_run / K. n ~ (z_{a/2} + z_b)^2 Var(d) / delta^2."""

    n_items: int
    runs: float  # runs per item in the data (mean over items and sides)
    var_diff: float  # Var(d) at the runs in the data
    noise_per_run: float  # the run-to-run part of Var(d) at one run per item (0 when unknown)
    alpha: float = 0.05
    power: float = 0.8

    @property
    def z(self) -> float:
        from statistics import NormalDist  # here: `bv report` starts without it (and fractions, decimal)

        dist = NormalDist()
        return dist.inv_cdf(1 - self.alpha / 2) + dist.inv_cdf(self.power)

    @property
    def between(self) -> float:
        return max(0.0, self.var_diff - self.noise_per_run / self.runs)

    def var_at(self, runs: float) -> float:
        return self.between + self.noise_per_run / runs

    @property
    def mde(self) -> float:
        """The smallest difference detected with this power at these items and runs."""
        return self.z * math.sqrt(self.var_diff / self.n_items) if self.n_items else float("nan")

    def items_for(self, delta: float, runs: float | None = None) -> int:
        """Items needed to detect `delta` at `runs` per item: at the data's runs (the default)
        n = z^2 Var(d) / delta^2 with the measured Var(d), as documented; only at other runs is it
        split into between + noise/K (which clamps `between` at 0 and so can exceed Var(d))."""
        var = self.var_diff if runs is None or runs == self.runs else self.var_at(runs)
        return math.ceil(self.z**2 * var / delta**2)

    def runs_for(self, delta: float) -> int | None:
        """Runs per item needed on these items to detect `delta`; None when no number suffices."""
        room = delta**2 * self.n_items / self.z**2 - self.between
        if self.noise_per_run <= 0 or room <= 0:
            return None if self.var_at(self.runs) * self.z**2 / delta**2 > self.n_items else 1
        return max(1, math.ceil(self.noise_per_run / room))


def _noise(sides: Sequence[Sequence[float]]) -> float:
    """One run's sampling variance within an item (unbiased), averaged over the items run more
    than once; 0 when none is (then it cannot be told from the items' own spread)."""
    repeated = [sample_variance(runs) for runs in sides if len(runs) > 1]
    return mean(repeated) if repeated else 0.0


def paired_power(
    a: Mapping[str, Sequence[float]],
    b: Mapping[str, Sequence[float]],
    *,
    alpha: float = 0.05,
    power: float = 0.8,
) -> PowerPlan:
    """The power plan of comparing b with a, from the data: Var(d) and its run-to-run part."""
    common = [item for item in a if item in b and a[item] and b[item]]
    diffs = [mean(b[item]) - mean(a[item]) for item in common]
    runs = mean([(len(a[item]) + len(b[item])) / 2 for item in common]) if common else 1.0
    noise = _noise([a[item] for item in common]) + _noise([b[item] for item in common])
    var = sample_variance(diffs) if len(diffs) > 1 else float("nan")
    return PowerPlan(len(common), runs, var, noise, alpha, power)


def single_power(
    scores: Mapping[str, Sequence[float]], *, alpha: float = 0.05, power: float = 0.8
) -> PowerPlan:
    """The power plan for comparing an input with a like one when no pair is at hand.

    Without the second input the correlation is unknown; Var(d) = 2 Var(item score) assumes none
    (the conservative end: paired inputs usually correlate, which shrinks Var(d))."""
    runs_of = [runs for runs in scores.values() if runs]
    values = [mean(runs) for runs in runs_of]
    var = 2 * sample_variance(values) if len(values) > 1 else float("nan")
    noise = 2 * _noise(runs_of)
    runs = mean([len(r) for r in runs_of]) if runs_of else 1.0
    return PowerPlan(len(values), runs, var, noise, alpha, power)


# Items like a frontier model's on BabyVision, for planning before any data: a beta mixture
# (weight, a, b) with many items nearly always wrong, some nearly always right, the rest spread;
# mean .352. bench/worlds.py draws its worlds from it.
BABYVISION_ITEMS: tuple[tuple[float, float, float], ...] = (
    (0.45, 0.3, 6.0),
    (0.20, 6.0, 0.3),
    (0.35, 2.0, 3.0),
)


@functools.cache
def _item_grid(
    mix: tuple[tuple[float, float, float], ...], points: int = 60
) -> tuple[tuple[float, float], ...]:
    """(weight, accuracy) points standing for the mixture: each component's mid-quantiles."""
    from bv.core.dist import beta_quantile

    total = sum(w for w, _, _ in mix)
    return tuple(
        (w / total / points, beta_quantile((j + 0.5) / points, a, b))
        for w, a, b in mix
        for j in range(points)
    )


def lift_for_gain(points: Sequence[tuple[float, float]], gain: float) -> float:
    """The points to add to every item's accuracy (each capped at 100%) that raise the mean by
    `gain`, for items given as (weight, accuracy): a "+10-point edit" is one whose true gain is
    10 points, though an item right 98% of the time can gain only 2. 1.0 when none can."""
    total = sum(w for w, _ in points)

    def mean_gain(lift: float) -> float:
        return sum(w * (min(1.0, p + lift) - p) for w, p in points) / total

    if mean_gain(1.0) < gain:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if mean_gain(middle) < gain else (low, middle)
    return high


def _edit_z(n_items: int, runs: int, gain: float, mix: Sequence[tuple[float, float, float]]) -> float:
    """The mean gain over the standard error of a paired mean difference, for an edit that adds
    the same points to every item's accuracy (capped at 100%) for a mean `gain`. An item's
    difference varies by its runs, (p(1-p) + p'(1-p'))/runs, and by how much it can gain."""
    grid = _item_grid(tuple(mix))
    lift = lift_for_gain(grid, gain)
    gains = [(w, min(1.0, p + lift) - p, p) for w, p in grid]
    runs_var = sum(w * (p * (1 - p) + (p + g) * (1 - p - g)) for w, g, p in gains) / runs
    between = sum(w * (g - gain) ** 2 for w, g, _ in gains)
    var = runs_var + between
    return gain * math.sqrt(n_items / var) if n_items and var > 0 else 0.0


def edit_power(
    n_items: int,
    runs: int,
    delta: float,
    alpha: float,
    mix: Sequence[tuple[float, float, float]] = BABYVISION_ITEMS,
) -> float:
    """The chance that a one-sided paired test at `alpha` over `n_items` items, `runs` runs each,
    finds an edit whose true gain is `delta`, the same points added to every item's accuracy
    (normal approximation; the exact test bv decides with is a little more cautious at few
    items). With alpha 0.5 it is the chance that the edit merely scores higher."""
    from statistics import NormalDist

    dist = NormalDist()
    return dist.cdf(_edit_z(n_items, runs, delta, mix) - dist.inv_cdf(1 - alpha))


def smallest_edit(
    n_items: int,
    runs: int,
    alpha: float,
    power: float = 0.8,
    mix: Sequence[tuple[float, float, float]] = BABYVISION_ITEMS,
) -> float | None:
    """The smallest edit on every item found with `power` (None: none that leaves room below 100%)."""
    high = 0.6  # a larger gain leaves most items no room
    if edit_power(n_items, runs, high, alpha, mix) < power:
        return None
    low = 0.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if edit_power(n_items, runs, middle, alpha, mix) < power else (low, middle)
    return high
