"""Run statistics and how they are shown on stderr: a live bar on a terminal, plain lines
every few seconds otherwise (logs, CI), one summary line at the end, nothing with --quiet.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from bv.core import environment
from bv.core.redaction import public_url, redact
from bv.core.run_context import worded
from bv.core.stats import counted, dollars, human_count
from bv.core.terminal import printable

if TYPE_CHECKING:  # asyncio is imported where a display runs: bv report and merge need none
    import asyncio


@dataclass
class Stats:
    """Counters the engine and the stages update; `waiting` is a gauge of items in retry backoff."""

    total: int | None = None  # rows expected, when the input is a file
    done: int = 0
    errors: int = 0
    answered: int = 0  # rows whose reply has a \boxed{} answer
    requests: int = 0  # tries sent, those refused with a 429 among them
    replied: int = 0  # tries the server answered (a reply, an error status): the request rate's
    rate_limited: int = 0  # tries refused with a 429 (counted apart in the summary)
    cache_hits: int = 0
    instant: int = 0  # rows that needed no request (all from the cache, or rules): not in the ETA's pace
    prompt_tokens: int = 0
    completion_tokens: int = 0
    waiting: Counter = field(default_factory=Counter)
    decided: Counter = field(default_factory=Counter)  # judge: rows by who decided (rules, llm, ...)
    started: float = field(default_factory=time.monotonic)
    endpoint: str | None = None  # where requests go, public (no key): named when replies stall
    in_flight: int = 0  # requests sent and not yet answered
    quiet_since: float = field(default_factory=time.monotonic)  # the last answer, or since idle
    concurrency: int | None = None  # requests allowed in flight now (fewer while 429s go on)
    concurrency_most: int | None = None
    # batch mode: how each batch job stands, by id (bv.engine.batch_jobs); requests go out together,
    # so there is no request rate, and rows come back together, so no ETA from the rows' pace
    batches: dict[str, str] | None = None
    priced: bool = False  # prices were asked for: the spend is shown
    spent_usd: float = 0.0  # what this run's replies cost (cached ones cost nothing now)
    unpriced: int = 0  # replies whose cost is unknown (bv.engine.prices), left out of the spend
    cost_limit: float | None = None  # the run stops starting requests once it has spent this
    limit_reached: str | None = None  # why the run stopped starting requests: `stop_text` says it
    at_cost_limit: bool = False  # limit_reached is the cost limit's: its words follow the spend
    shard: str | None = None  # "K/N" with --shard: named in the summary
    ever_answered: bool = False  # some try got something back (a reply, an error status)
    elsewhere: Counter = field(default_factory=Counter)  # cache hits made at another endpoint, by it

    def sending(self) -> None:
        if self.in_flight == 0:
            self.quiet_since = time.monotonic()
        self.in_flight += 1

    def sent(self, answered: bool) -> None:
        """A try ended; `answered` when something came back (a reply, an error status)."""
        self.in_flight -= 1
        if answered:
            self.quiet_since = time.monotonic()
            self.ever_answered = True
            self.replied += 1

    def silent_text(self, after_s: float, limit_s: float | None) -> str:
        """What a server that has answered nothing for `after_s` is told of, once, even under
        `quiet`: it may be hung (each try waits `limit_s` for its first byte)."""
        quiet = time.monotonic() - self.quiet_since
        if self.ever_answered or not self.in_flight or quiet < after_s:
            return ""
        where = self.endpoint or "the endpoint"
        wait = f"; each try waits up to {limit_s:g} s for a reply (`timeout`)" if limit_s else ""
        flying = counted(self.in_flight, "request")
        return (
            f"warning: no reply yet from {where} after {duration(quiet)} ({flying} in flight){wait}"
            ": check that the server is up and serving, or Ctrl-C to stop"
        )

    def stall_text(self, after_s: float) -> str:
        """`no reply for 45 s from URL (8 requests in flight)` once nothing answered for `after_s`."""
        quiet = time.monotonic() - self.quiet_since
        if not self.in_flight or quiet < after_s:
            return ""
        where = f" from {self.endpoint}" if self.endpoint else ""
        return f"no reply for {duration(quiet)}{where} ({counted(self.in_flight, 'request')} in flight)"

    def elsewhere_text(self) -> str:
        """What is said, even under `quiet`, of replies the cache gave that another endpoint made
        (bv.engine.caller.made_elsewhere): how many, and where they were made."""
        if not self.elsewhere:
            return ""
        makers = "; ".join(f"{n} at {shown_endpoint(maker)}" for maker, n in self.elsewhere.most_common(3))
        more = f" and {len(self.elsewhere) - 3} more endpoints" if len(self.elsewhere) > 3 else ""
        here = self.endpoint or "this run's endpoint"
        return (
            f"notice: {counted(sum(self.elsewhere.values()), 'reply')} came from the cache that"
            f" another endpoint made ({makers}{more}), not {here}. The cache keys a model's replies"
            " by its name: if two servers serve different models under one name, give"
            " `cache_scope` endpoint"
        )

    def add_usage(self, usage: dict[str, int]) -> None:
        self.prompt_tokens += usage.get("prompt_tokens", 0)
        self.completion_tokens += usage.get("completion_tokens", 0)

    def add_cost(self, usd: float | None) -> None:
        if usd is None:
            self.unpriced += 1
        else:
            self.spent_usd += usd

    def stop_at_cost_limit(self, limit: float, detail: str = "") -> None:
        """The run stops at the cost `limit` (`detail`: what follows the spend in its words). The
        words say the spend when they are shown, not when the limit was reached: the replies in
        flight are paid for after (issue 34: '$0.0022 spent' when the rows cost $0.0715)."""
        self.limit_reached, self.at_cost_limit, self.cost_limit = detail, True, limit

    def stop_text(self) -> str | None:
        """Why the run stopped starting requests (None: it has not), with the spend as it is now."""
        if self.limit_reached is None or not self.at_cost_limit:
            return self.limit_reached
        limit = "" if self.cost_limit is None else f" of ${self.cost_limit:g}"
        detail = f"; {self.limit_reached}" if self.limit_reached else ""
        return f"stopped at the cost limit ({dollars(self.spent_usd)} spent{limit}{detail})"

    def spend_text(self) -> str:
        """`$1.23 spent` (`of $5 at most`, `3 replies unpriced`), when prices were asked for."""
        if not self.priced:
            return ""
        text = f"{dollars(self.spent_usd)} spent"
        if self.cost_limit is not None:
            text += f" of ${self.cost_limit:g} at most"
        if self.unpriced:
            text += f" ({counted(self.unpriced, 'reply')} of unknown price)"
        return text

    def waiting_text(self) -> str:
        reasons = {r: n for r, n in self.waiting.items() if n > 0}
        if not reasons:
            return ""
        detail = ", ".join(f"{reason} ×{n}" for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
        return f"{sum(reasons.values())} waiting to retry ({detail})"

    def decided_text(self) -> str:
        """What the judge did: `110 by rules, 37 by LLM, 3 undecided, 0 judge errors`."""
        names = {
            "rules": "by rules",
            "llm": "by LLM",
            "imported": "imported",
            "undecided": "undecided",
            "rollout_error": "not judged (rollout failed)",
        }
        parts = [f"{self.decided[key]} {name}" for key, name in names.items() if self.decided[key]]
        return ", ".join([*parts, counted(self.decided["error"], "judge error")])

    def eta(self, elapsed: float) -> str:
        """Time left at the pace of the rows that needed a request, when the total is known: rows
        the cache answered take no time (on a resume they would make the ETA a fraction of the
        truth), and batch rows come back together (no pace to go by)."""
        paced = self.done - self.instant
        if self.total is None or paced <= 0 or self.done >= self.total or self.batches is not None:
            return ""
        return "ETA " + duration(elapsed / paced * (self.total - self.done))

    def batch_text(self, ids: bool = True) -> str:
        """How the batch jobs stand: `batch batch_0045 in_progress, 12/40 requests done`; without
        `ids` (the bar, where a 40-character id would push out the rest) just their states."""
        if not self.batches:
            return "batch: preparing" if self.batches is not None else ""
        if ids:
            return "; ".join(f"batch {batch_id} {shown}" for batch_id, shown in self.batches.items())
        name = "batch" if len(self.batches) == 1 else f"{len(self.batches)} batches"
        return f"{name} " + "; ".join(self.batches.values())

    def rate(self, elapsed: float) -> str:
        """Requests answered a second, online (tries sent and not yet answered are no pace: a
        silent server read "1.6 req/s" with nothing done); none in batch mode (a batch sends its
        requests at once)."""
        if self.batches is not None:
            return ""
        return f"{self.replied / elapsed if elapsed > 0 else 0:.1f} req/s"

    def line(self, bar: bool = False) -> str:
        """The progress line; `bar`: for the terminal's bar (batch ids left out, the batch first)."""
        elapsed = time.monotonic() - self.started
        done = f"{self.done}/{self.total}" if self.total is not None else str(self.done)
        parts = [f"{done} done"]
        if self.batches is not None and bar:
            parts.append(self.batch_text(ids=False))
        if self.total is None:  # from a pipe: no total to fill a bar or an ETA, so the pace
            parts.append(f"{self.done / elapsed if elapsed > 0 else 0:.1f} rows/s")
        eta = self.eta(elapsed)
        if eta:
            parts.append(eta)
        parts += [
            self.decided_text() if self.decided else counted(self.errors, "error"),
            f"{self.cache_hits} cached",
        ]
        rate = self.rate(elapsed)
        if rate:
            parts.append(rate)
        if self.priced:
            parts.append(self.spend_text())
        replied = self.done - self.errors
        if replied and not self.decided:
            parts.append(f"{100 * self.answered / replied:.0f}% boxed")
        waiting = self.waiting_text()
        if waiting:
            parts.append(waiting)
        if self.batches is not None and not bar:
            parts.append(self.batch_text())
        limited = self.concurrency is not None and self.concurrency < (self.concurrency_most or 0)
        if limited:
            parts.append(f"{self.concurrency} of {self.concurrency_most} in flight while rate limited")
        return ", ".join(parts)

    def summary(self) -> str:
        elapsed = time.monotonic() - self.started
        parts = [
            counted(self.done, "row") + (f" of shard {self.shard}" if self.shard else ""),
            self.decided_text() if self.decided else counted(self.errors, "error"),
        ]
        if self.requests or self.cache_hits:  # a judge by rules alone sends nothing
            refused = f" (and {counted(self.rate_limited, 'try')} refused with 429)"
            parts += [
                counted(self.cache_hits, "cache hit"),
                counted(self.requests - self.rate_limited, "request")
                + (refused if self.rate_limited else ""),
                f"{human_count(self.prompt_tokens)} prompt + {human_count(self.completion_tokens)}"
                " completion tokens",
            ]
        if self.priced:
            parts.append(self.spend_text())
        parts.append(f"{elapsed:.1f} s")
        if (self.requests or self.cache_hits) and self.rate(elapsed):
            parts.append(self.rate(elapsed))
        return ", ".join(parts)


