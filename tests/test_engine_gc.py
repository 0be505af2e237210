"""A request stage collects cyclic garbage less often while it runs, and gives the process its
own collector thresholds back after (bv.api runs stages in its callers' processes)."""

from __future__ import annotations

import asyncio
import gc

from bv.engine import GC_YOUNG_THRESHOLD, RunSettings, run_stage
from bv.progress import Stats


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
