"""The exact paired test bv optimize decides with: B better than A, one-sided, over items.

Each item's difference is B's mean score minus A's (over its runs). If the two skills are the
same, each item's difference is as likely to come out positive as negative: the sign-flip
(randomization) test counts, over all 2^n ways to flip the signs of the items that moved, how
many give a total at least the one observed. With one run per item this is the exact McNemar
test (a binomial test on the items that changed). It keeps its level at every number of items,
where the Newcombe and t intervals of bv.core.paired are liberal below a few dozen
(tests/core/test_signflip.py checks both by enumeration).

The count is exact (integer arithmetic) while the items' total, in units of 1/L (L the least
common multiple of the run counts), stays under EXACT_LIMIT; beyond it the test uses its normal
approximation, which is then accurate (many items moved), and says so in `method`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bv.core.dist import normal_quantile, normal_upper

EXACT_LIMIT = 20_000  # sum of |difference| in lattice units up to which the count is exact
_LATTICE_LIMIT = 720  # the largest common denominator of run counts counted exactly
EXACT = "exact sign-flip test over per-item differences, one-sided"
NORMAL = "sign-flip test over per-item differences (normal approximation), one-sided"


@dataclass(frozen=True)
class SignFlip:
    """The test of B > A over the items both sides have a finished run of."""

    n_items: int  # items compared
    moved: int  # items whose difference is not 0
    diff: float  # mean difference over the n items (B - A)
    se: float  # standard error of `diff` over items (sample sd / sqrt(n))
    p_value: float  # one-sided: the chance of a total at least this large if the skills are the same
    alpha: float
    # where rejecting starts, as a mean difference: midway between the smallest total the test
    # rejects and the next total below it (a continuity correction, for bv.core.selective's
    # normal model); None: no total can be rejected at these items
    critical: float | None
    method: str

    @property
    def rejects(self) -> bool:
        return self.p_value < self.alpha


def _counts(runs: Sequence[float]) -> tuple[int, int] | None:
    """(right, runs) of one item's scores, or None when a score is not 0 or 1."""
    right = 0
    for score in runs:
        if score == 1:
            right += 1
        elif score != 0:
            return None
    return right, len(runs)


def _lattice(pairs: Sequence[tuple[tuple[int, int], tuple[int, int]]]) -> tuple[int, list[int]] | None:
    """The common denominator L of every item's difference and each difference times L."""
    denominator = 1
    for (_, runs_a), (_, runs_b) in pairs:
        denominator = math.lcm(denominator, runs_a, runs_b)
        if denominator > _LATTICE_LIMIT:
            return None
    units = [rb * (denominator // nb) - ra * (denominator // na) for (ra, na), (rb, nb) in pairs]
    return denominator, units


def _null_counts(magnitudes: Sequence[int]) -> tuple[int, list[int]]:
    """The null distribution of the sum of +-m over `magnitudes`, as (lowest total, counts of each
    total from it upwards); the counts add up to 2^len(magnitudes)."""
    groups: dict[int, int] = {}
    for m in magnitudes:
        groups[m] = groups.get(m, 0) + 1
    low, counts = 0, [1]
    for m, c in sorted(groups.items()):
        ways = [math.comb(c, j) for j in range(c + 1)]
        grown = [0] * (len(counts) + 2 * m * c)
        for k, n_k in enumerate(counts):
            if n_k:
                for j, w in enumerate(ways):
                    grown[k + 2 * m * j] += n_k * w
        low -= m * c
        counts = grown
    return low, counts


def sign_flip_test(
    a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]], *, alpha: float
) -> SignFlip:
    """B better than A, one-sided, over items: `a` and `b` map item id -> its runs' scores (0 or 1)."""
    common = [item for item in a if item in b and a[item] and b[item]]
    n = len(common)
    if n == 0:
        return SignFlip(0, 0, math.nan, math.nan, 1.0, alpha, None, EXACT)
    diffs = [sum(b[i]) / len(b[i]) - sum(a[i]) / len(a[i]) for i in common]
    diff = sum(diffs) / n
    var = sum((d - diff) ** 2 for d in diffs) / (n - 1) if n > 1 else math.nan
    se = math.sqrt(var / n) if n > 1 else math.nan
    moved = sum(1 for d in diffs if d != 0)
    counted = [(_counts(a[i]), _counts(b[i])) for i in common]
    pairs = [(x, y) for x, y in counted if x is not None and y is not None]
    lattice = _lattice(pairs) if len(pairs) == n else None
    if lattice is not None and sum(abs(u) for u in lattice[1]) <= EXACT_LIMIT:
        denominator, units = lattice
        low, counts = _null_counts([abs(u) for u in units if u])
        observed = sum(units) - low
        total = 2 ** sum(1 for u in units if u)
        tail = 0
        rejecting: int | None = None  # the smallest total the test rejects
        critical = None
        p = 1.0
        for k in range(len(counts) - 1, -1, -1):  # from the largest total down
            tail += counts[k]
            if k == observed:
                p = tail / total
            if counts[k] and tail / total < alpha:
                rejecting = k
            elif counts[k] and rejecting is not None and critical is None:  # midway to the next total
                critical = (k + rejecting) / 2
        if rejecting is not None:
            critical = ((critical if critical is not None else rejecting) + low) / (denominator * n)
        return SignFlip(n, moved, diff, se, min(1.0, p), alpha, critical, EXACT)
    # many items moved: the sum of +-d_i is close to normal with variance sum d_i^2
    spread = math.sqrt(sum(d * d for d in diffs))
    p = normal_upper(diff * n / spread) if spread > 0 else 1.0
    critical = normal_quantile(1 - alpha) * spread / n if spread > 0 else None
    return SignFlip(n, moved, diff, se, p, alpha, critical, NORMAL)
