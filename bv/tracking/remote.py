"""bv's side of a tracker's own process (bv.cli.tracker_worker, serving bv.tracking.worker):
every call sent as a line and its answer awaited at most BV_TRACKER_WAIT_S (the import and a
local store, longer), read bounded. A tracker that does not answer in time, answers too much, or
dies, fails that call (its process killed, with what it was reading), and the run goes on
without it (bv.tracking.tracker)."""

from __future__ import annotations

import contextvars
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import threading
import time
from typing import Any, NoReturn

from bv.core import environment
from bv.core.errors import BVError
from bv.core.outcome import say
from bv.core.redaction import redact
from bv.core.run_context import current
from bv.core.terminal import printable

READY_S = 120.0  # importing the tracker and making a local store: no server is asked yet
MAX_ANSWER = 1 << 20  # bytes of one answer (a run id, an error's text)
LINE_CHARS = 500  # of one line a tracker prints, passed on to stderr
MAX_LINES = 200  # lines a tracker prints in a run, passed on to stderr; the rest are counted
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


class TrackerFailed(BVError):
    """A call the tracker could not answer; its text is what the warning says."""


class Missing(TrackerFailed):
    """The tracker's package is not installed (its name in `name`)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def valid_run_id(run_id: Any) -> bool:
    return isinstance(run_id, str) and RUN_ID.fullmatch(run_id) is not None


def _environment() -> dict[str, str]:
    """bv's environment without any value the run holds as a key (the tracker has no use for them)."""
    return environment.for_child(lambda value: redact(value) == value)


class TrackerProcess:
    """One tracker in a process of its own, opened at once; `ready()` waits for it."""

    def __init__(self, target: str, project: str | None, entity: str | None) -> None:
        self.kind = target.partition(":")[0]
        self.where = self.kind
        self.note: str | None = None
        self._number = 0
        self._buffer = b""
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bv.cli.tracker_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_environment(),
            start_new_session=True,  # Ctrl-C on the terminal is bv's to handle, not the tracker's
        )
        assert self.process.stdin and self.process.stdout and self.process.stderr
        os.set_blocking(self.process.stdin.fileno(), False)
        os.set_blocking(self.process.stdout.fileno(), False)
        forward = contextvars.copy_context().run
        threading.Thread(target=forward, args=(self._pass_on,), daemon=True, name="bv-tracker-err").start()
        self._opened = time.monotonic() + READY_S
        self._sent = self._send("open", [target, project, entity], self._opened)

    def ready(self) -> None:
        """The tracker imported and set up, where it logs known; Missing or TrackerFailed if not."""
        answer = self._receive(self._sent, self._opened, READY_S)
        self.where, self.note = printable(str(answer["where"]))[:300], answer.get("note")

    def start(self, name: str, run_id: str | None, tags: dict[str, str]) -> str:
        started = self.call("start", name, run_id, tags)
        if not valid_run_id(started):
            raise TrackerFailed(f"it gave no valid run id ({printable(repr(started))[:80]})")
        return str(started)

    def params(self, values: dict[str, str]) -> None:
        self.call("params", values)

    def metrics(self, values: dict[str, float], step: int | None) -> None:
        self.call("metrics", values, step)

    def last_step(self, key: str) -> int | None:
        """The last step the tracker's store holds of metric `key` (None: none, or unknown)."""
        step = self.call("last_step", key)
        return step if isinstance(step, int) and not isinstance(step, bool) else None

    def artifact(self, path: Any, folder: str | None) -> None:
        self.call("artifact", str(path), folder)

    def finish(self, status: str, wait_s: float | None = None) -> None:
        self.call("finish", status, wait_s=wait_s)

    def call(self, name: str, *args: Any, wait_s: float | None = None) -> Any:
        seconds = current().limits.tracker_wait_s if wait_s is None else wait_s
        deadline = time.monotonic() + seconds
        return self._receive(self._send(name, list(args), deadline), deadline, seconds)

    def close(self, wait_s: float = 5.0) -> None:
        """Let the process end (its input closed), killed if it has not within `wait_s`."""
        try:
            self.process.stdin.close()  # type: ignore[union-attr]
            self.process.wait(wait_s)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # its session: it and what it started
        except OSError:
            pass
        self.process.wait()

    def _send(self, call: str, args: list[Any], deadline: float) -> int:
        self._number += 1
        data = (json.dumps({"n": self._number, "call": call, "args": args}) + "\n").encode()
        stream = self.process.stdin
        assert stream is not None
        with selectors.DefaultSelector() as selector:
            selector.register(stream, selectors.EVENT_WRITE)
            while data:
                if not selector.select(max(0.0, deadline - time.monotonic())):
                    self._fail("did not take the call")
                try:
                    data = data[os.write(stream.fileno(), data) :]
                except BlockingIOError:
                    continue
                except OSError:
                    self._fail("ended")
        return self._number

    def _receive(self, number: int, deadline: float, seconds: float) -> Any:
        """The answer to call `number` (answers to earlier calls, cut off by a signal, skipped)."""
        stream = self.process.stdout
        assert stream is not None
        with selectors.DefaultSelector() as selector:
            selector.register(stream, selectors.EVENT_READ)
            while True:
                line, _, rest = self._buffer.partition(b"\n")
                if _:
                    self._buffer = rest
                    try:
                        answer = json.loads(line)
                    except ValueError:
                        self._fail("answered what is not JSON")
                    if answer.get("n") == number:
                        return self._result(answer)
                    continue
                if len(self._buffer) > MAX_ANSWER:
                    self._fail(f"answered more than {MAX_ANSWER} bytes")
                wait = deadline - time.monotonic()
                if wait <= 0 or not selector.select(wait):
                    self._fail(f"did not answer in {seconds:g} s")
                try:
                    chunk = os.read(stream.fileno(), 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    self._fail(f"its process ended (status {self.process.wait()})")
                self._buffer += chunk

    def _result(self, answer: dict[str, Any]) -> Any:
        if "missing" in answer:
            raise Missing(str(answer["missing"]))
        if "error" in answer:
            raise TrackerFailed(str(answer["error"]))
        return answer.get("ok")

    def _fail(self, why: str) -> NoReturn:
        self.kill()
        raise TrackerFailed(why)

    def _pass_on(self) -> None:
        """What the tracker prints, on bv's stderr: each line bounded, redacted and made printable."""
        stream = self.process.stderr
        assert stream is not None
        said = 0
        with stream:
            while line := stream.readline(64 * 1024):
                if not line.endswith(b"\n"):
                    while (more := stream.readline(64 * 1024)) and not more.endswith(b"\n"):
                        pass  # the rest of an over-long line, unread into memory
                text = line.decode("utf-8", "replace").rstrip()
                said += 1
                if text and said <= MAX_LINES:
                    say(f"tracker {self.kind}: {printable(redact(text[:LINE_CHARS]))}")
        if said > MAX_LINES:
            say(f"tracker {self.kind}: {said - MAX_LINES} more lines it printed left out")
