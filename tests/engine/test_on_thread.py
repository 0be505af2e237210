"""bv.engine.on_thread: a stage called plainly inside a running event loop (a Jupyter cell) runs
on a thread of its own; a Ctrl-C there (a notebook's interrupt) stops it gently."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest

from bv.core.errors import Interrupted
from bv.core.outcome import STOP_REQUEST
from bv.engine.on_thread import beside_loop, loop_running


@pytest.mark.timeout(20)
def test_a_ctrl_c_while_waiting_asks_the_run_to_stop_and_raises_interrupted():
    stopped_gently = []

    def run() -> str:
        request = STOP_REQUEST.get()
        while not request.asked:  # a stage's loop, told by its StopRequest
            time.sleep(0.01)
        stopped_gently.append(threading.current_thread().name)
        return "done"

    async def cell() -> str:
        assert loop_running()
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        return beside_loop("evaluate", run)

    loop = asyncio.new_event_loop()  # as ipykernel's: a Ctrl-C raises KeyboardInterrupt in the cell
    try:
        with pytest.raises(Interrupted, match="call again to resume") as raised:
            loop.run_until_complete(cell())
    finally:
        loop.close()
    assert raised.value.signal == signal.SIGINT and stopped_gently == ["bv-api-evaluate"]
    assert not loop_running()
