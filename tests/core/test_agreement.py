"""Cohen's and Fleiss' κ (bv.core.agreement) against independent computations: Cohen's from
the 2×2 table's closed form, Fleiss' from the category-count form of Fleiss (1971), and the
identity that Fleiss' κ of two judges is Scott's π."""

from __future__ import annotations

import random

import pytest

from bv.core.agreement import cohen_kappa, fleiss_kappa, kappa


def cohen_table(a, b):
    both = sum(x and y for x, y in zip(a, b, strict=True))
    only_a = sum(x and not y for x, y in zip(a, b, strict=True))
    only_b = sum(y and not x for x, y in zip(a, b, strict=True))
    neither = len(a) - both - only_a - only_b
    return (
        2
        * (both * neither - only_a * only_b)
        / ((both + only_a) * (only_a + neither) + (both + only_b) * (only_b + neither))
    )


def fleiss_counts(rows):
    """Fleiss (1971) from n_ij, the judges putting row i in category j: P_i = (Σ_j n_ij² − m) /
    (m(m − 1)), P̄ their mean, P_e = Σ_j p_j² with p_j the share of all verdicts in j."""
    m, n = len(rows[0]), len(rows)
    counts = [[row.count(0), row.count(1)] for row in rows]
    p_i = [(sum(c * c for c in count) - m) / (m * (m - 1)) for count in counts]
    p_bar = sum(p_i) / n
    p_j = [sum(count[j] for count in counts) / (n * m) for j in (0, 1)]
    p_e = sum(p * p for p in p_j)
    return (p_bar - p_e) / (1 - p_e)


def scott_pi(a, b):
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    p1 = (sum(a) + sum(b)) / (2 * n)
    expected = p1**2 + (1 - p1) ** 2
    return (observed - expected) / (1 - expected)


@pytest.mark.parametrize("seed", range(20))
def test_cohen_and_fleiss_match_independent_forms(seed):
    rng = random.Random(seed)
    n, m = rng.randint(5, 200), rng.randint(2, 6)
    truth = [rng.random() < 0.5 for _ in range(n)]
    rows = [[int(t if rng.random() < 0.8 else not t) for _ in range(m)] for t in truth]
    a, b = [r[0] for r in rows], [r[1] for r in rows]
    if len(set(a)) > 1 or len(set(b)) > 1:
        assert cohen_kappa(a, b) == pytest.approx(cohen_table(a, b), abs=1e-12)
        pairs = [[x, y] for x, y in zip(a, b, strict=True)]
        assert fleiss_kappa(pairs) == pytest.approx(scott_pi(a, b), abs=1e-12)
    assert fleiss_kappa(rows) == pytest.approx(fleiss_counts(rows), abs=1e-12)
    method, value = kappa(rows, m)
    assert method == ("Cohen's kappa" if m == 2 else "Fleiss' kappa")
    assert value == pytest.approx(cohen_kappa(a, b) if m == 2 else fleiss_counts(rows), abs=1e-12)


def test_kappa_bounds_and_undefined_cases():
    assert cohen_kappa([1, 0, 1, 0], [1, 0, 1, 0]) == 1
    assert cohen_kappa([1, 0, 1, 0], [0, 1, 0, 1]) == -1
    assert cohen_kappa([1, 1, 1], [1, 1, 1]) is None  # every judge said the same of every row
    assert cohen_kappa([], []) is None and fleiss_kappa([]) is None
    assert fleiss_kappa([[1], [0]]) is None  # one judge is no panel
