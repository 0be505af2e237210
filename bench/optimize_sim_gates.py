"""The statistics bench/optimize_sim.py needs, vectorised over runs (each row of an array is a run).

- `bv_p`: bv's one-sided paired p (bv.core.paired.paired_comparison, alternative "greater"):
  Newcombe's method-10 interval inverted by the same bisection with one run per item (or when
  every item moved alike), the t test over per-item differences otherwise.
- `signflip_p`, `signflip_critical`: the exact one-sided sign-flip test on K-run item means
  (K = 1: the exact McNemar test, a binomial tail; K > 1: the null distribution of the sum of
  +-|d_i| K by an inverse FFT of its characteristic function, prod_i cos(t m_i)).
- `selective_ci`: the conditional 95% interval given "difference >= cutoff" (bv.core.selective).
- `self_check`: each of these against bv's own one-comparison functions and brute force.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import special, stats

Array = np.ndarray
_Z_MAX = 60.0


def _wilson(s: Array, n: Array, z: Array) -> tuple[Array, Array]:
    p = s / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * np.sqrt(np.maximum(0.0, p * (1 - p)) / n + z * z / (4 * n * n)) / den
    return np.maximum(0.0, centre - half), np.minimum(1.0, centre + half)


def _newcombe(t: tuple[Array, Array, Array, Array], z: Array) -> tuple[Array, Array]:
    """bv.core.paired.newcombe_paired, operation for operation."""
    a, b, c, d = t
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    low1, high1 = _wilson(a + b, n, z)
    low2, high2 = _wilson(a + c, n, z)
    den = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    root = np.sqrt(np.where(den > 0, den, 1.0))
    phi = np.where(den <= 0, 0.0, np.where(cross > 0, np.maximum(cross - n / 2, 0.0) / root, cross / root))
    down = np.sqrt(
        np.maximum(0.0, (p1 - low1) ** 2 - 2 * phi * (p1 - low1) * (high2 - p2) + (high2 - p2) ** 2)
    )
    up = np.sqrt(np.maximum(0.0, (high1 - p1) ** 2 - 2 * phi * (high1 - p1) * (p2 - low2) + (p2 - low2) ** 2))
    diff = (b - c) / n
    return np.maximum(-1.0, diff - down), np.minimum(1.0, diff + up)


def _newcombe_p_two(x: Array, y: Array, diff: Array) -> Array:
    """Two-sided p of Newcombe's interval (bv's bisection on z), rows with diff != 0."""
    n = float(x.shape[1])
    table = (
        np.minimum(x, y).sum(1),
        np.maximum(y - x, 0.0).sum(1),
        np.maximum(x - y, 0.0).sum(1),
    )
    t = (*table, n - table[0] - table[1] - table[2])
    up = diff > 0

    def touches(z: Array) -> Array:
        low, high = _newcombe(t, z)
        return np.where(up, low <= 0, high >= 0)

    at_max = touches(np.full(len(diff), _Z_MAX))
    low, high = np.zeros(len(diff)), np.full(len(diff), _Z_MAX)
    for _ in range(100):
        middle = (low + high) / 2
        hit = touches(middle)
        high = np.where(hit, middle, high)
        low = np.where(hit, low, middle)
    z = np.where(at_max, (low + high) / 2, _Z_MAX)
    return np.minimum(1.0, 2 * (0.5 * special.erfc(z / math.sqrt(2))))


def bv_p(x: Array, y: Array, k: int) -> Array:
    """One-sided p that y (candidate, item means of k runs) beats x, as bv's gate computes it."""
    n = x.shape[1]
    d = y - x
    diff = d.sum(1) / n
    p_two = np.ones(len(diff))
    use_t = np.zeros(len(diff), dtype=bool)
    if k > 1 and n > 1:
        se = np.sqrt(((d - diff[:, None]) ** 2).sum(1) / (n - 1) / n)
        use_t = se > 0
        safe = np.where(use_t, se, 1.0)
        p_two = np.where(use_t, np.minimum(1.0, 2 * stats.t.sf(np.abs(diff) / safe, n - 1)), p_two)
    rows = ~use_t & (diff != 0)
    if rows.any():
        p_two[rows] = _newcombe_p_two(x[rows], y[rows], diff[rows])
    return np.where(diff > 0, p_two / 2, 1 - p_two / 2)


