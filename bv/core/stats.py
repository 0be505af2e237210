"""The statistics of bv, in one place: over items, never over rows.

Repeats of one item are not independent questions (Miller, "Adding Error Bars to Evals",
arXiv 2411.00640): each item's score is its mean over its runs, and standard errors, intervals,
paired tests and power are computed over those item scores. docs/reports.md states each method;
tests/test_stats.py checks them against brute force, a seeded bootstrap and hand computations.
Also here: the population std over runs (the official run-to-run spread) and how counts are written.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

Alternative = Literal["two-sided", "greater"]
Z95 = NormalDist().inv_cdf(0.975)
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

    The interval is diff +- 1.96 SE with SE = sd(d)/sqrt(n) over per-item differences d. The
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
    ci = (max(-1.0, diff - Z95 * se), min(1.0, diff + Z95 * se)) if n > 1 else (float("nan"), float("nan"))
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
        correlation=pearson(xs, ys),
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
            return p, f"exact McNemar test (one run per item){side}"
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
        """Items needed to detect `delta` at `runs` per item (the data's by default)."""
        return math.ceil(self.z**2 * self.var_at(runs or self.runs) / delta**2)

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


def human_count(n: int) -> str:
    """A count as people read it in a summary line: 812, 12.3k, 1.20M."""
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e4 else str(n)


def counted(n: int, noun: str) -> str:
    """A count with its noun in the right number: `1 reply`, `2 replies`, `0 errors`."""
    if n == 1:
        return f"1 {noun}"
    return f"{n} {noun[:-1] + 'ies' if noun.endswith('y') and noun[-2] not in 'aeiou' else noun + 's'}"
