"""The gain of a skill handed back only because a test confirmed it, corrected for that choice.

bv optimize hands back its best skill only when the test split's comparison with the seed
passes (bv.core.signflip). Handed-back skills are then the ones whose test difference came out
high, so the plain interval around that difference is too optimistic: among them it covers the
true gain less often than it says. The conditional interval below corrects for it (Lee, Sun, Sun
and Taylor, Ann. Statist. 2016; Fithian, Sun and Taylor, arXiv 1410.2597). The difference is
taken as normal with its standard error, and the handing back as the event "difference >=
cutoff" (the test's critical value). Given that event, the difference follows a normal truncated
below at the cutoff; the interval holds every true gain at which the observed difference lies
between that truncated distribution's 2.5% and 97.5% points, and the estimate is the gain at
which it is the median. bench/optimize_sim.py measures its coverage among handed-back skills.

Far above the cutoff it is the plain interval; just above it, it reaches far down, because a
skill that barely passed tells little about how much it gains.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bv.core.dist import normal_upper

METHOD = "conditional on the test having confirmed it (normal, truncated at the test's cutoff)"


def _log_upper(x: float) -> float:
    """log P(Z >= x), accurate in both tails."""
    if x < 30:
        return math.log(normal_upper(x)) if x > -8 else math.log1p(-normal_upper(-x))
    return -x * x / 2 - math.log(x * math.sqrt(2 * math.pi)) + math.log1p(-1 / (x * x) + 3 / x**4)


def _beyond(diff: float, cutoff: float, se: float, mu: float) -> float:
    """P(X >= diff | X >= cutoff) for X ~ N(mu, se^2): rises from 0 to 1 as mu grows."""
    return math.exp(_log_upper((diff - mu) / se) - _log_upper((cutoff - mu) / se))


def _solve(target: float, diff: float, cutoff: float, se: float) -> float:
    low, high = cutoff - 40 * se - 2.0, max(diff, cutoff) + 40 * se + 2.0
    for _ in range(200):
        middle = (low + high) / 2
        if _beyond(diff, cutoff, se, middle) < target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


@dataclass(frozen=True)
class ConditionalGain:
    estimate: float  # median-unbiased given the handing back
    ci95: tuple[float, float]
    method: str = METHOD


def conditional_gain(diff: float, se: float, cutoff: float, level: float = 0.95) -> ConditionalGain:
    """The gain and its interval given that `diff` (standard error `se`) passed `diff >= cutoff`.
    Bounded to [-1, 1], as a difference of accuracies is."""
    if not se > 0:  # every item moved alike: nothing to correct with; the difference itself
        return ConditionalGain(diff, (diff, diff))
    diff = max(diff, cutoff)
    tail = (1 - level) / 2
    bounded = [max(-1.0, min(1.0, _solve(t, diff, cutoff, se))) for t in (tail, 0.5, 1 - tail)]
    return ConditionalGain(bounded[1], (bounded[0], bounded[2]))