def _units(x: Array, y: Array, k: int) -> Array:
    return np.rint((y - x) * k).astype(np.int64)


def _tails(units: Array, k: int, fft: bool = False) -> Array:
    """(runs, Tmax + 2): P(W >= w) under the null, W = sum of |u_i| over the items that flip to +
    (K = 1: binomial tails, unless `fft`)."""
    mags = np.abs(units)
    total = mags.sum(1)
    size = int(total.max()) + 1
    if k == 1 and not fft:
        w = np.arange(size + 1)
        return stats.binom.sf(w[None, :] - 1, total[:, None], 0.5)
    j = np.arange(size // 2 + 1)
    phi = np.exp(-1j * np.pi * j[None, :] * total[:, None] / size)
    for m in range(1, k + 1):
        count = (mags == m).sum(1)
        phi = phi * np.power(np.cos(np.pi * j * m / size)[None, :], count[:, None])
    pmf = np.fft.irfft(phi, n=size, axis=1)
    pmf = np.where(np.arange(size)[None, :] <= total[:, None], np.maximum(pmf, 0.0), 0.0)
    tail = np.cumsum(pmf[:, ::-1], axis=1)[:, ::-1]
    return np.minimum(1.0, np.concatenate([tail, np.zeros((len(tail), 1))], axis=1))


def signflip_p(x: Array, y: Array, k: int) -> Array:
    """Exact one-sided sign-flip p that y beats x (item means of k runs on both sides)."""
    u = _units(x, y, k)
    observed = np.where(u > 0, u, 0).sum(1)
    if k == 1:
        return np.asarray(stats.binom.sf(observed - 1, np.abs(u).sum(1), 0.5), dtype=float)
    return np.take_along_axis(_tails(u, k), observed[:, None], axis=1)[:, 0]


def signflip_critical(x: Array, y: Array, k: int, level: float) -> tuple[Array, Array]:
    """(p, cutoff): the exact p and the cutoff on the mean difference at which p < level given the
    items' |differences| (inf where none can reach it), as bv.core.signflip computes them: its
    `critical` is one unit (1/(K n)) below the smallest reachable total that rejects, i.e. halfway
    to the largest that does not (totals move in steps of 2), a continuity correction."""
    u = _units(x, y, k)
    tails = _tails(u, k)
    total = np.abs(u).sum(1)
    observed = np.where(u > 0, u, 0).sum(1)
    p = np.take_along_axis(tails, observed[:, None], axis=1)[:, 0]
    first = np.argmax(tails < level, axis=1)
    cutoff = np.where(first <= total, (2 * first - total - 1) / (k * x.shape[1]), np.inf)
    return p, cutoff


def _beyond(diff: Array, cutoff: Array, se: Array, mu: Array) -> Array:
    return np.exp(special.log_ndtr((mu - diff) / se) - special.log_ndtr((mu - cutoff) / se))


def selective_ci(diff: Array, se: Array, cutoff: Array, level: float = 0.95) -> tuple[Array, Array]:
    """The conditional interval of bv.core.selective.conditional_gain, vectorised."""
    diff = np.maximum(diff, cutoff)
    safe = np.where(se > 0, se, 1.0)
    ends = []
    for target in ((1 - level) / 2, (1 + level) / 2):
        low = cutoff - 40 * safe - 2.0
        high = np.maximum(diff, cutoff) + 40 * safe + 2.0
        for _ in range(200):
            middle = (low + high) / 2
            below = _beyond(diff, cutoff, safe, middle) < target
            low, high = np.where(below, middle, low), np.where(below, high, middle)
        ends.append(np.where(se > 0, np.clip((low + high) / 2, -1.0, 1.0), diff))
    return ends[0], ends[1]


# --- the self-check -----------------------------------------------------------------------------


def _maps(scores: Array, k: int) -> dict[str, list[float]]:
    right = [round(float(s) * k) for s in scores]
    return {str(i): [1.0] * r + [0.0] * (k - r) for i, r in enumerate(right)}


def _brute(x: Array, y: Array, k: int) -> float:
    u = _units(x[None, :], y[None, :], k)[0]
    moved = [abs(int(v)) for v in u if v]
    observed = int(u.sum())
    hits = sum(
        sum(s * m for s, m in zip(signs, moved, strict=True)) >= observed
        for signs in itertools.product((1, -1), repeat=len(moved))
    )
    return hits / 2 ** len(moved)


def _case(rng: np.random.Generator, n: int, k: int, rows: int = 1) -> tuple[Array, Array]:
    base = rng.beta(0.8, 1.2, size=(rows, n))
    shift = rng.normal(0, 0.15, size=rows)[:, None]
    x = rng.binomial(k, base) / k
    y = rng.binomial(k, np.clip(base + shift, 0, 1)) / k
    return x, y


def self_check(seed: int = 0) -> list[str]:
    """Lines saying how far each vectorised figure is from bv's own function or brute force."""
    from bv.core.paired import paired_comparison

    rng = np.random.default_rng(seed)
    lines = []
    worst = 0.0
    count = 0
    for n, k in [(n, k) for n in (3, 6, 10, 20, 39, 110, 271) for k in (1, 2, 3)]:
        x, y = _case(rng, n, k, rows=12)
        if n == 20:
            y[0] = x[0]  # all item differences 0 (and with k > 1, se = 0: bv falls back on Newcombe)
        ours = bv_p(x, y, k)
        for r in range(len(x)):
            theirs = paired_comparison(_maps(x[r], k), _maps(y[r], k), alternative="greater").p_value
            worst = max(worst, abs(ours[r] - theirs))
            count += 1
    lines.append(f"bv paired p (Newcombe K=1, t K>1): {count} cases, max |ours - bv| = {worst:.2e}")
    worst, count = 0.0, 0
    for n, k in [(n, k) for n in (1, 4, 8, 12) for k in (1, 2, 3)]:
        x, y = _case(rng, n, k, rows=8)
        ours = signflip_p(x, y, k)
        for r in range(len(x)):
            worst = max(worst, abs(ours[r] - _brute(x[r], y[r], k)))
            count += 1
    lines.append(f"sign-flip p vs brute-force enumeration: {count} cases, max error {worst:.2e}")
    x, y = _case(rng, 271, 1, rows=50)
    binom = np.abs(_tails(_units(x, y, 1), 1) - _tails(_units(x, y, 1), 1, fft=True)).max()
    lines.append(f"K=1 binomial tails vs the FFT route: max difference {binom:.2e}")
    try:
        from bv.core.signflip import sign_flip_test
    except ImportError:
        lines.append("bv/core/signflip.py absent: cross-check skipped")
    else:
        worst_p, worst_c, count = 0.0, 0.0, 0
        for n, k in [(n, k) for n in (5, 36, 110, 271) for k in (1, 2, 3)]:
            x, y = _case(rng, n, k, rows=10)
            p, cut = signflip_critical(x, y, k, 0.025)
            for r in range(len(x)):
                t = sign_flip_test(_maps(x[r], k), _maps(y[r], k), alpha=0.025)
                worst_p = max(worst_p, abs(p[r] - t.p_value))
                c = math.inf if t.critical is None else t.critical
                worst_c = max(worst_c, 0.0 if c == cut[r] else abs(c - cut[r]))
                count += 1
        lines.append(
            f"sign-flip vs bv.core.signflip: {count} cases, max |p diff| {worst_p:.2e},"
            f" max |cutoff diff| {worst_c:.2e}"
        )
    try:
        from bv.core.selective import conditional_gain
    except ImportError:
        lines.append("bv/core/selective.py absent: cross-check skipped")
    else:
        se = rng.uniform(0.005, 0.04, 300)
        cutoff = se * rng.uniform(1.5, 2.5, 300)
        diff = cutoff + se * rng.exponential(1.5, 300)
        low, high = selective_ci(diff, se, cutoff)
        worst = 0.0
        for i in range(300):
            ci = conditional_gain(float(diff[i]), float(se[i]), float(cutoff[i])).ci95
            worst = max(worst, abs(ci[0] - low[i]), abs(ci[1] - high[i]))
        lines.append(f"selective interval vs bv.core.selective: 300 cases, max |end diff| {worst:.2e}")
    return lines
