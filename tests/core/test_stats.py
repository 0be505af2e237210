"""bv.core.stats against independent computations: scipy, a seeded bootstrap,
and cases worked by hand (docs/reports.md states each method)."""

from __future__ import annotations

import math
import random
import statistics

import pytest
import scipy.stats as scipy_stats

from bv.core.paired import newcombe_paired, paired_comparison
from bv.core.power import PowerPlan, paired_power, single_power
from bv.core.stats import (
    Z95,
    benjamini_hochberg,
    clustered_se,
    estimate_over_items,
    holm,
    item_estimate,
)


def exact(successes: float, n: float) -> tuple[float, float]:
    """Clopper-Pearson's 95% interval from scipy's beta quantiles (n may be an effective size)."""
    low = scipy_stats.beta.ppf(0.025, successes, n - successes + 1) if successes > 0 else 0.0
    high = scipy_stats.beta.ppf(0.975, successes + 1, n - successes) if successes < n else 1.0
    return (float(low), float(high))


def test_z95_is_the_normal_distributions_975_point():
    assert Z95 == statistics.NormalDist().inv_cdf(0.975)


def issue_example() -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Issue 20: 40 items, 3 repeats against a deterministic server; per item 6 improved, 3 regressed."""
    a: dict[str, list[float]] = {}
    b: dict[str, list[float]] = {}
    for i in range(40):
        before, after = (0.0, 1.0) if i < 6 else (1.0, 0.0) if i < 9 else (float(i % 2), float(i % 2))
        a[str(i)] = [before] * 3
        b[str(i)] = [after] * 3
    return a, b


def test_issue_example_is_tested_per_item_not_per_row():
    a, b = issue_example()
    result = paired_comparison(a, b)
    assert (result.n_items, result.improved, result.regressed, result.unchanged) == (40, 6, 3, 31)
    # The t test on the 40 per-item differences (6 at +1, 3 at -1), as scipy computes it
    diffs = [1.0] * 6 + [-1.0] * 3 + [0.0] * 31
    assert result.p_value == pytest.approx(scipy_stats.ttest_1samp(diffs, 0).pvalue, rel=1e-9)
    assert 0.3 < result.p_value < 0.4 and "per-item" in result.method
    # Per (id, run) it would have been 120 rows, and a p near 0.12, overconfident.
    rows = [1.0] * 18 + [-1.0] * 9 + [0.0] * 93
    assert scipy_stats.ttest_1samp(rows, 0).pvalue < 0.2
    assert result.diff == pytest.approx(3 / 40)


def test_interval_on_the_difference_matches_a_seeded_bootstrap():
    rng = random.Random(11)
    a = {str(i): [float(rng.random() < 0.5) for _ in range(3)] for i in range(200)}
    b = {i: [float(rng.random() < (0.8 if sum(r) else 0.3)) for _ in range(3)] for i, r in a.items()}
    result = paired_comparison(a, b)
    diffs = [statistics.mean(b[i]) - statistics.mean(a[i]) for i in a]
    boot = random.Random(7)
    means = sorted(sum(boot.choices(diffs, k=len(diffs))) / len(diffs) for _ in range(2000))
    low, high = means[50], means[1950]
    assert result.ci95[0] == pytest.approx(low, abs=0.012)
    assert result.ci95[1] == pytest.approx(high, abs=0.012)
    xs = [statistics.mean(a[i]) for i in a]
    ys = [statistics.mean(b[i]) for i in a]
    assert result.correlation == pytest.approx(statistics.correlation(xs, ys))
    assert result.se == pytest.approx(statistics.stdev(diffs) / math.sqrt(len(diffs)))


def test_item_interval_matches_a_seeded_bootstrap_with_repeats():
    rng = random.Random(5)
    difficulty = [rng.random() for _ in range(300)]
    scores = {str(i): [float(rng.random() < p) for _ in range(4)] for i, p in enumerate(difficulty)}
    estimate = item_estimate(scores)
    values = [statistics.mean(r) for r in scores.values()]
    boot = random.Random(9)
    means = sorted(sum(boot.choices(values, k=len(values))) / len(values) for _ in range(2000))
    assert estimate.ci95[0] == pytest.approx(means[50], abs=0.01)
    assert estimate.ci95[1] == pytest.approx(means[1950], abs=0.01)
    assert estimate.se == pytest.approx(statistics.stdev(values) / math.sqrt(300))


def test_identical_repeats_do_not_narrow_the_interval():
    once = {str(i): [float(i % 3 == 0)] for i in range(60)}
    thrice = {item: runs * 3 for item, runs in once.items()}
    one, three = item_estimate(once), item_estimate(thrice)
    # one run: the plain Clopper-Pearson interval, as scipy's exact binomial test gives it
    assert one.ci95 == pytest.approx(tuple(scipy_stats.binomtest(20, 60).proportion_ci(0.95, "exact")))
    assert three.mean == one.mean
    assert three.ci95[0] <= one.ci95[0] and three.ci95[1] >= one.ci95[1]
    assert three.ci95[1] - three.ci95[0] == pytest.approx(one.ci95[1] - one.ci95[0], rel=0.02)
    # and the paired test of identical repeats is as sure as one run's, not three times as sure
    other = {item: [float(int(item) % 2 == 0)] for item in once}
    p_once = paired_comparison(once, other).p_value
    p_thrice = paired_comparison(thrice, {i: r * 3 for i, r in other.items()}).p_value
    assert p_thrice == pytest.approx(p_once, rel=0.25)


def test_item_estimate_by_hand():
    got = estimate_over_items([1.0, 0.5, 0.0], one_run=False)
    assert got.mean == 0.5
    assert got.se == pytest.approx(math.sqrt(0.25 / 3))  # sample variance 0.25 over 3 items
    n_eff = 0.25 / got.se**2  # p(1-p) / SE^2 = 3
    assert got.ci95 == pytest.approx(exact(0.5 * n_eff, n_eff))
    all_right = estimate_over_items([1.0] * 10, one_run=False)
    assert all_right.ci95 == pytest.approx(exact(10, 10))  # SE 0: n_eff falls back to n
    assert all_right.ci95 == pytest.approx((0.025 ** (1 / 10), 1.0))  # (2.5%)^(1/n), by hand


def test_clustered_standard_error_by_hand():
    values = [1.0, 1.0, 0.0, 0.0]
    # clusters {a: 1, 1}, {b: 0, 0}: residual sums +1 and -1, C/(C-1) = 2 -> sqrt(2 * 2) / 4
    assert clustered_se(values, ["a", "a", "b", "b"]) == pytest.approx(0.5)
    # every item its own cluster: the ordinary standard error
    assert clustered_se(values, [0, 1, 2, 3]) == pytest.approx(statistics.stdev(values) / 2)
    assert math.isnan(clustered_se(values, ["x"] * 4))
    clustered = item_estimate({str(i): [v] for i, v in enumerate(values)}, clusters={"0": "a", "1": "a"})
    assert clustered.method.startswith("clustered")


def test_holm_and_benjamini_hochberg_by_hand():
    p = [0.01, 0.04, 0.03, 0.005]
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert benjamini_hochberg([]) == [] and holm([]) == []


def test_power_formula_worked_case():
    plan = PowerPlan(n_items=388, runs=1, var_diff=0.25, noise_per_run=0.0)
    z = statistics.NormalDist().inv_cdf(0.975) + statistics.NormalDist().inv_cdf(0.8)
    assert plan.z == pytest.approx(2.8016, abs=1e-4)
    assert plan.mde == pytest.approx(z * math.sqrt(0.25 / 388)) == pytest.approx(0.0711, abs=1e-4)
    assert plan.items_for(0.03) == math.ceil(z**2 * 0.25 / 0.03**2) == 2181
    # run-to-run noise: Var(d; K) = between + noise / K
    noisy = PowerPlan(n_items=388, runs=3, var_diff=0.1, noise_per_run=0.15)
    assert noisy.between == pytest.approx(0.05)
    assert noisy.var_at(6) == pytest.approx(0.075)
    runs = noisy.runs_for(0.04)
    assert (
        runs is not None
        and noisy.var_at(runs) * z**2 / 0.04**2 <= 388 < noisy.var_at(runs - 1) * z**2 / 0.04**2
    )
    assert noisy.runs_for(0.01) is None  # the items' own differences are too spread for any K


def test_power_from_data():
    a, b = issue_example()
    plan = paired_power(a, b)
    diffs = [statistics.mean(b[i]) - statistics.mean(a[i]) for i in a]
    assert plan.var_diff == pytest.approx(statistics.variance(diffs))
    assert plan.noise_per_run == 0.0 and plan.runs == 3  # identical repeats: no run-to-run noise
    single = single_power(a)
    assert single.var_diff == pytest.approx(2 * statistics.variance([statistics.mean(r) for r in a.values()]))


def test_paired_comparison_only_on_common_items():
    a = {"1": [1.0], "2": [0.0], "3": [1.0]}
    b = {"2": [1.0], "3": [1.0], "4": [0.0]}
    result = paired_comparison(a, b)
    assert result.n_items == 2 and result.improved == 1 and result.unchanged == 1
    assert result.mean_a == 0.5 and result.mean_b == 1.0
    empty = paired_comparison({"1": [1.0]}, {"2": [1.0]})
    assert empty.n_items == 0 and empty.p_value == 1.0


def test_one_run_difference_interval_is_newcombes_and_covers():
    # no item moved: the normal interval would be the point 0; Newcombe's is not
    same = {str(i): [float(i < 3)] for i in range(10)}
    result = paired_comparison(same, same)
    assert result.diff == 0 and result.ci95[0] < -0.1 and result.ci95[1] > 0.1
    assert result.ci95 == pytest.approx(newcombe_paired(3, 0, 0, 7))
    # its coverage on simulated pairs (seeded): near 95%, never far below
    rng = random.Random(1)
    covered = 0
    for _ in range(400):
        a = {str(i): [float(rng.random() < 0.6)] for i in range(30)}
        b = {i: [float(rng.random() < (0.9 if r[0] else 0.3))] for i, r in a.items()}
        # true difference: P(b right) - P(a right) = 0.6 * 0.9 + 0.4 * 0.3 - 0.6 = 0.06
        low, high = paired_comparison(a, b).ci95
        covered += low <= 0.06 <= high
    assert 0.92 <= covered / 400 <= 0.99


def test_items_needed_at_the_datas_runs_is_the_documented_formula():
    """Issue 33: on a null A/B where Var(d) < noise/K the split clamped `between` at 0 and asked
    for noise/K (367 items instead of 282); at the data's runs it is z^2 Var(d) / delta^2."""
    plan = PowerPlan(n_items=100, runs=3, var_diff=0.010, noise_per_run=0.060)
    z = statistics.NormalDist().inv_cdf(0.975) + statistics.NormalDist().inv_cdf(0.8)
    assert plan.items_for(0.03) == math.ceil(z**2 * 0.010 / 0.03**2)
    assert plan.items_for(0.03, runs=6) == math.ceil(z**2 * (0.0 + 0.060 / 6) / 0.03**2)


