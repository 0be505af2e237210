"""The exact sign-flip test keeps its level at every number of items, checked by enumeration, and
its p-value is the one an independent count of every sign pattern gives (and scipy's binomial
test with one run per item); the paired interval bv gated with before is liberal at small n."""

from __future__ import annotations

import itertools
import math

import pytest
import scipy.stats as scipy_stats

from bv.core.paired import paired_comparison
from bv.core.signflip import EXACT, NORMAL, sign_flip_test

LEVELS = (0.01, 0.025, 0.05, 0.1)


def sides(units: list[int], runs: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Two sides whose item i differs by units[i]/runs (B - A), `runs` runs each."""
    a: dict[str, list[float]] = {}
    b: dict[str, list[float]] = {}
    for i, u in enumerate(units):
        right_a = max(0, -u)
        right_b = max(0, u)
        a[str(i)] = [1.0] * right_a + [0.0] * (runs - right_a)
        b[str(i)] = [1.0] * right_b + [0.0] * (runs - right_b)
    return a, b


def brute_p(units: list[int]) -> float:
    """P(sum of +-|u| >= sum u) over all sign patterns of the items that moved, counted one by one."""
    moved = [abs(u) for u in units if u]
    observed = sum(units)
    hits = sum(sum(s * m for s, m in zip(signs, moved, strict=True)) >= observed
               for signs in itertools.product((1, -1), repeat=len(moved)))  # fmt: skip
    return hits / 2 ** len(moved)


@pytest.mark.parametrize("runs", [1, 2, 3])
def test_the_p_value_is_the_count_of_sign_patterns(runs):
    for n in range(1, 7):
        for units in itertools.product(range(-runs, runs + 1), repeat=n):
            if n > 4 and sum(units) % 3:  # a third of the larger cases is plenty
                continue
            a, b = sides(list(units), runs)
            assert sign_flip_test(a, b, alpha=0.05).p_value == pytest.approx(
                brute_p(list(units)), abs=1e-12
            ), units


def test_one_run_per_item_is_the_exact_binomial_test():
    for better in range(0, 9):
        for worse in range(0, 9):
            units = [1] * better + [-1] * worse + [0] * 5
            a, b = sides(units, 1)
            expected = (
                scipy_stats.binomtest(better, better + worse, 0.5, "greater").pvalue
                if better + worse
                else 1.0
            )
            assert sign_flip_test(a, b, alpha=0.05).p_value == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("runs", [1, 2, 3])
def test_the_level_holds_at_every_number_of_items(runs):
    """If the two skills are the same, each item's difference is as likely + as -: over every
    multiset of magnitudes and every sign pattern, P(p < alpha) is at most alpha. By enumeration."""
    for n in range(1, 9 if runs == 1 else 7):
        for magnitudes in itertools.combinations_with_replacement(range(runs + 1), n):
            moved = [m for m in magnitudes if m]
            rejected = {level: 0 for level in LEVELS}
            for signs in itertools.product((1, -1), repeat=len(moved)):
                units = [s * m for s, m in zip(signs, moved, strict=True)] + [0] * (n - len(moved))
                a, b = sides(units, runs)
                p = sign_flip_test(a, b, alpha=0.05).p_value
                for level in LEVELS:
                    rejected[level] += p < level
            for level in LEVELS:
                assert rejected[level] / 2 ** len(moved) <= level + 1e-12, (magnitudes, level)


def test_the_interval_bv_gated_with_before_is_liberal_at_small_n():
    """Why the exact test: Newcombe's one-sided p at n = 6 rejects an identical candidate more
    often than alpha (by enumeration over the items' outcomes at accuracy .5)."""
    n, level = 6, 0.05
    newcombe = exact = 0.0
    for units in itertools.product((-1, 0, 1), repeat=n):
        weight = math.prod(0.25 if u else 0.5 for u in units)
        a, b = sides(list(units), 1)
        newcombe += weight * (paired_comparison(a, b, alternative="greater").p_value < level)
        exact += weight * (sign_flip_test(a, b, alpha=0.05).p_value < level)
    assert newcombe > level >= exact


def test_the_critical_difference_is_where_the_test_starts_to_reject():
    a, b = sides([1] * 9 + [-1] * 2 + [0] * 20, 1)
    test = sign_flip_test(a, b, alpha=0.025)
    assert test.method == EXACT and test.critical is not None
    for better in range(0, 12):
        a2, b2 = sides([1] * better + [-1] * (11 - better) + [0] * 20, 1)
        other = sign_flip_test(a2, b2, alpha=0.025)
        assert other.rejects == (other.diff >= test.critical - 1e-12)


def test_too_few_items_can_never_reject():
    a, b = sides([1, 1, 1, 1, 1], 1)  # 5 of 5 better: p = 1/32 > 0.025
    test = sign_flip_test(a, b, alpha=0.025)
    assert test.p_value == 1 / 32 and not test.rejects and test.critical is None


def test_many_runs_use_the_normal_approximation_and_say_so():
    # 400 items, each 60 of 100 runs apart: 24,000 lattice units, past the exact count's limit
    sign = [1 if i % 5 else -1 for i in range(400)]
    a = {
        str(i): [1.0] * (i % 40 + 30 * (1 - s)) + [0.0] * (100 - i % 40 - 30 * (1 - s))
        for i, s in enumerate(sign)
    }
    b = {
        str(i): [1.0] * (i % 40 + 30 * (1 + s)) + [0.0] * (100 - i % 40 - 30 * (1 + s))
        for i, s in enumerate(sign)
    }
    test = sign_flip_test(a, b, alpha=0.025)
    assert test.method == NORMAL and test.rejects and test.diff == pytest.approx(0.6 * 3 / 5)
    # the normal form: sum d / sqrt(sum d^2)
    assert test.p_value == pytest.approx(scipy_stats.norm.sf(0.36 * 400 / math.sqrt(400 * 0.6**2)))


def test_no_common_items_and_no_change():
    assert sign_flip_test({}, {}, alpha=0.05).p_value == 1.0
    a, b = sides([0, 0, 0], 2)
    assert sign_flip_test(a, b, alpha=0.05).p_value == 1.0 and sign_flip_test(a, b, alpha=0.05).moved == 0
