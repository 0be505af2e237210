"""A batch job's life on the server, apart from the rows that wait for it (bv.engine.batch).

`BatchJobs` writes requests into input files, uploads them, creates their batches and records each
step (bv.engine.batch_state), finds a recorded batch again on a re-run, polls a batch until it
ends, and reads its result lines: each result goes to the `deliver` callback it was given, which
hands it to the cache and the rows. What to send and when is the BatchCaller's; this module only
talks to the files and batches endpoints (bv.engine.batch_api).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bv.core.errors import Fatal, ItemFailure
from bv.core.outcome import say
from bv.core.stats import counted
from bv.engine.backends import Backend, Reply
from bv.engine.batch_api import EXPIRY_GRACE_S, BatchClient, BatchInfo
from bv.engine.batch_lines import InputFile, InputFiles, Result, limits, read_result, request_line
from bv.engine.batch_state import BatchRecord, BatchState
from bv.engine.progress import Stats

Request = tuple[list[dict[str, Any]], dict[str, Any]]  # a request's messages and parameters


@dataclass
class BatchJobs:
    """The batch jobs of one run: `request` gives a waiting request's messages and parameters,
    `deliver` takes each request's result (a Reply) or error."""

    backend: Backend
    client: BatchClient
    state: BatchState
    stats: Stats
    stage: str
    poll_s: float
    request: Callable[[str], Request]
    deliver: Callable[[str, Result | Fatal], None]
    shown: dict[str, str] = field(default_factory=dict)  # batch id: how it stands

    async def input_files(self, keys: list[str]) -> list[InputFile]:
        """The request lines of these requests, in input files within the providers' limits; a
        request that cannot be built (an unreadable image) fails its row at once."""
        max_requests, max_bytes = limits()
        files = InputFiles(self.state.folder, max_requests, max_bytes)
        from bv.engine.backends.openai_compat import body_json

        try:
            for key in keys:
                messages, params = self.request(key)
                try:
                    body = await self.backend.request_body(messages, **params)  # type: ignore[attr-defined]
                    files.add(key, request_line(key, self.client.line_url, body_json(body)))
                except ItemFailure as exc:
                    self.deliver(key, exc)
        except OSError as exc:
            files.remove()
            raise Fatal(
                f"cannot write a batch input file in {self.state.folder}: {exc.strerror or exc}"
            ) from None
        return files.close()

    async def submit(self, file: InputFile) -> None:
        """Upload one input file, create its batch (each step recorded), follow it to its end."""
        record = BatchRecord(
            endpoint=self.client.config.public,
            kind=self.client.config.kind,
            model=self.backend.model,
            stage=self.stage,
            keys=file.keys,
        )
        try:
            record.input_file_id = await self.client.upload(file.path)
        finally:
            file.path.unlink(missing_ok=True)
        self.state.save(record)
        await self._follow(record, set(record.keys), await self._create(record))

    async def _create(self, record: BatchRecord) -> BatchInfo:
        """Create the batch of an uploaded input file and record its id."""
        assert record.input_file_id is not None
        metadata = {"bv_stage": self.stage, "bv_requests": str(len(record.keys))}
        info = await self.client.create(record.input_file_id, metadata)
        record.batch_id = info.id
        path = self.state.save(record)
        self.stats.requests += len(record.keys)
        say(
            f"batch {info.id} submitted: {counted(len(record.keys), 'request')}"
            f" (input file {record.input_file_id});"
            f" if this run stops, the same command resumes it ({path})"
        )
        return info

    async def resume(self, record: BatchRecord, mine: set[str]) -> None:
        """A recorded batch, found again (by its id, or as the batch made from its input file) and
        followed; one the server neither knows by its id nor lists is lost, and sent anew."""
        info = None
        try:
            if record.batch_id is not None:
                info = await self._look(record)
                if info is None:
                    say(
                        f"warning: the recorded batch {record.batch_id} is lost: the server neither"
                        " knows its id nor lists it; sending its requests anew"
                    )
            elif record.input_file_id is not None:
                info = await self.client.find(record.input_file_id)
                if info is None:  # the run that uploaded it stopped before creating the batch
                    info = await self._create(record)
        except ItemFailure as exc:  # its input file is gone
            say(
                f"the recorded batch {record.input_file_id} cannot be used ({exc}); sending its requests anew"
            )
        if info is None:
            self.state.remove(record)
            for file in await self.input_files(sorted(mine)):
                await self.submit(file)
            return
        if record.batch_id != info.id:
            record.batch_id = info.id
            self.state.save(record)
        self.stats.requests += len(mine)  # this run's replies come from it
        say(f"resuming batch {info.id} ({len(mine)} of this run's requests; {info.progress()})")
        await self._follow(record, mine, info)

    async def _follow(self, record: BatchRecord, mine: set[str], info: BatchInfo) -> None:
        """Poll until the batch ends; then its results go to the cache and the rows. Past its
        expires_at the polls thin out (each wait twice the one before, from `poll_s`) until the
        grace ends, when the batch is given up: the provider should have ended it, and a server
        that keeps it running was polled ~19 times a second with a short BV_BATCH_POLL_S."""
        assert record.batch_id is not None
        wait = self.poll_s
        try:
            while not info.done:
                now = time.time()
                if info.overdue(now):
                    raise ItemFailure(
                        f"batch {info.id} is still {info.status} past its expires_at (and"
                        f" {EXPIRY_GRACE_S // 60} minutes more): no longer polled; the same command"
                        " collects its results if the server ends it"
                    )
                self._show(info)
                if info.expires_at is not None and now > info.expires_at:
                    left = info.expires_at + EXPIRY_GRACE_S - now  # then the next look gives it up
                    await asyncio.sleep(min(wait, left + 0.01))
                    wait = min(wait * 2, EXPIRY_GRACE_S)
                else:
                    await asyncio.sleep(self.poll_s)
                found = await self._look(record)
                if found is None:
                    raise ItemFailure(
                        f"batch {info.id} is lost: the server neither knows its id nor lists it any"
                        " more; the next run sends this request again"
                    )
                info = found
            self._show(info)
            await self._collect(record, mine, info)
        finally:
            if info.done:
                self.shown.pop(info.id, None)
                self._show_all()

    async def _look(self, record: BatchRecord) -> BatchInfo | None:
        """The recorded batch as the server has it: asked for by its id, else found in the server's
        list (a server that answers 404 for a batch it still lists and runs was sent a new, paid
        batch on every re-run: issue 34); None when neither knows it."""
        assert record.batch_id is not None
        try:
            return await self.client.retrieve(record.batch_id)
        except ItemFailure:
            pass
        try:
            return await self.client.find(record.input_file_id, record.batch_id)
        except ItemFailure:  # no list either
            return None

    def _advise(self, error: Mapping[str, Any]) -> str:
        """A refused parameter's hint, as online (bv.engine.params)."""
        from bv.engine.params import advice

        config = self.client.config
        return advice(error, self.backend.model, config.rule, config.role)

    def _show(self, info: BatchInfo) -> None:
        self.shown[info.id] = info.progress()
        self._show_all()

    def _show_all(self) -> None:
        self.stats.batches = dict(self.shown)

    async def _collect(self, record: BatchRecord, mine: set[str], info: BatchInfo) -> None:
        """Every result of an ended batch, cached, and each row's handed over; the requests without
        one fail with what the batch says (expired, cancelled, failed validation).

        Two result lines for one request that say different things: the first wins (the output
        file is read before the error file, so a reply beats a failure). bv cannot tell which
        one the provider billed or meant; the first is what it wrote first, and the same files give
        the same choice on every re-run. So that the reply can say so, each request's first line
        waits in a spool file beside the batch records until every line is read; the reply kept
        records how many other lines disagreed (`batch_conflicts`), and stderr counts them."""
        keys = set(record.keys)
        found: dict[str, bytes] = {}  # custom_id: a digest of its first result, to tell a conflicting twin
        twins: dict[str, int] = {}  # custom_id: its other, different result lines
        unreadable = 0
        spool: Path | None = None
        try:
            fd, name = tempfile.mkstemp(prefix=".results-", dir=self.state.folder)
            spool = Path(name)
            with open(fd, "wb") as out:
                for file_id in (info.output_file_id, info.error_file_id):
                    if file_id is None:
                        continue
                    async for line in self.client.lines(file_id):
                        result = read_result(line, info.id, self._advise)
                        if result is None:
                            unreadable += 1  # torn, not JSON, or naming no request
                            continue
                        key, answer = result
                        if key not in keys:
                            continue
                        digest = _digest(answer)
                        if key not in found:
                            found[key] = digest
                            out.write(line.rstrip(b"\r\n") + b"\n")
                        elif found[key] != digest:
                            twins[key] = twins.get(key, 0) + 1
            with open(spool, "rb") as lines:
                for line in lines:
                    result = read_result(line, info.id, self._advise)
                    assert result is not None  # it was read once already
                    key, answer = result
                    if isinstance(answer, Reply) and key in twins:
                        answer.batch_conflicts = twins[key]
                    self.deliver(key, answer)
        except OSError as exc:
            raise Fatal(
                f"cannot spool the results of batch {info.id} in {self.state.folder}:"
                f" {exc.strerror or exc}; the same command collects them again"
            ) from None
        finally:
            if spool is not None:
                spool.unlink(missing_ok=True)
        if twins:
            say(
                f"warning: batch {info.id} gave {counted(len(twins), 'request')} a second, different"
                " result line; the first of each was used, and its reply records how many others"
                " disagreed (batch_conflicts)"
            )
        by_line = {e["line"]: e for e in info.errors if e.get("line")}
        general = "; ".join(_said(e) for e in info.errors if not e.get("line"))
        for number, key in enumerate(record.keys, 1):
            if key in found or key not in mine:
                continue
            said = _said(by_line[number]) if number in by_line else general
            if said:
                why = f"batch {info.id} {info.status}: {said}"
            elif unreadable:  # its line may be the torn one: not a request the batch never ran
                why = (
                    f"batch {info.id} {info.status}, but no readable result line names this request"
                    f" ({counted(unreadable, 'line')} of its result files could not be read: torn or not"
                    " JSON); the next run sends it again"
                )
            else:
                why = f"batch {info.id} {info.status} before this request ran"
            self.deliver(key, ItemFailure(why))
        if info.status == "failed" and info.errors:
            say(f"batch {info.id} failed: {general or _said(info.errors[0])}")
        self.state.remove(record)


def _said(error: Mapping[str, Any]) -> str:
    return ": ".join(str(error[k]) for k in ("code", "message") if error.get(k))


def _digest(result: Result) -> bytes:
    """What a result says (a reply's text and usage, or the failure), hashed small."""
    import hashlib

    if isinstance(result, Reply):
        said = json.dumps([result.content, result.reasoning, result.finish_reason, result.usage], default=str)
    else:
        said = f"{type(result).__name__}: {result}"
    return hashlib.blake2b(said.encode(), digest_size=8).digest()
