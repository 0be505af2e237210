"""Batch mode: a stage's requests sent as batch jobs (the files and batches API) instead of one
by one, with the rows, the cache and the errors of an online run.

The stage runs exactly as online (the same `rollout_one`, the same judge), with every row in
flight at once and a `BatchCaller` in place of the `Caller`. Its `call` answers from the reply
cache as always; a request the cache lacks waits. Once every unfinished row waits, the waiting
requests go out as batch jobs (one per input file, bv.engine.batch_lines), are polled until they
end, and each result is stored in the cache under the request's key (each line's custom_id) and
handed to its row, which goes on: a reply without an answer asks for a refinement turn, which
waits for the next batch. A failure inside a batch (an error line, a status other than 200, a
request the batch never ran because it expired, was cancelled or failed) is that row's error, as
online. Each batch is recorded (bv.engine.batch_state) so a re-run of the same command polls it
instead of submitting it again.

This module holds the rows' side: which requests wait, when a batch goes, the cost limit, what a
result does to the cache and its rows. A batch's life on the server (input files, upload,
create, resume, poll, result lines) is bv.engine.batch_jobs.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from bv.core import environment, redaction
from bv.core.errors import BadConfig, Fatal, Interrupted, ItemFailure
from bv.core.outcome import Outcome, say
from bv.engine.backends import Backend, Reply, endpoint_of
from bv.engine.batch_api import BatchClient
from bv.engine.batch_budget import BatchBudget, Messages
from bv.engine.batch_jobs import BatchJobs, Request
from bv.engine.batch_lines import Result
from bv.engine.batch_state import BatchState, folder_for
from bv.engine.cache import ReplyCache
from bv.engine.caller import Caller, RunSettings, run_stage
from bv.engine.endpoints import Endpoint
from bv.engine.params import provider_of
from bv.engine.prices import first_url, reply_cost
from bv.engine.progress import Stats
from bv.engine.retry import RetryPolicy

T = TypeVar("T")
POLL_S = 30.0  # between two looks at a running batch (BV_BATCH_POLL_S)


@dataclass
class Waiting:
    """A request the cache lacks, and the rows waiting for its reply."""

    messages: list[dict[str, Any]]
    params: dict[str, Any]
    keep: Callable[[Reply], bool] | None
    futures: list[asyncio.Future] = field(default_factory=list)


def check_batchable(backend_name: str, cache_path: Path | None) -> None:
    """Refuse batch mode where it cannot work, before any work (BadConfig, in the settings' words)."""
    if backend_name not in ("openai", "azure"):
        raise BadConfig(f"`batch` needs the openai or azure backend, not {backend_name}", option="batch")
    if cache_path is None:
        raise BadConfig(
            "`batch` needs the reply cache: it is where a batch's replies wait for their rows and for"
            " a re-run",
            option="batch",
        )


# The model names OpenAI's Batch API itself serves: a family prefix, no `provider/` part.
_PROVIDER_MODEL = re.compile(r"(gpt-|chatgpt-|o[1-9]|computer-use-|codex-)[A-Za-z0-9._:-]*")


def alias_warning(endpoint: Endpoint) -> str | None:
    """Why a batch may be refused line by line: its lines go through a server that is not the
    provider (a proxy, a gateway) with a model name that is not one of the provider's own. A
    LiteLLM proxy maps its aliases for online requests but passes a batch's input file to the
    provider as written (LiteLLM 1.106.12, docs/batch.md), so an alias there fails every line.
    The rule: warn when the base URL is not OpenAI's or Azure's and the model name is not of
    OpenAI's families (gpt-*, chatgpt-*, o1…o9*, computer-use-*, codex-*). Azure deployments
    and names at the provider itself are the provider's to check."""
    url = endpoint.base_url[0] if endpoint.base_url else None
    if provider_of(endpoint.kind, url) in ("openai", "azure") or _PROVIDER_MODEL.fullmatch(endpoint.model):
        return None
    where = redaction.public_url(url or "")
    return (
        f"`batch` through {where}, which is not the provider's own API, with `model` {endpoint.model}:"
        " bv cannot tell whether that is the provider's model name or a proxy alias. A LiteLLM proxy"
        " passes batch lines to the provider with the model as written (it maps aliases only online),"
        " so a provider refuses every line of an alias: give the provider's model name (docs/batch.md)"
    )


# What a first Ctrl-C or SIGTERM does in batch mode (BatchCaller._interrupt): no request is in
# flight to wait for; the batch jobs run on (the next line says which, and how to collect them).
ON_STOP = "no new batch is sent, and the rows still waiting for theirs are not written"


@dataclass
class BatchCaller(Caller):
    """A Caller whose requests the cache lacks go out in batch jobs (see the module)."""

    client: BatchClient | None = None
    state: BatchState | None = None
    stage: str = "rollout"
    poll_s: float = POLL_S
    on_stop: str | None = ON_STOP
    _waiting: dict[str, Waiting] = field(default_factory=dict)  # for the next batch
    _current: dict[str, Waiting] = field(default_factory=dict)  # in the batches now running
    _keep: Callable[[Reply], bool] | None = None
    _expected: int = 0
    _started: int = 0
    _active: int = 0  # rows running
    _blocked: int = 0  # rows waiting for a batch
    _changed: asyncio.Event | None = None
    _coordinator: asyncio.Future | None = None
    budget: BatchBudget | None = None  # `max_cost`, kept before each batch (bv.engine.batch_budget)
    _held: dict[str, Waiting] = field(default_factory=dict)  # held back by the budget
    _unpriced: str | None = None  # why a collected reply's cost is unknown (the limit cannot be kept)
    _jobs: BatchJobs | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.client is not None and self.state is not None:
            self._jobs = BatchJobs(
                self.backend,
                self.client,
                self.state,
                self.stats,
                self.stage,
                self.poll_s,
                request=self._request,
                deliver=self._deliver,
            )

    @classmethod
    def for_batches(
        cls,
        backend: Backend,
        settings: RunSettings,
        stats: Stats,
        stopping: asyncio.Event,
        stage: str,
        max_tokens: int | None = None,
        prompt_tokens: Callable[[Messages], int] | None = None,
    ) -> BatchCaller:
        """`max_tokens` and `prompt_tokens` (an upper bound of a request's prompt tokens) bound
        each request's cost for `max_cost` (the stage's config has refused `max_cost` without them)."""
        endpoint = getattr(backend, "config", None)
        if settings.cache_path is None or endpoint is None or not hasattr(backend, "request_body"):
            raise BadConfig(
                "batch mode needs the openai or azure backend and the reply cache", option="batch"
            )
        policy = RetryPolicy(retries=settings.retries, rate_limit_patience=settings.rate_limit_patience)
        stats.endpoint = backend.endpoint or backend.name
        stats.priced, stats.cost_limit = settings.prices is not None, settings.max_cost
        stats.batches = {}  # batch mode: the progress line shows the batch jobs, not a request rate
        budget = None
        if settings.max_cost is not None and settings.prices is not None:
            assert max_tokens is not None and prompt_tokens is not None
            where = first_url(backend.endpoint)
            budget = BatchBudget(
                settings.prices, settings.max_cost, backend.model, where, max_tokens, prompt_tokens
            )
        return cls(
            backend,
            ReplyCache(settings.cache_path),
            stats,
            policy,
            settings.timeout,
            stopping,
            prices=settings.prices,
            max_cost=settings.max_cost,
            client=BatchClient(endpoint, policy),
            state=BatchState(folder_for(settings.cache_path)),
            stage=stage,
            poll_s=environment.number("BV_BATCH_POLL_S", POLL_S),
            budget=budget,
        )

    async def call(
        self,
        messages: list[dict[str, Any]],
        params: dict[str, Any],
        run: int = 0,
        turn: int = 0,
        keep: Callable[[Reply], bool] | None = None,
    ) -> tuple[Reply, bool]:
        """The reply from the cache, else from the batch that sends this request."""
        key = self._key(messages, params, run, turn)
        assert key is not None and self.cache is not None  # for_batches: batch mode has a cache
        cached = self.cached(key)
        if cached is not None:
            return cached, True
        if self.stopping.is_set() or self.stats.limit_reached is not None:
            raise Interrupted()
        self._keep = keep
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        waiting = self._waiting.get(key) or self._current.get(key)
        if waiting is None:
            waiting = self._waiting[key] = Waiting(messages, params, keep)
        waiting.futures.append(future)
        self._blocked += 1
        self._wake()
        return await future

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def tracked(
        self, work: Callable[[T], Awaitable[Mapping[str, Any] | None]]
    ) -> Callable[[T], Awaitable[Any]]:
        """`work` counted: batches go out once every row still running waits for one."""

        async def run(task: T) -> Mapping[str, Any] | None:
            if self._coordinator is None:
                self._changed = asyncio.Event()
                self._coordinator = asyncio.ensure_future(self._coordinate())
            self._started += 1
            self._active += 1
            self._wake()
            try:
                return await work(task)
            finally:
                self._active -= 1
                self._wake()
                if self._active == 0 and self._started >= self._expected and self._coordinator:
                    # the last row holds the stage open until the batches are collected: the rows
                    # have their replies from the output file while the error file is still being
                    # read, and a record removed only after it (issue 34) must not be left behind
                    await asyncio.wait({self._coordinator})

        return run

    async def _coordinate(self) -> None:
        """Send the waiting requests whenever every running row waits, until the rows are done."""
        assert self._changed is not None and self.client is not None
        stop = asyncio.ensure_future(self.stopping.wait())
        try:
            while not self.stopping.is_set():
                self._changed.clear()
                all_started = self._started >= self._expected
                if all_started and self._active == 0:
                    return
                sending = self.stats.limit_reached is None  # nothing more once at the cost limit
                if sending and all_started and self._waiting and self._blocked >= self._active:
                    batch, self._waiting = self._waiting, {}
                    job = asyncio.ensure_future(self._send_batch(batch))
                    await asyncio.wait({job, stop}, return_when=asyncio.FIRST_COMPLETED)
                    if not job.done():
                        job.cancel()
                        await asyncio.gather(job, return_exceptions=True)
                    continue
                changed = asyncio.ensure_future(self._changed.wait())
                await asyncio.wait({changed, stop}, return_when=asyncio.FIRST_COMPLETED)
                changed.cancel()
            self._interrupt()
        finally:
            stop.cancel()
            await self.client.aclose()

    def _interrupt(self) -> None:
        """Ctrl-C: the rows waiting stop (redone by the next run); the batches go on on the server."""
        shown = self._jobs.shown if self._jobs is not None else {}
        running = [f"{batch_id} ({progress})" for batch_id, progress in shown.items()]
        if running and self.state is not None:
            say(
                f"batch {', '.join(running)} goes on on the server; run the same command again to collect"
                f" its results (recorded in {self.state.folder})"
            )
        for waiting in [*self._waiting.values(), *self._current.values(), *self._held.values()]:
            for future in waiting.futures:
                if not future.done():
                    future.set_exception(Interrupted())
        self._waiting, self._current, self._held = {}, {}, {}

    def _request(self, key: str) -> Request:
        """A request in the batches now running, for its input line."""
        waiting = self._current[key]
        return waiting.messages, waiting.params

    def _deliver(self, key: str, result: Result | Fatal) -> None:
        """A batch's result for one request: into the cache (a reply its row keeps), to its rows."""
        waiting = self._current.pop(key, None)
        if isinstance(result, Reply):
            result.content = redaction.redact(result.content)  # a server or proxy may echo a key
            if result.reasoning is not None:
                result.reasoning = redaction.redact(result.reasoning)
            if result.refusal is not None:
                result.refusal = redaction.redact(result.refusal)
            keep = waiting.keep if waiting is not None else self._keep
            if self.cache is not None and (keep is None or keep(result)):
                self.cache.put(
                    key, self.backend.name, self.backend.model, result.to_json(), endpoint_of(self.backend)
                )
            if waiting is not None:
                self.stats.add_usage(result.usage)
                if self.prices is not None:
                    where = first_url(self.backend.endpoint)
                    cost = reply_cost(
                        self.prices,
                        result.usage,
                        self.backend.model,
                        result.model,
                        endpoint=where,
                        batch=True,
                    )
                    self.stats.add_cost(cost.usd)
                    if cost.usd is None:
                        self._unpriced = self._unpriced or cost.source
        if waiting is None:
            return
        for future in waiting.futures:
            if not future.done():
                if isinstance(result, Reply):
                    future.set_result((Reply.from_json(result.to_json()), False))
                else:
                    future.set_exception(result)
        self._blocked -= len(waiting.futures)
        self._wake()

    async def _send_batch(self, batch: dict[str, Waiting]) -> None:
        """Collect these requests: from the recorded batches that hold them, the rest in new ones."""
        assert self.state is not None and self.client is not None and self._jobs is not None
        self._current.update(batch)
        endpoint, model = self.client.config.public, self.backend.model
        jobs: list[tuple[Awaitable[None], set[str]]] = []
        taken: set[str] = set()
        for record, mine in self.state.claim(endpoint, model, batch):
            jobs.append((self._jobs.resume(record, mine), mine))
            taken |= mine
        rest = [key for key in batch if key not in taken]
        fit = None
        if self.budget is not None:
            resumed = self.budget.reserved(batch[key].messages for key in taken)
            fit = self.budget.fit(rest, lambda key: batch[key].messages, self.stats.spent_usd + resumed)
            rest = fit.send
            for key in fit.held:
                self._held[key] = self._current.pop(key)
        for file in await self._jobs.input_files(rest):
            jobs.append((self._jobs.submit(file), set(file.keys)))
        await asyncio.gather(*(self._guarded(job, keys) for job, keys in jobs))
        for key in [key for key in batch if key in self._current]:  # a bug must not leave a row hanging
            self._deliver(key, ItemFailure("the batch gave no result for this request; run again"))
        if self.budget is not None and fit is not None:
            self._keep_budget(self.budget, fit.held, fit.unknown)

    def _keep_budget(self, budget: BatchBudget, held: list[str], unknown: str | None) -> None:
        """After a batch: stop at the cost limit (as the online run does) when requests were held
        back, a cost is unknown, or the limit is spent; the rows still waiting stop (not written,
        redone by the next run; what they were paid for is in the cache)."""
        if unknown is not None:
            unknown = f"a batch request's worst-case cost is {unknown}"
        elif self._unpriced is not None:
            unknown = f"a reply's cost is {self._unpriced}"
        if not budget.stop(self.stats, len(held), unknown):
            return
        for waiting in [*self._held.values(), *self._waiting.values()]:
            for future in waiting.futures:
                if not future.done():
                    future.set_exception(Interrupted())
            self._blocked -= len(waiting.futures)
        self._held, self._waiting = {}, {}

    async def _guarded(self, job: Awaitable[None], keys: set[str]) -> None:
        """One batch's job; whatever stops it is the error of its requests still unanswered."""
        try:
            await job
        except (Fatal, ItemFailure) as exc:
            failure: ItemFailure | Fatal = exc
        except Exception as exc:  # a bug must cost its rows, not the run
            failure = ItemFailure(f"batch: {type(exc).__name__}: {redaction.redact(str(exc))[:200]}")
        else:
            return
        for key in keys & self._current.keys():
            self._deliver(key, failure)


def run_batch_stage(
    tasks: Iterable[T],
    work: Callable[[T], Awaitable[Mapping[str, Any] | None]],
    write: Callable[[Mapping[str, Any]], None],
    *,
    settings: RunSettings,
    stats: Stats,
    label: str,
    stopping: asyncio.Event,
    backend: Backend | None = None,
    caller: Caller | None = None,
    drain_on_interrupt: bool = False,
    others: Sequence[Caller] = (),
) -> Outcome:
    """`run_stage` with a BatchCaller: every task in flight at once (each row waits for its batch);
    one endpoint only (`others` empty: a batch is one judge's, bv.stages.judge_config)."""
    assert isinstance(caller, BatchCaller) and not others
    listed = list(tasks)
    caller._expected = len(listed)
    return run_stage(
        listed,
        caller.tracked(work),
        write,
        settings=replace(settings, jobs=max(1, len(listed))),
        stats=stats,
        label=label,
        stopping=stopping,
        backend=backend,
        caller=caller,
        drain_on_interrupt=drain_on_interrupt,
    )
