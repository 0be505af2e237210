"""B against A per item: one method per verdict (docs/reports.md, "Comparing two inputs").

The verdict is decided by the interval, and the p-value printed beside it is that interval's own
(the level at which it first touches 0), so "the interval excludes 0" and "p < alpha" never
disagree. With one run per item the interval is Newcombe's (1998, method 10) for paired
proportions; with repeats it is the t interval over the per-item differences (df = items - 1).
tests/core/test_stats_methods.py checks both against the paper's Table III and scipy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from bv.core.dist import normal_quantile, normal_upper, t_quantile, t_upper
from bv.core.stats import TIE, Z95, clustered_se, mean, pearson, sample_variance, wilson

Alternative = Literal["two-sided", "greater"]
SIDES = {"two-sided": "two-sided", "greater": "one-sided (b > a)"}
_Z_MAX = 60.0  # beyond this the normal tail is below 1e-780: p is 0 to any precision printed


@dataclass(frozen=True)
class PairedComparison:
    """B against A over the items both have."""

    n_items: int  # items both sides have
    mean_a: float  # item-level accuracy (each item's mean over its runs)
    mean_b: float
    diff: float  # mean_b - mean_a
    ci95: tuple[float, float]  # the two-sided 95% interval on diff, over items
    p_value: float  # of the interval's own test, at `alternative`
    method: str  # the interval and its test, and the sides
    improved: int  # per item
    regressed: int
    unchanged: int
    correlation: float | None  # of the two sides' item scores
    se: float = float("nan")  # standard error of diff, over items
    var_diff: float = float("nan")  # sample variance of the per-item differences
    alternative: Alternative = "two-sided"
    alpha: float = 0.05
    # the interval that decides at `alpha` and `alternative`: two-sided (1 - alpha), or for
    # "greater" the one-sided lower bound at 1 - alpha (upper end 1); excludes 0 iff p < alpha
    bound: tuple[float, float] = (float("nan"), float("nan"))


def newcombe_paired(a: float, b: float, c: float, d: float, z: float = Z95) -> tuple[float, float]:
    """Newcombe's hybrid score interval (Stat Med 1998;17:2635, method 10) for (b - c)/n, the
    first proportion (a + b)/n minus the second (a + c)/n of a paired 2x2 table: a both, b the
    first only, c the second only, d neither. Its correlation is corrected as the paper does,
    phi = max(ad - bc - n/2, 0)/sqrt((a+b)(c+d)(a+c)(b+d)) when ad > bc, so it does not collapse
    to a point when no pair is discordant (the uncorrected phi is 1 there: method 8)."""
    n = a + b + c + d
    if n <= 0:
        return (-1.0, 1.0)
    p1, p2 = (a + b) / n, (a + c) / n
    low1, high1 = wilson(a + b, n, z)
    low2, high2 = wilson(a + c, n, z)
    denominator = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    if denominator <= 0:
        phi = 0.0
    elif cross > 0:
        phi = max(cross - n / 2, 0.0) / math.sqrt(denominator)
    else:
        phi = cross / math.sqrt(denominator)
    down = math.sqrt(max(0.0, (p1 - low1) ** 2 - 2 * phi * (p1 - low1) * (high2 - p2) + (high2 - p2) ** 2))
    up = math.sqrt(max(0.0, (high1 - p1) ** 2 - 2 * phi * (high1 - p1) * (p2 - low2) + (p2 - low2) ** 2))
    diff = (b - c) / n
    return (max(-1.0, diff - down), min(1.0, diff + up))


def _crossing(touches: Callable[[float], bool]) -> float:
    """The z at which an interval that widens with z first reaches 0 (`touches(z)`), by bisection."""
    if not touches(_Z_MAX):
        return _Z_MAX
    low, high = 0.0, _Z_MAX
    for _ in range(100):
        middle = (low + high) / 2
        if touches(middle):
            high = middle
        else:
            low = middle
    return (low + high) / 2


def _two_sided_p(interval: Callable[[float], tuple[float, float]], diff: float) -> float:
    """The smallest alpha at which the (1 - alpha) interval excludes 0: the interval's test."""
    if diff == 0:
        return 1.0
    side = 0 if diff > 0 else 1
    z = _crossing(lambda z: (interval(z)[side] <= 0) if side == 0 else (interval(z)[side] >= 0))
    return min(1.0, 2 * normal_upper(z))