@pytest.mark.parametrize(
    ("p", "digits", "shown"),
    [(0.04999, 2, "0.04999"), (0.0496, 2, "0.0496"), (0.0504, 2, "0.05"), (0.05, 3, "0.05"),
     (0.26, 2, "0.26"), (0.049999999, 3, "0.049999999"), (1e-30, 2, "1e-30"), (1.0, 2, "1")],
)  # fmt: skip
def test_a_p_value_reads_on_its_own_side_of_the_level(p, digits, shown):
    """A p below 0.05 never prints as 0.05 (nor one at or above it as below)."""
    from bv.core.stats import p_beside

    assert p_beside(p, 0.05, digits) == shown
    assert (float(shown) < 0.05) == (p < 0.05)


@pytest.mark.parametrize(
    ("value", "sign", "shown"),
    [(6.2e-6, True, "+0.001"), (-4e-5, True, "-0.004"), (0.0, True, "+0.0"), (0.268, True, "+26.8"),
     (0.136, False, "13.6"), (-0.048, True, "-4.8"), (1e-12, True, "+1.0e-10")],
)  # fmt: skip
def test_a_share_in_points_that_is_not_zero_never_prints_as_zero(value, sign, shown):
    """An interval end that excludes 0 read "+0.0" beside a verdict of "better"."""
    from bv.core.stats import points

    assert points(value, sign) == shown
