"""The report's tally holds a few numbers per group and item, not per run: many runs of few
items (12 items x 50k runs once held 308 MB) cost about what the key table's byte a row does."""

from __future__ import annotations

import tracemalloc

from support.rows import row

from bv.reporting.tally import Tally


def _peak(runs: int) -> int:
    """tracemalloc's peak for tallying 12 items x `runs` runs and summing them up as the default
    (table) report does: each item's row object made once, so only the tally's own memory counts."""
    items = [row(str(i), 0, f"T{i % 4}", f"S{i}", i % 2) for i in range(12)]
    tracemalloc.start()
    try:
        tally = Tally()
        for n in range(12 * runs):
            tally.add(items[n % 12], str(n % 12), n // 12)
        summary = tally.summary("r", per_run=False)
        assert summary["overall"]["runs"] == runs and summary["overall"]["accuracy"] == 0.5
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_grows_with_the_items_not_with_the_runs():
    """Four times the runs, about the same peak: the tally kept a count per (group, run) in a
    dict of kinds and in each cell (~440 bytes a row, 24 MB more here); now a byte a row in the
    key table and one number a run (`items_per_run`), ~8 bytes a row."""
    small, large = _peak(1_500), _peak(6_000)
    assert large - small < 1_000_000, (small, large)
    assert large < 2_000_000, large
