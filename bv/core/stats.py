"""The statistics of bv, in one place: over items, never over rows.

Repeats of one item are not independent questions (Miller, "Adding Error Bars to Evals",
arXiv 2411.00640): each item's score is its mean over its runs, and standard errors, intervals,
paired tests and power are computed over those item scores. docs/reports.md states each method;
tests/test_stats.py checks them against brute force, a seeded bootstrap and hand computations.
Also here: the population std over runs (the official run-to-run spread) and how counts are written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Alternative = Literal["two-sided", "greater"]
# The normal distribution's 97.5% point, NormalDist().inv_cdf(0.975) (tests/test_stats.py checks
# it): a constant, so that `bv report` does not import `statistics` (and fractions, decimal) to start.
Z95 = 1.9599639845400536
MONTE_CARLO_RESAMPLES = 20_000
MONTE_CARLO_SEED = 20  # fixed: the same data gives the same p-value on every machine
_EXACT_BITS = 1 << 26  # the exact permutation distribution is held in one int of at most this many bits
_TIE = 1e-12  # item scores closer than this are equal (1/3 computed two ways)


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
    values: Sequence[float], *, one_run: bool, clusters: Sequence[object] | None = None
) -> ItemEstimate:
    """Mean, standard error and 95% interval of item scores `values` (each in [0, 1]).

    The standard error is sd(item scores)/sqrt(n), or clustered. The interval is Wilson's with
    an effective sample size n_eff = p(1-p)/SE^2 (the design-effect Wilson interval): with one
    run per item (`one_run`, unclustered) n_eff is the number of items, the plain Wilson interval;
    repeats that agree leave n_eff at about n (they do not narrow it), repeats that differ raise it
    toward n*K. Where SE is 0 or undefined (every item all right or all wrong, one item), n_eff = n."""
    n = len(values)
    if n == 0:
        return ItemEstimate(0, float("nan"), float("nan"), (float("nan"), float("nan")), "no items")
    p = mean(values)
    if clusters is not None:
        se = clustered_se(values, clusters)
        how = f"clustered standard error over {len(set(clusters))} clusters, Wilson interval at n_eff"
    else:
        se = math.sqrt(sample_variance(values) / n) if n > 1 else float("nan")
        how = (
            "Wilson interval over items" if one_run else "standard error over items, Wilson interval at n_eff"
        )
    if clusters is None and one_run:
        n_eff = float(n)
    else:
        n_eff = p * (1 - p) / (se * se) if se > 0 and 0 < p < 1 else float(n)
    return ItemEstimate(n, p, se, wilson(p * n_eff, n_eff), how)


def item_estimate(
    scores: Mapping[str, Sequence[float]], clusters: Mapping[str, str] | None = None
) -> ItemEstimate:
    """`estimate_over_items` from item id -> per-run scores (and item id -> cluster)."""
    means = item_means(scores)
    one_run = all(len(runs) == 1 for runs in scores.values() if runs)
    values = list(means.values())
    labels = [clusters.get(item, item) for item in means] if clusters is not None else None
    return estimate_over_items(values, one_run=one_run, clusters=labels)


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson correlation; None below two points or when either side does not vary."""
    if len(x) < 2:
        return None
    mx, my = mean(x), mean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None


