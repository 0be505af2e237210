"""An LLM judge's errors, measured on rows the rules decided, and the accuracy of the rows it
judged corrected for them (Rogan and Gladen 1978; Lee et al., arXiv 2511.21140).

With the judge's sensitivity q1 = P(judge says right | right) and specificity q0 = P(judge says
wrong | wrong), the share p it calls right has E[p] = (q0 + q1 − 1)θ + (1 − q0), so

    θ = (p + q0 − 1) / (q0 + q1 − 1)        (valid only when q0 + q1 > 1)

q0 and q1 are estimated on the calibration rows, whose truth the rules know; validity is
tested on those shares as measured (a judge that always says right, 100% and 0%, is no judge,
however the adjusted shares below happen to fall), and on the adjusted ones the interval uses.
The 95% interval is the delta method's over the three estimated shares, as Lee et al. give it:
their variances add,

    Var θ = [Var p + (1 − θ)² Var q0 + θ² Var q1] / (q0 + q1 − 1)²

so the calibration's own uncertainty widens it. Each share is first adjusted as Agresti and
Coull's (z²/2 added to its successes and to its failures), which keeps the interval's coverage
near 95% with calibration sets of a few dozen rows (tests/core/test_calibration.py simulates it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bv.core.stats import Z95, wilson


@dataclass(frozen=True)
class Corrected:
    estimate: float | None  # None: not valid (q0 + q1 ≤ 1, or an empty group)
    ci95: tuple[float, float] | None
    sensitivity: float | None
    sensitivity_ci95: tuple[float, float] | None
    specificity: float | None
    specificity_ci95: tuple[float, float] | None


def _adjusted(successes: float, n: float, z: float) -> tuple[float, float]:
    """A share with z²/2 added to its successes and failures, and its binomial variance."""
    total = n + z * z
    share = (successes + z * z / 2) / total
    return share, share * (1 - share) / total


def correct(
    said_right: float,
    judged: float,
    true_positive: int,
    positives: int,
    true_negative: int,
    negatives: int,
    judged_variance: float | None = None,
    z: float = Z95,
) -> Corrected:
    """The corrected accuracy of `judged` rows, `said_right` of which the judge called right,
    from a calibration set of `positives` right rows (the judge called `true_positive` right)
    and `negatives` wrong ones (`true_negative` called wrong). `judged_variance`: the variance
    of the judged rows' share when it is larger than the binomial one (repeats of one item are
    not independent: the caller's clustered variance)."""
    sens = true_positive / positives if positives else None
    spec = true_negative / negatives if negatives else None
    sens_ci = wilson(true_positive, positives, z) if positives else None
    spec_ci = wilson(true_negative, negatives, z) if negatives else None
    none = Corrected(None, None, sens, sens_ci, spec, spec_ci)
    # sens + spec > 1 in whole numbers (a float sum of 0.7 and 0.3 may fall either side of 1)
    better = true_positive * negatives + true_negative * positives > positives * negatives
    if not judged or sens is None or spec is None or not better:
        return none  # no better than a coin as measured, whatever the adjusted shares say
    p, var_p = _adjusted(said_right, judged, z)
    if judged_variance is not None:
        var_p = max(var_p, judged_variance)
    q1, var_q1 = _adjusted(true_positive, positives, z)
    q0, var_q0 = _adjusted(true_negative, negatives, z)
    youden = q0 + q1 - 1
    if youden <= 0:
        return none
    theta = _clipped((p + q0 - 1) / youden)
    se = math.sqrt(var_p + (1 - theta) ** 2 * var_q0 + theta**2 * var_q1) / youden
    ci = (max(0.0, theta - z * se), min(1.0, theta + z * se))
    estimate = _clipped((said_right / judged + spec - 1) / (sens + spec - 1))  # as measured
    return Corrected(estimate, ci, sens, sens_ci, spec, spec_ci)


def _clipped(value: float) -> float:
    return min(1.0, max(0.0, value))
