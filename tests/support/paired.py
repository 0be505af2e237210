"""Newcombe's paired interval computed independently of bv (on scipy), to hold bv.core.paired to."""

from __future__ import annotations

import math

import scipy.stats as scipy_stats


def independent_newcombe(a: int, b: int, c: int, d: int, level: float = 0.95) -> tuple[float, float]:
    """Method 10 written from the paper's formulas on scipy's Wilson intervals (not bv's code)."""
    n = a + b + c + d
    first = scipy_stats.binomtest(a + b, n).proportion_ci(level, method="wilson")
    second = scipy_stats.binomtest(a + c, n).proportion_ci(level, method="wilson")
    p1, p2 = (a + b) / n, (a + c) / n
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    if margins == 0:
        phi = 0.0
    elif a * d > b * c:
        phi = max(a * d - b * c - n / 2, 0) / math.sqrt(margins)
    else:
        phi = (a * d - b * c) / math.sqrt(margins)
    dl, du = p1 - first.low, first.high - p1
    el, eu = p2 - second.low, second.high - p2
    delta = math.sqrt(max(dl**2 - 2 * phi * dl * eu + eu**2, 0))
    epsilon = math.sqrt(max(du**2 - 2 * phi * du * el + el**2, 0))
    theta = (b - c) / n
    return max(theta - delta, -1.0), min(theta + epsilon, 1.0)
