"""The corrected accuracy of an LLM-judged set (bv.core.calibration) covers the true accuracy
at ≥ 94% in a simulation of seeded judges with known sensitivity and specificity, over true
accuracies, error rates and calibration sizes; and it is the Rogan–Gladen estimate."""

from __future__ import annotations

import numpy as np
import pytest

from bv.core.calibration import correct

REPEATS = 1000
CASES = [  # (true accuracy, sensitivity, specificity, judged rows, right and wrong calibration rows)
    (theta, q1, q0, n, m1, m0)
    for theta in (0.2, 0.5, 0.8)
    for q1, q0 in ((0.95, 0.9), (0.85, 0.75))
    for n, m1, m0 in ((300, 150, 100), (200, 40, 30))
]


def simulate(theta, q1, q0, n, m1, m0, seed):
    rng = np.random.default_rng(seed)
    right = rng.binomial(n, theta, REPEATS)  # the judged rows truly right, per repeat
    said = rng.binomial(right, q1) + rng.binomial(n - right, 1 - q0)  # what the judge calls right
    tp, tn = rng.binomial(m1, q1, REPEATS), rng.binomial(m0, q0, REPEATS)
    covered = 0
    for k in range(REPEATS):
        ci = correct(int(said[k]), n, int(tp[k]), m1, int(tn[k]), m0).ci95
        covered += ci is not None and ci[0] <= theta <= ci[1]
    return covered / REPEATS


def test_the_corrected_interval_covers_the_truth_at_94_percent_or_more():
    coverage = {case: simulate(*case, seed=index) for index, case in enumerate(CASES)}
    for case, share in coverage.items():
        theta, q1, q0, n, m1, m0 = case
        print(f"theta {theta} sens {q1} spec {q0} n {n} m1 {m1} m0 {m0}: coverage {share:.3f}")
    overall = sum(coverage.values()) / len(coverage)
    print(f"overall coverage {overall:.4f} over {len(CASES)} cases x {REPEATS} runs")
    assert overall >= 0.94
    assert min(coverage.values()) >= 0.925  # no case far below: 1000 runs put ±1.4% of noise on each


def test_the_naive_share_is_biased_and_the_correction_removes_it():
    """A lenient judge (specificity 0.7) calls a 40% model's rows right 0.4·0.9 + 0.6·0.3 = 54% of
    the time; the correction gives back 40%, from the measured rates."""
    result = correct(540, 1000, 90, 100, 70, 100)
    assert result.sensitivity == 0.9 and result.specificity == 0.7
    assert result.estimate == pytest.approx((0.54 + 0.7 - 1) / (0.9 + 0.7 - 1))
    assert result.ci95[0] < 0.4 < result.ci95[1] and not result.ci95[0] < 0.54 < result.ci95[1]


def test_a_judge_no_better_than_chance_gives_no_correction():
    assert correct(50, 100, 5, 10, 5, 10).estimate is None  # q0 + q1 = 1
    assert correct(50, 100, 5, 10, 0, 0).ci95 is None  # no wrong row to measure specificity on


@pytest.mark.parametrize(("positives", "negatives"), [(30, 10), (10, 30), (20, 20)])
def test_a_judge_that_always_says_right_gives_no_correction_however_the_rows_split(positives, negatives):
    """Sensitivity 100%, specificity 0%: no judge at all (docs/judging.md: not valid). Its adjusted
    shares' sum exceeded 1 when the calibration held more right rows than wrong, and a corrected
    accuracy was printed; now the measured shares decide, whatever the split."""
    result = correct(40, 40, positives, positives, 0, negatives)
    assert (result.sensitivity, result.specificity) == (1.0, 0.0)
    assert result.estimate is None and result.ci95 is None
