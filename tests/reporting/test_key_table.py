"""bv.reporting.key_table: the (id, run) pairs `bv report` and `bv export` have seen, held to a
plain dict, and bounded in bytes whatever the run numbers."""

from __future__ import annotations

import random
import tracemalloc

from bv.reporting.key_table import ABSENT, FAILED, NO_VERDICT, RIGHT, WRONG, KeyTable


def test_a_key_table_is_a_dict_of_id_and_run():
    """Against a dict: runs in order, backwards, negative, far off (then reached by the array), huge."""
    table, truth = KeyTable(), {}
    pairs = [("a", r) for r in (0, 5, 5, 700, 10**15, 10**15, 3, 700, 2**62, -1, -1)] + [("b", 0), ("a", 0)]
    pairs += [("c", r) for r in range(2000, -1, -7)] + [("c", 14), ("c", 2000)]
    pairs += [("d", 1000)] + [("d", r) for r in range(0, 1200, 8)] + [("d", 1000), ("d", 1001)]
    pairs += [("h", 1001)] + [("h", r) for r in range(0, 1100, 50)] + [("h", 1001)]  # 1001 in the dict first
    rng = random.Random(5)
    pairs += [
        (rng.choice("efg"), rng.choice([rng.randrange(64), rng.randrange(5000), rng.randrange(2**40)]))
        for _ in range(5000)
    ]
    for n, (item, run) in enumerate(pairs):
        hard, failed = (None, 0, 1)[n % 3], n % 5 == 0
        code = {None: NO_VERDICT, 0: WRONG, 1: RIGHT}[hard] | (FAILED if failed else 0)
        assert table.get(item, run) == truth.get((item, run), ABSENT), (item, run)
        assert table.add(item, run, hard, failed) is ((item, run) not in truth), (item, run)
        truth.setdefault((item, run), code)
    assert table.size == len(truth)
    assert dict(table.items()) == truth
    for item, right, counted in table.item_counts(finished_only=False):
        codes = [c for (i, _), c in truth.items() if i == item]
        assert (right, counted) == (sum(c & ~FAILED == RIGHT for c in codes), len(codes))


def test_far_runs_cost_bytes_a_row_not_an_array_each():
    """A file of new ids each at run 65,535 once cost 64 kB a row (the array reached out to the
    run); now such a run goes in the dict: a few hundred bytes a row."""
    rows = 2000
    tracemalloc.start()
    try:
        table = KeyTable()
        for n in range(rows):
            table.add(f"id{n}", 65535, 1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < rows * 400, peak  # the old table: 2000 x 64 kB = 131 MB
    assert table.get("id7", 65535) == RIGHT and table.get("id7", 65534) == ABSENT
