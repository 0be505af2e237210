"""A run's own state: its secrets, its stage name, what it has said once, its limits.

Each run of a stage (a `bv` command, or one bv.api call) works inside a `RunContext`, found
through a context variable, so two runs in one process, or on two threads, never see each
other's secrets, notes or limits. The limits are read from the environment when the context is
made, not when bv is imported. Code outside any run uses one context of the process, made when
first needed.

    with running(RunContext(stage="rollout")):
        ...  # redaction.register/redact, outcome.say, jsonl's line limit use this run's
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from bv.core import environment
from bv.core.secret_registry import Secrets


@dataclass(frozen=True)
class Limits:
    """Bounds a run works within; each from its environment variable (docs/safety.md, docs/rollout.md)."""

    max_line_bytes: int = 64 * 1024 * 1024  # BV_MAX_LINE_BYTES: one JSONL line, read or written
    max_wait_s: float = 300.0  # BV_MAX_WAIT_S: the longest wait before one retry, whatever a server asks
    retry_base_s: float = 1.0  # BV_RETRY_BASE_S: the first backoff step
    html_max_items: int = 500  # BV_HTML_MAX_ITEMS: item cards on one HTML page
    tracker_wait_s: float = 10.0  # BV_TRACKER_WAIT_S: the longest a tracker may take to answer one call

    @classmethod
    def from_environment(cls) -> Limits:
        return cls(
            max_line_bytes=environment.integer("BV_MAX_LINE_BYTES", cls.max_line_bytes),
            max_wait_s=environment.number("BV_MAX_WAIT_S", cls.max_wait_s),
            retry_base_s=environment.number("BV_RETRY_BASE_S", cls.retry_base_s),
            html_max_items=environment.integer("BV_HTML_MAX_ITEMS", cls.html_max_items),
            tracker_wait_s=environment.number("BV_TRACKER_WAIT_S", cls.tracker_wait_s),
        )


@dataclass
class RunContext:
    """One run's state. `hard_stop`, when set, is called on a second Ctrl-C or SIGTERM, after the
    run has cancelled what was in flight (the command line quits the process there; a library
    run just ends)."""

    stage: str = ""  # "rollout", "judge", ...: how messages start (`bv rollout:`)
    limits: Limits = field(default_factory=Limits.from_environment)
    secrets: Secrets = field(default_factory=Secrets)
    hard_stop: Callable[[int], None] | None = None
    # How messages name settings: the library writes them in backquotes (`base_url`); the command
    # line sets this to say them as its options (--base-url). None: as written.
    words: Callable[[str], str] | None = None
    _said: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def first_time(self, key: str) -> bool:
        """True the first time this run asks about `key`: for what is said once per run."""
        with self._lock:
            if key in self._said:
                return False
            self._said.add(key)
            return True


_CURRENT: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar("bv_run", default=None)
_PROCESS: list[RunContext] = []  # the context of code outside any run, made when first needed
_PROCESS_LOCK = threading.Lock()


def current() -> RunContext:
    """The run in progress in this context, else the process's own."""
    context = _CURRENT.get()
    if context is not None:
        return context
    with _PROCESS_LOCK:
        if not _PROCESS:
            _PROCESS.append(RunContext())
        return _PROCESS[0]


@contextlib.contextmanager
def running(context: RunContext | None = None) -> Iterator[RunContext]:
    """Work inside `context` (a fresh one by default) until the block ends."""
    context = RunContext() if context is None else context
    token = _CURRENT.set(context)
    try:
        yield context
    finally:
        _CURRENT.reset(token)


@contextlib.contextmanager
def own_run(stage: str) -> Iterator[RunContext]:
    """A fresh run for a library call (bv.api), keeping the hard stop and the words of the run it is
    called from, if any: a command built on bv.api quits on a second Ctrl-C and names its options
    as the others do."""
    outer = _CURRENT.get()
    hard_stop, words = (None, None) if outer is None else (outer.hard_stop, outer.words)
    with running(RunContext(stage=stage, hard_stop=hard_stop, words=words)) as context:
        yield context


def in_this_context(target: Callable[[], None]) -> Callable[[], None]:
    """`target`, to run on another thread inside the calling thread's run (a thread starts outside it)."""
    snapshot = contextvars.copy_context()
    return lambda: snapshot.run(target)


def worded(message: str) -> str:
    """A message in the words of the run's face: the settings it names (`base_url`) as the
    command line's options (--base-url) under bv/cli, as written for bv.api."""
    words = current().words
    return message if words is None else words(message)
