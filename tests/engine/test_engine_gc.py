"""A request stage collects cyclic garbage less often while it runs, and gives the process its
own collector thresholds back after (bv.api runs stages in its callers' processes)."""

from __future__ import annotations

import asyncio
import gc

from bv.engine.caller import GC_YOUNG_THRESHOLD, RunSettings, run_stage
from bv.engine.progress import Stats


def test_a_stage_raises_the_young_threshold_and_restores_it():
    before = gc.get_threshold()
    seen = []

    async def work(task: int) -> dict:
        seen.append(gc.get_threshold())
        return {"task": task}

    rows: list = []
    run_stage(
        range(3),
        work,
        rows.append,
        settings=RunSettings(jobs=2, quiet=True),
        stats=Stats(),
        label="test",
        stopping=asyncio.Event(),
    )
    assert len(rows) == 3
    assert all(threshold[0] >= GC_YOUNG_THRESHOLD for threshold in seen)
    assert gc.get_threshold() == before


def test_overlapping_stages_give_the_thresholds_back_whatever_ends_first():
    """Two stages on threads (a skill comparison with asyncio.gather over bv.arollout): the one
    that started first may end first; the process still gets its own thresholds back."""
    from bv.engine.caller import fewer_collections

    before = gc.get_threshold()
    first, second = fewer_collections(), fewer_collections()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold()[0] >= GC_YOUNG_THRESHOLD  # the second stage still runs
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before
