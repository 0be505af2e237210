"""The gain of a skill handed back only when confirmed: its interval is computed as scipy's
truncated normal says, and among handed-back skills it covers the true gain at its nominal rate,
where the plain interval does not."""

from __future__ import annotations

import math
import random

import pytest
import scipy.stats as scipy_stats

from bv.core.selective import conditional_gain


@pytest.mark.parametrize(
    ("diff", "se", "cutoff"), [(0.05, 0.02, 0.04), (0.2, 0.03, 0.06), (0.041, 0.02, 0.04)]
)
def test_the_interval_is_the_truncated_normals(diff, se, cutoff):
    gain = conditional_gain(diff, se, cutoff)
    for mu, tail in ((gain.ci95[0], 0.025), (gain.estimate, 0.5), (gain.ci95[1], 0.975)):
        if -1 < mu < 1:  # not clipped to the range of a difference of accuracies
            upper = scipy_stats.truncnorm.sf(diff, (cutoff - mu) / se, math.inf, loc=mu, scale=se)
            assert upper == pytest.approx(tail, abs=1e-6)


def test_far_above_the_cutoff_it_is_the_plain_interval():
    gain = conditional_gain(0.30, 0.02, 0.04)
    assert gain.estimate == pytest.approx(0.30, abs=1e-9)
    assert gain.ci95 == pytest.approx((0.30 - 1.959964 * 0.02, 0.30 + 1.959964 * 0.02), abs=1e-5)


def test_just_above_the_cutoff_it_reaches_far_down():
    gain = conditional_gain(0.041, 0.02, 0.04)
    assert gain.ci95[0] < -0.03 < 0.041 < gain.ci95[1] and gain.estimate < 0.041


def test_among_handed_back_skills_it_covers_the_true_gain_at_its_nominal_rate():
    """Skills whose true gain is small and whose measured difference is normal around it are
    handed back when the difference passes the cutoff; the conditional interval covers the true
    gain in about 95% of those, the plain interval in far fewer."""
    rng = random.Random(42)
    se, cutoff = 0.03, 1.96 * 0.03
    kept = conditional = plain = 0
    while kept < 3000:
        truth = rng.uniform(-0.03, 0.04)
        diff = rng.gauss(truth, se)
        if diff < cutoff:
            continue
        kept += 1
        low, high = conditional_gain(diff, se, cutoff).ci95
        conditional += low <= truth <= high
        plain += diff - 1.96 * se <= truth <= diff + 1.96 * se
    assert abs(conditional / kept - 0.95) < 3 * math.sqrt(0.95 * 0.05 / kept) + 0.005
    assert plain / kept < 0.90