def shown_endpoint(recorded: str) -> str:
    """An endpoint a cached reply records, fit to print (a cache may come from anywhere): its URLs
    without credentials or query, the run's secrets redacted, cut to a line's length."""
    try:
        text = redact(" ".join(public_url(url) for url in recorded.split()))
    except ValueError:  # a port that is no number
        return "an endpoint whose URL does not parse"
    return text if len(text) <= 200 else text[:199] + "…"


SILENT_AFTER_S = 10.0  # nothing back from a server this long after the first request: it is said


def duration(seconds: float) -> str:
    """`45 s`, `3 min 12 s`, `2 h 05 min`."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def stdin_lines() -> int | None:
    """Lines left in stdin when it is a regular file (`< prompts.jsonl`), without reading it."""
    try:
        fd = sys.stdin.fileno()
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        offset, lines = os.lseek(fd, 0, os.SEEK_CUR), 0
        while block := os.pread(fd, 1 << 20, offset):
            lines += block.count(b"\n")
            offset += len(block)
        return lines
    except (OSError, ValueError):
        return None


class ProgressDisplay:
    """Shows `Stats` while a run goes on; use `async with` around the run."""

    def __init__(
        self,
        stats: Stats,
        label: str,
        quiet: bool = False,
        stream: IO[str] | None = None,
        every_s: float | None = None,
        *,
        stall_after_s: float,  # RunSettings.stall_notice
        silent_after_s: float = SILENT_AFTER_S,
        limit_s: float | None = None,
    ) -> None:
        self.stats = stats
        self.stall_after_s = stall_after_s
        self.label = label
        self.quiet = quiet
        self.stream = stream or sys.stderr
        # Seconds between plain lines (a log, CI); BV_PROGRESS_EVERY_S changes the default of 5.
        self.every_s = environment.number("BV_PROGRESS_EVERY_S", 5) if every_s is None else every_s
        self._task: asyncio.Task | None = None
        self.silent_after_s, self.limit_s = silent_after_s, limit_s
        self._bar: Any = None  # a rich Progress, imported only when shown

    async def __aenter__(self) -> ProgressDisplay:
        import asyncio

        if self.quiet:  # no progress, but a server that never answers is still said
            self._task = asyncio.create_task(self._watch_silence())
            return self
        if self.stream.isatty():
            self._start_bar()
        self._task = asyncio.create_task(self._tick())
        return self

    async def _watch_silence(self) -> None:
        import asyncio

        while not (warning := self.stats.silent_text(self.silent_after_s, self.limit_s)):
            await asyncio.sleep(0.2)
        self._say(warning)

    def _say(self, text: str) -> None:
        """A whole line (above the bar, if one shows): never cut to the terminal's width."""
        self.stream.write(printable(f"bv {self.label}: {worded(text)}") + "\n")
        self.stream.flush()

    def _start_bar(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        from rich.table import Column

        fixed = Column(no_wrap=True)  # counts and time keep their width; the bar and details give way
        # From a pipe the total is unknown: no bar that could never fill, the count and the pace.
        counts = (
            [TextColumn("{task.completed} done", table_column=fixed)]
            if self.stats.total is None
            else [BarColumn(bar_width=20), MofNCompleteColumn(table_column=fixed)]
        )
        self._bar = Progress(
            TextColumn(f"bv {self.label}", table_column=Column(no_wrap=True)),
            *counts,
            TimeElapsedColumn(table_column=Column(no_wrap=True, min_width=7)),
            TextColumn(  # server text is data, not markup
                "{task.fields[info]}",
                markup=False,
                table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1),
            ),
            # soft_wrap: a line said while the bar shows (rich redirects stderr through the console)
            # is written whole, for the terminal to wrap, never broken at its width (logs/*.log)
            console=Console(file=self.stream, soft_wrap=True),
            transient=True,
        )
        self._bar.start()
        self._bar_task = self._bar.add_task("", total=self.stats.total, info="")

    async def _tick(self) -> None:
        """Refresh the bar; or print a line every few seconds, and at once when retries start waiting."""
        import asyncio

        last_line, last_waiting, stalled, warned = time.monotonic(), "", False, False
        while True:
            await asyncio.sleep(0.2 if self._bar else min(1.0, self.every_s))
            silent = "" if warned else self.stats.silent_text(self.silent_after_s, self.limit_s)
            if silent:
                warned = True
                self._say(silent)
            stall = self.stats.stall_text(self.stall_after_s)
            if self._bar is not None:
                line = self.stats.line(bar=True) + (f", {stall}" if stall else "")
                info = self._fitted(printable(line.split(", ", 1)[1]))
                self._bar.update(self._bar_task, completed=self.stats.done, info=info)
                continue
            line = self.stats.line() + (f", {stall}" if stall else "")
            waiting = self.stats.waiting_text()
            news = (waiting and waiting != last_waiting) or (bool(stall) and not stalled)
            stalled = bool(stall)
            if time.monotonic() - last_line >= self.every_s or news:
                last_line, last_waiting = time.monotonic(), waiting
                self.stream.write(printable(f"bv {self.label}: {line}") + "\n")
                self.stream.flush()

    def _fitted(self, info: str) -> str:
        """The bar's details cut to the width its other columns leave: rich would otherwise narrow
        every column alike, the name and the counts too (`bv … 0/… batch_0045 in_pro`)."""
        total = self.stats.total
        counts = len(f"{total}/{total}") if total is not None else len(f"{self.stats.done} done") + 2
        bar = 21 if total is not None else 0
        room = self._bar.console.width - (len(f"bv {self.label}") + 1 + bar + counts + 1 + 8 + 1)
        return info if len(info) <= room else info[: max(room - 1, 0)] + "…"

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._bar is not None:
            self._bar.stop()
        if not self.quiet:
            self.stream.write(f"bv {self.label}: {self.stats.summary()}\n")
            self.stream.flush()
        elsewhere = self.stats.elsewhere_text()
        said = (self.stats.endpoint, tuple(sorted(self.stats.elsewhere)))
        if elsewhere and said not in _SAID_ELSEWHERE:  # what a result rests on is said even under
            _SAID_ELSEWHERE.add(said)  # `quiet`, once a process (bv optimize runs many stages)
            self._say(elsewhere)


_SAID_ELSEWHERE: set[tuple[str | None, tuple[str, ...]]] = set()


def input_lines(inputs: Iterable[str]) -> int | None:
    """Lines in the inputs (for a progress total); None when one is a pipe or a terminal."""
    total = 0
    for path in inputs or ["-"]:
        if path == "-":
            lines = stdin_lines()
            if lines is None:
                return None
            total += lines
            continue
        try:
            with open(path, "rb") as f:
                total += sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b""))
        except OSError:
            pass  # reported when the file is read
    return total
