"""The program each experiment tracker runs in, `python -m bv.cli.tracker_worker`, started by
bv.tracking.remote and serving its calls (bv.tracking.worker). Its command line holds none of
bv's options (W&B records it), its environment no key of bv's, its stdin nothing (a tracker that
asks for a key reads end-of-file), what the tracker prints goes to stderr, its memory is capped
(a reply of gigabytes ends this process, not bv's), and it ends when bv's process has gone."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

from bv.tracking.worker import serve

MEMORY = 768 << 20  # bytes of data it may map: MLflow needs ~300 MB, W&B ~150 MB


def cap_memory() -> None:
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        resource.setrlimit(resource.RLIMIT_DATA, (MEMORY, MEMORY))


def leave_with_parent() -> None:
    """A thread that ends this process once bv's has gone (killed, or quit on a second Ctrl-C)
    while a call here still waits on a tracker."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="bv-parent-watch").start()


def main() -> None:
    cap_memory()
    leave_with_parent()
    calls = os.fdopen(os.dup(0), "r", encoding="utf-8")
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    with open(os.devnull, "rb") as nothing:
        os.dup2(nothing.fileno(), 0)
    os.dup2(2, 1)  # what a tracker prints (MLflow's "View run …") goes to stderr
    sys.stdout = sys.stderr
    serve(calls, answers)


if __name__ == "__main__":
    main()