def mcnemar_exact(improved: int, regressed: int, alternative: Alternative = "two-sided") -> float:
    """Exact McNemar p-value: a binomial test of the discordant pairs at p = 1/2.

    "greater" is the chance of at least `improved` improvements among the discordant pairs."""
    n = improved + regressed
    if n == 0:
        return 1.0
    if alternative == "greater":
        return sum(math.comb(n, i) for i in range(improved, n + 1)) / 2**n
    k = min(improved, regressed)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def sign_flip_exact(steps: Sequence[int], alternative: Alternative = "two-sided") -> float:
    """Exact paired permutation test of integer differences: every sign assignment, counted.

    Under no difference each item's difference is as likely negated; the statistic is the sum.
    The counts of every sum are the coefficients of prod(1 + x^|d|), built in one int by shifts
    (linear in items times the range of sums), not by enumerating 2^n assignments."""
    magnitudes = [abs(d) for d in steps if d]
    n = len(magnitudes)
    if n == 0:
        return 1.0
    total = sum(magnitudes)
    width = (n + 8) // 8  # bytes per coefficient: counts reach 2^n
    distribution = 1
    for magnitude in magnitudes:
        distribution += distribution << (magnitude * width * 8)
    raw = distribution.to_bytes((total + 1) * width, "little")
    observed = sum(d for d in steps if d > 0)  # the sum of the positive side; T = 2*observed - total

    def count_from(low: int) -> int:
        return sum(int.from_bytes(raw[k * width : (k + 1) * width], "little") for k in range(low, total + 1))

    if alternative == "greater":
        return count_from(observed) / 2**n
    distance = abs(2 * observed - total)
    if distance == 0:
        return 1.0
    return min(1.0, 2 * count_from((total + distance) // 2) / 2**n)


def sign_flip_monte_carlo(
    diffs: Sequence[float], alternative: Alternative = "two-sided", resamples: int = MONTE_CARLO_RESAMPLES
) -> float:
    """The same test by random sign flips with a fixed seed: (1 + as extreme) / (1 + resamples)."""
    values = [d for d in diffs if abs(d) > _TIE]
    if not values:
        return 1.0
    observed = sum(values)
    import random  # only here: `bv report` starts without it

    rng = random.Random(MONTE_CARLO_SEED)
    n = len(values)
    extreme = 0
    for _ in range(resamples):
        bits = rng.getrandbits(n)
        total = sum(v if bits >> i & 1 else -v for i, v in enumerate(values))
        if alternative == "greater":
            extreme += total >= observed - _TIE
        else:
            extreme += abs(total) >= abs(observed) - _TIE
    return (1 + extreme) / (1 + resamples)


@dataclass(frozen=True)
class PairedComparison:
    """B against A over the items both have (docs/reports.md, "Comparing two inputs")."""

    n_items: int  # items both sides have
    mean_a: float  # item-level accuracy (each item's mean over its runs)
    mean_b: float
    diff: float  # mean_b - mean_a
    ci95: tuple[float, float]  # interval on diff, over items
    p_value: float
    method: str  # e.g. "exact sign-flip permutation test on per-item differences"
    improved: int  # per item
    regressed: int
    unchanged: int
    correlation: float | None  # of the two sides' item scores
    se: float = float("nan")  # standard error of diff, over items
    var_diff: float = float("nan")  # sample variance of the per-item differences


def newcombe_paired(mean_a: float, mean_b: float, n: float, correlation: float | None) -> tuple[float, float]:
    """Newcombe's score interval (1998, method 10) for the paired difference mean_b - mean_a:
    the two Wilson intervals combined through the correlation of the pairs. Sound near 0 and 1
    and when no item moved, where the normal interval collapses to a point."""
    low_a, high_a = wilson(mean_a * n, n)
    low_b, high_b = wilson(mean_b * n, n)
    phi = correlation or 0.0
    down = math.sqrt(
        max(
            0.0,
            (mean_b - low_b) ** 2 - 2 * phi * (mean_b - low_b) * (high_a - mean_a) + (high_a - mean_a) ** 2,
        )
    )
    up = math.sqrt(
        max(
            0.0,
            (high_b - mean_b) ** 2 - 2 * phi * (high_b - mean_b) * (mean_a - low_a) + (mean_a - low_a) ** 2,
        )
    )
    diff = mean_b - mean_a
    return (max(-1.0, diff - down), min(1.0, diff + up))


def _run_counts(runs: Sequence[float]) -> tuple[int, int] | None:
    """(right, runs) when every score is 0 or 1, else None."""
    right = 0
    for score in runs:
        if score == 1:
            right += 1
        elif score != 0:
            return None
    return right, len(runs)


def paired_comparison(
    a: Mapping[str, Sequence[float]],
    b: Mapping[str, Sequence[float]],
    *,
    alternative: Alternative = "two-sided",
) -> PairedComparison:
    """Compare b with a per item: `a` and `b` map item id -> that item's per-run scores.

    The interval is diff +- 1.96 SE with SE = sd(d)/sqrt(n) over per-item differences d; with one
    run per item, or SE 0, Newcombe's paired score interval (`newcombe_paired`). The
    test: exact McNemar when every item has one run on each side; otherwise the exact paired
    permutation (sign-flip) test of the per-item differences, or with non-0/1 scores or too wide
    a range of sums, that test by 20,000 seeded random sign flips. "greater" tests b > a."""
    common = [item for item in a if item in b and a[item] and b[item]]
    n = len(common)
    xs = [sum(a[item]) / len(a[item]) for item in common]
    ys = [sum(b[item]) / len(b[item]) for item in common]
    diffs = [y - x for x, y in zip(xs, ys, strict=True)]
    improved = sum(d > _TIE for d in diffs)
    regressed = sum(d < -_TIE for d in diffs)
    if n == 0:
        nan = float("nan")
        return PairedComparison(0, nan, nan, nan, (nan, nan), 1.0, "no common items", 0, 0, 0, None)
    diff = mean(diffs)
    var = sample_variance(diffs)
    se = math.sqrt(var / n) if n > 1 else float("nan")
    correlation = pearson(xs, ys)
    one_run = all(len(a[item]) == 1 and len(b[item]) == 1 for item in common)
    if one_run or not se > 0:  # one run per item, or every item moved alike (nan below 2 items)
        ci = newcombe_paired(mean(xs), mean(ys), n, correlation)
    else:
        ci = (max(-1.0, diff - Z95 * se), min(1.0, diff + Z95 * se))
    p, method = _paired_test(common, a, b, diffs, improved, regressed, alternative)
    return PairedComparison(
        n_items=n,
        mean_a=mean(xs),
        mean_b=mean(ys),
        diff=diff,
        ci95=ci,
        p_value=p,
        method=method,
        improved=improved,
        regressed=regressed,
        unchanged=n - improved - regressed,
        correlation=correlation,
        se=se,
        var_diff=var,
    )


def _paired_test(
    common: Sequence[str],
    a: Mapping[str, Sequence[float]],
    b: Mapping[str, Sequence[float]],
    diffs: Sequence[float],
    improved: int,
    regressed: int,
    alternative: Alternative,
) -> tuple[float, str]:
    """The p-value of a paired comparison and the name of its test."""
    side = "" if alternative == "two-sided" else ", one-sided (b > a)"
    counts = [(_run_counts(a[item]), _run_counts(b[item])) for item in common]
    binary = [(x, y) for x, y in counts if x is not None and y is not None]
    if len(binary) == len(counts):
        if all(x[1] == y[1] == 1 for x, y in binary):
            p = mcnemar_exact(improved, regressed, alternative)
            return p, f"exact McNemar test, one run per item{side}"
        scale = math.lcm(*{k for x, y in binary for k in (x[1], y[1])})
        steps = [y[0] * (scale // y[1]) - x[0] * (scale // x[1]) for x, y in binary]
        nonzero = sum(1 for s in steps if s)
        if sum(abs(s) for s in steps) * (nonzero + 8) <= _EXACT_BITS:
            p = sign_flip_exact(steps, alternative)
            return p, f"exact sign-flip permutation test on per-item differences{side}"
    p = sign_flip_monte_carlo(diffs, alternative)
    return p, (
        f"sign-flip permutation test on per-item differences, {MONTE_CARLO_RESAMPLES} random flips "
        f"(seed {MONTE_CARLO_SEED}){side}"
    )


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
