"""Small statistics for reports: mean, population std, Wilson interval, exact McNemar test,
and how counts are written."""

from __future__ import annotations

import math
from collections.abc import Sequence


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def pstdev(values: Sequence[float]) -> float:
    """Population standard deviation, as the official compute_score.py reports over runs."""
    if not values:
        return float("nan")
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score 95% interval for a proportion; sound near 0 and 1, unlike the normal one."""
    if n == 0:
        return (float("nan"), float("nan"))
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def mcnemar_exact(improved: int, regressed: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test of the discordant pairs at p = 1/2."""
    n = improved + regressed
    if n == 0:
        return 1.0
    k = min(improved, regressed)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def human_count(n: int) -> str:
    """A count as people read it in a summary line: 812, 12.3k, 1.20M."""
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e4 else str(n)


def counted(n: int, noun: str) -> str:
    """A count with its noun in the right number: `1 reply`, `2 replies`, `0 errors`."""
    if n == 1:
        return f"1 {noun}"
    return f"{n} {noun[:-1] + 'ies' if noun.endswith('y') and noun[-2] not in 'aeiou' else noun + 's'}"
