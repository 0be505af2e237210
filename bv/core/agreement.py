"""How much a panel of judges agrees, beyond what their rates of saying "right" give by chance:
Cohen's κ for two judges, Fleiss' κ for more (both over the rows every judge gave a verdict on).

κ = (p_o − p_e) / (1 − p_e): p_o the share of rows (for Fleiss, of judge pairs within a row) that
agree, p_e what independent judges with these rates would. 1 is agreement on every row, 0 no
more than chance; undefined (None) when p_e is 1 (every judge said the same of every row).
"""

from __future__ import annotations

from collections.abc import Sequence


def cohen_kappa(a: Sequence[int], b: Sequence[int]) -> float | None:
    """Cohen's κ of two judges' 0/1 verdicts on the same rows (None: no rows, or p_e = 1)."""
    n = len(a)
    if n == 0 or n != len(b):
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa, pb = sum(a) / n, sum(b) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    return None if expected >= 1 else (observed - expected) / (1 - expected)


def fleiss_kappa(rows: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' κ of m ≥ 2 judges' 0/1 verdicts, one sequence of m verdicts per row (None: no
    rows, fewer than two judges, or p_e = 1)."""
    if not rows:
        return None
    m = len(rows[0])
    if m < 2 or any(len(row) != m for row in rows):
        return None
    n = len(rows)
    ones = [sum(row) for row in rows]
    per_row = [(k * (k - 1) + (m - k) * (m - k - 1)) / (m * (m - 1)) for k in ones]
    observed = sum(per_row) / n
    p1 = sum(ones) / (n * m)
    expected = p1 * p1 + (1 - p1) * (1 - p1)
    return None if expected >= 1 else (observed - expected) / (1 - expected)


def kappa(rows: Sequence[Sequence[int]], judges: int) -> tuple[str, float | None]:
    """The panel's agreement: (method, κ), Cohen's for two judges, Fleiss' for more."""
    if judges == 2:
        return "Cohen's kappa", cohen_kappa([r[0] for r in rows], [r[1] for r in rows])
    return "Fleiss' kappa", fleiss_kappa(rows)
