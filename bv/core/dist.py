"""The normal and Student t distributions bv's intervals and tests read, from `math` alone: `bv
report` starts without `statistics` (and its fractions and decimal). tests/core/test_stats_methods.py
checks each against scipy."""

from __future__ import annotations

import functools
import math


def normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def normal_upper(x: float) -> float:
    """P(Z >= x), accurate far in the tail (where 1 - cdf would round to 0)."""
    return 0.5 * math.erfc(x / math.sqrt(2))


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 400):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1) < 1e-15:
            break
    return result


def _beta_regularized(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1 - math.exp(log_front) * _beta_fraction(b, a, 1 - x) / b


def t_upper(t: float, df: float) -> float:
    """P(T >= t) for Student's t with `df` degrees of freedom."""
    if math.isinf(df):
        return normal_upper(t)
    tail = 0.5 * _beta_regularized(df / 2, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1 - tail


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (0 < p < 1), by bisection on `t_upper` (kept: a report asks for
    the same few df again and again)."""
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while t_upper(high, df) > 1 - p:
        low, high = high, 2 * high
    for _ in range(200):
        middle = (low + high) / 2
        if t_upper(middle, df) > 1 - p:
            low = middle
        else:
            high = middle
        if high - low < 1e-13 * max(1.0, high):
            break
    return (low + high) / 2


def normal_quantile(p: float) -> float:
    """The z with P(Z <= z) = p (0 < p < 1), by bisection on the normal tail."""
    if p < 0.5:
        return -normal_quantile(1 - p)
    low, high = 0.0, 40.0
    for _ in range(200):
        middle = (low + high) / 2
        if normal_upper(middle) > 1 - p:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def beta_quantile(p: float, a: float, b: float, start: float | None = None) -> float:
    """The x with I_x(a, b) = p (0 < p < 1), for Clopper-Pearson's interval ends: Newton's method
    on the beta density from `start` (else the distribution's mean), kept inside a bisection
    bracket (a few steps where bisection alone took fifty: a report computes one per group and
    input)."""
    low, high = 0.0, 1.0
    x = start if start is not None and 0 < start < 1 else a / (a + b)
    log_norm = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    for _ in range(100):
        error = _beta_regularized(a, b, x) - p
        if error < 0:
            low = x
        else:
            high = x
        if abs(error) < 1e-14 or high - low < 1e-15:
            break
        density = math.exp(log_norm + (a - 1) * math.log(x) + (b - 1) * math.log1p(-x))
        step = x - error / density if density > 0 else -1.0
        x = step if low < step < high else (low + high) / 2
    return x