def _table(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float, float]:
    """The paired 2x2 table (both, b only, a only, neither) of item scores; with item means
    each item adds its mass (an item right 2 of 3 times on b and 1 of 3 on a: 1/3 both,
    1/3 b only), so one run per item gives the ordinary table of counts."""
    both = sum(min(x, y) for x, y in zip(xs, ys, strict=True))
    only_b = sum(max(y - x, 0.0) for x, y in zip(xs, ys, strict=True))
    only_a = sum(max(x - y, 0.0) for x, y in zip(xs, ys, strict=True))
    return both, only_b, only_a, len(xs) - both - only_b - only_a


def paired_comparison(
    a: Mapping[str, Sequence[float]],
    b: Mapping[str, Sequence[float]],
    *,
    alternative: Alternative = "two-sided",
    alpha: float = 0.05,
    clusters: Mapping[str, object] | None = None,
) -> PairedComparison:
    """Compare b with a per item: `a` and `b` map item id -> that item's per-run scores.

    With one run per item on both sides (or when every item moved alike, where the t interval
    is a point), Newcombe's method 10 on the paired table of item scores; otherwise the t
    interval over per-item differences. With `clusters` (item -> cluster) spanning two or more
    clusters, the t interval with the clustered standard error of the differences and C - 1
    degrees of freedom, at any number of runs (items of one cluster are not independent; no
    paired-proportion interval knows that). The p-value inverts the same interval; "greater"
    tests b > a one-sided (p = half the two-sided p when diff > 0)."""
    common = [item for item in a if item in b and a[item] and b[item]]
    n = len(common)
    if n == 0:
        nan = float("nan")
        return PairedComparison(
            0, nan, nan, nan, (nan, nan), 1.0, "no common items", 0, 0, 0, None,
            alternative=alternative, alpha=alpha,
        )  # fmt: skip
    xs = [sum(a[item]) / len(a[item]) for item in common]
    ys = [sum(b[item]) / len(b[item]) for item in common]
    diffs = [y - x for x, y in zip(xs, ys, strict=True)]
    improved = sum(d > TIE for d in diffs)
    regressed = sum(d < -TIE for d in diffs)
    diff = mean(diffs)
    var = sample_variance(diffs)
    se = math.sqrt(var / n) if n > 1 else float("nan")
    one_run = all(len(a[item]) == 1 and len(b[item]) == 1 for item in common)
    labels = [clusters.get(item, item) for item in common] if clusters is not None else []
    clustered_error = clustered_se(diffs, labels) if len(set(labels)) > 1 else float("nan")
    clustered = clustered_error > 0  # else (no cluster's sum moved) as unclustered: never a point
    if clustered:
        se = clustered_error
    interval: Callable[[float], tuple[float, float]]
    if not clustered and (one_run or not se > 0):
        table = _table(xs, ys)
        df = math.inf

        def interval(z: float) -> tuple[float, float]:
            return newcombe_paired(*table, z=z)

        p_two = _two_sided_p(interval, diff)
        method = "Newcombe's paired score interval (method 10) and its own test"
    else:
        df = len(set(labels)) - 1 if clustered else n - 1

        def interval(z: float) -> tuple[float, float]:
            return (max(-1.0, diff - z * se), min(1.0, diff + z * se))

        p_two = min(1.0, 2 * t_upper(abs(diff) / se, df))
        method = (
            f"t interval over per-item differences, standard error clustered over {df + 1} clusters,"
            f" and its t test (df {df})"
            if clustered
            else f"t interval over per-item differences and its t test (df {df})"
        )
    ci95 = interval(Z95 if math.isinf(df) else t_quantile(0.975, df))
    if alternative == "greater":
        p = p_two / 2 if diff > 0 else 1 - p_two / 2
        level = 1 - alpha
        z = normal_quantile(level) if math.isinf(df) else t_quantile(level, df)
        bound = (interval(z)[0], 1.0)
    else:
        p = p_two
        z = normal_quantile(1 - alpha / 2) if math.isinf(df) else t_quantile(1 - alpha / 2, df)
        bound = interval(z)
    return PairedComparison(
        n_items=n,
        mean_a=mean(xs),
        mean_b=mean(ys),
        diff=diff,
        ci95=ci95,
        p_value=p,
        method=f"{method}, {SIDES[alternative]}",
        improved=improved,
        regressed=regressed,
        unchanged=n - improved - regressed,
        correlation=pearson(xs, ys),
        se=se,
        var_diff=var,
        alternative=alternative,
        alpha=alpha,
        bound=bound,
    )
