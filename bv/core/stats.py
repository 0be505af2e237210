"""The statistics of bv, in one place: over items, never over rows.

Repeats of one item are not independent questions (Miller, "Adding Error Bars to Evals",
arXiv 2411.00640): each item's score is its mean over its runs, and standard errors, intervals,
paired tests and power are computed over those item scores. docs/reports.md states each method;
tests/core/test_stats.py checks them against brute force, a seeded bootstrap and hand computations.
Also here: the population std over runs (the official run-to-run spread) and how counts are written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bv.core.dist import beta_quantile

# The normal distribution's 97.5% point, NormalDist().inv_cdf(0.975) (tests/core/test_stats.py checks
# it): a constant, so that `bv report` does not import `statistics` (and fractions, decimal) to start.
Z95 = 1.9599639845400536
TIE = 1e-12  # item scores closer than this are equal (1/3 computed two ways)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def pstdev(values: Sequence[float]) -> float:
    """Population standard deviation, as the official compute_score.py reports over runs."""
    if not values:
        return float("nan")
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


def sample_variance(values: Sequence[float]) -> float:
    """The unbiased variance (n - 1 in the denominator); nan below two values."""
    if len(values) < 2:
        return float("nan")
    m = mean(values)
    return sum((v - m) ** 2 for v in values) / (len(values) - 1)


def wilson(successes: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score 95% interval for a proportion; sound near 0 and 1, unlike the normal one.

    `n` may be an effective sample size (not a whole number): see `estimate_over_items`."""
    if n <= 0:
        return (float("nan"), float("nan"))
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(max(0.0, p * (1 - p)) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def clopper_pearson(successes: float, n: float) -> tuple[float, float]:
    """Clopper-Pearson's exact 95% interval for a proportion: its two one-sided binomial tests at
    2.5%, from beta quantiles. It never covers less than 95% at any p and n, where Wilson's dips
    to 93.7% at 20 items near p = .83 (bench/coverage.py). `n` and `successes` may be an
    effective sample size and its share (not whole numbers): see `estimate_over_items`."""
    if n <= 0:
        return (float("nan"), float("nan"))
    x = min(max(successes, 0.0), n)
    near = wilson(x, n)  # close to the exact ends: Newton's start
    low = beta_quantile(0.025, x, n - x + 1, near[0]) if x > 0 else 0.0
    high = beta_quantile(0.975, x + 1, n - x, near[1]) if x < n else 1.0
    return (low, high)


@dataclass(frozen=True)
class ItemEstimate:
    """Accuracy over items: the mean of item scores, its standard error and 95% interval."""

    n_items: int
    mean: float
    se: float
    ci95: tuple[float, float]
    method: str


def item_means(scores: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Each item's score: the mean over its runs (items without a run are left out)."""
    return {item: sum(runs) / len(runs) for item, runs in scores.items() if runs}


def clustered_se(values: Sequence[float], clusters: Sequence[object]) -> float:
    """Cluster-robust standard error of the mean (Miller eq. 4, with the C/(C-1) correction).

    Items in one cluster (a subtype, a shared image) are not independent; with every item its
    own cluster this is the ordinary standard error. nan below two clusters."""
    n = len(values)
    m = mean(values)
    sums: dict[object, float] = {}
    for value, cluster in zip(values, clusters, strict=True):
        sums[cluster] = sums.get(cluster, 0.0) + value - m
    c = len(sums)
    if c < 2:
        return float("nan")
    return math.sqrt(c / (c - 1) * sum(s * s for s in sums.values())) / n


def estimate_over_items(
    values: Sequence[float],
    *,
    one_run: bool,
    clusters: Sequence[object] | None = None,
    rows: float | None = None,
) -> ItemEstimate:
    """Mean, standard error and 95% interval of item scores `values` (each in [0, 1]).

    The standard error is sd(item scores)/sqrt(n), or clustered. The interval is Clopper-Pearson's
    at an effective sample size n_eff = p(1-p)/SE^2 (the design-effect exact interval): with one
    run per item (`one_run`, unclustered) n_eff is the number of items, the plain Clopper-Pearson
    interval; repeats that agree leave n_eff at about n (they do not narrow it), repeats that
    differ raise it toward n*K, and never past `rows` (n*K, the runs behind the items: the most
    information they hold, reached when every row is independent). Where SE is 0 or undefined
    (every item all right or all wrong, one item), n_eff = n. Wilson's interval in its place
    covered 92.5-93.7% at 20 items (bench/coverage.py, docs/reports.md)."""
    n = len(values)
    if n == 0:
        return ItemEstimate(0, float("nan"), float("nan"), (float("nan"), float("nan")), "no items")
    p = mean(values)
    exact = "Clopper-Pearson interval"
    if clusters is not None:
        se = clustered_se(values, clusters)
        how = f"clustered standard error over {len(set(clusters))} clusters, {exact} at n_eff"
    else:
        se = math.sqrt(sample_variance(values) / n) if n > 1 else float("nan")
        how = f"{exact} over items" if one_run else f"standard error over items, {exact} at n_eff"
    ci = clopper_pearson(p * n, n) if clusters is None and one_run else exact_at_n_eff(p, se, n, rows)
    return ItemEstimate(n, p, se, ci, how)


def exact_at_n_eff(p: float, se: float, n: float, most: float | None = None) -> tuple[float, float]:
    """Clopper-Pearson's interval for a share `p` with standard error `se` (clustered, say):
    at the effective sample size n_eff = p(1-p)/se², never past `most` (the rows behind it); at
    `n` where se is 0 or undefined or p is 0 or 1 (the design-effect exact interval)."""
    n_eff = p * (1 - p) / (se * se) if se > 0 and 0 < p < 1 else float(n)
    n_eff = min(n_eff, most) if most is not None else n_eff
    return clopper_pearson(p * n_eff, n_eff)


def item_estimate(
    scores: Mapping[str, Sequence[float]], clusters: Mapping[str, str] | None = None
) -> ItemEstimate:
    """`estimate_over_items` from item id -> per-run scores (and item id -> cluster)."""
    means = item_means(scores)
    one_run = all(len(runs) == 1 for runs in scores.values() if runs)
    values = list(means.values())
    labels = [clusters.get(item, item) for item in means] if clusters is not None else None
    rows = sum(len(runs) for runs in scores.values() if runs)
    return estimate_over_items(values, one_run=one_run, clusters=labels, rows=rows)


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson correlation; None below two points or when either side does not vary."""
    if len(x) < 2:
        return None
    mx, my = mean(x), mean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment (controls the family-wise error), in the input's order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg step-up adjustment (controls the false discovery rate), in order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i], reverse=True)
    adjusted = [0.0] * m
    running = 1.0
    for position, i in enumerate(order):
        rank = m - position
        running = min(running, m / rank * p_values[i])
        adjusted[i] = min(1.0, running)
    return adjusted


ADJUSTMENTS = {"holm": holm, "bh": benjamini_hochberg}
ADJUSTMENT_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg"}


def p_beside(p: float, level: float, digits: int = 2) -> str:
    """A p-value to `digits` significant digits, or as many more as it takes to read on its own
    side of `level`: beside a verdict at 0.05, p = 0.0496 prints "0.0496", never "0.05"."""
    if not math.isfinite(p):
        return str(p)
    for shown in range(digits, 17):
        text = f"{p:.{shown}g}"
        if (float(text) < level) == (p < level):
            return text
    return repr(p)


def points(value: float, sign: bool = True, decimals: int = 1) -> str:
    """A share in points (100 × value) to `decimals` places, or as many more as it takes for a
    value that is not 0 to read so: an interval end that excludes 0 printed "+0.0" beside a
    verdict of "better" (issue 43), and now prints "+0.004"."""
    scaled = 100 * value
    form = "+" if sign else ""
    for shown in range(decimals, 10):
        text = f"{scaled:{form}.{shown}f}"
        if scaled == 0 or float(text) != 0:
            return text
    return f"{scaled:{form}.1e}"


def human_count(n: int) -> str:
    """A count as people read it in a summary line: 812, 12.3k, 1.20M."""
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e4 else str(n)


def dollars(amount: float) -> str:
    """USD as people read it: cents from ten cents up (`$1,234.50`, `$0.17`), else two significant
    digits (`$0.022`, `$0.00038`), so a small run's spend never reads `$0.00` beside its limit."""
    rounded = float(f"{amount:.2g}")
    if rounded >= 0.1 or rounded <= 0:
        return f"${amount:,.2f}"
    if rounded < 1e-6:
        return "under $0.000001"
    from decimal import Decimal  # here: decimal is 2 ms of `bv report`'s start-up, for sums under $0.10

    whole, _, fraction = format(Decimal(f"{amount:.2g}"), "f").partition(".")
    return f"${whole}.{fraction:0<2}"


def counted(n: int, noun: str) -> str:
    """A count with its noun in the right number: `1 reply`, `2 replies`, `0 errors`."""
    if n == 1:
        return f"1 {noun}"
    return f"{n} {noun[:-1] + 'ies' if noun.endswith('y') and noun[-2] not in 'aeiou' else noun + 's'}"
