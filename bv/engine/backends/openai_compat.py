"""Any OpenAI-compatible chat endpoint (OpenAI, vLLM, SGLang, …) and Azure OpenAI.

Requests are posted with aiohttp directly, with the headers and URLs the `openai` SDK would
send (see bv.engine.endpoints for the environment variables read). The SDK's per-request machinery
(option models, request building, URL parsing) cost about half of bv's CPU at -j 512, and
reading the body ourselves is what lets bv cap its size while it arrives (bv.engine.backends.replies).
Several base URLs (replicas of one model) share the load: each request goes to the replica
with the fewest in flight, and one that keeps failing rests for a while. An endpoint that has
never answered and keeps refusing connections stops the run at once (Fatal), named.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import orjson

from bv.core.errors import Fatal, ItemFailure, NoReply, RateLimited, Refused, Transient, Unreachable
from bv.core.images import EncodedImages, ImageError, ImageOptions, inline_images_async
from bv.core.terminal import printable
from bv.engine.backends import BackendBase, Reply
from bv.engine.backends.replies import (
    clean_text,
    content_filter_error,
    error_body,
    error_message,
    parse_completion,
    read_body,
)
from bv.engine.backends.silence import answers
from bv.engine.deadlines import Deadline, Deadlines
from bv.engine.defaults import JOBS, TIMEOUT_S
from bv.engine.endpoints import (
    CONNECT_TIMEOUT_S,
    Endpoint,
    NoModelList,
    describe_transport_error,
    fetch_models,
    host_port,
    pinned_model,
    resolve,
)
from bv.engine.params import advice, body_fields
from bv.engine.retry import wait_seconds

FAIL_FAST_AFTER = 3  # connection failures to a replica that never answered before the run stops
SILENT_ROUNDS = 2  # rounds of tries that each ran out of the first-byte limit, nothing answered


@dataclass
class Replica:
    url: str
    chat_url: Any  # a yarl.URL, parsed once: aiohttp would parse a string on every request
    proxy: Any = None  # from HTTP(S)_PROXY / NO_PROXY, looked up once, not per request
    proxy_auth: Any = None
    in_flight: int = 0
    failures: int = 0  # consecutive
    rest_until: float = 0.0
    answered: bool = False  # any HTTP answer at all, even an error status
    unreachable: int = 0  # connection failures while never answered
    silent_rounds: int = 0  # rounds of first-byte timeouts while never answered
    # When the last silent try counted in `silent_rounds` ran out of its first-byte limit: tries sent
    # before then were in flight together with it, one round of silence, counted once.
    silent_until: float = 0.0
    last_error: str = ""
    hung: str = ""  # why the replica is taken for hung (`_watch_silence`), once it is


class OpenAIBackend(BackendBase):
    name = "openai"
    endpoint: str
    settings = ("model", "base_url", "api_key", "connect_timeout", "first_byte_timeout", "read_timeout")
    cacheable = True

    def __init__(self, endpoint: Endpoint) -> None:
        self.config = endpoint
        self.model = endpoint.model
        self.endpoint = endpoint.public
        # Replicas of one model answer alike: a reply is found whichever of them served it, and
        # with fewer or more of them; Azure's resource names its deployments' models, and
        # `cache_scope` endpoint keeps two deployments of one model name apart.
        by_url = endpoint.kind == "azure" or endpoint.cache_scope == "endpoint"
        self.cache_scope = endpoint.public if by_url else None
        self.replicas = [Replica(url, endpoint.chat_url(url)) for url in endpoint.base_url]
        self._headers = endpoint.headers()
        self._session: Any = None
        self._diagnosis: asyncio.Future | None = None
        self._watch: asyncio.Future | None = None  # `_watch_silence`, from the first request on
        self._images = EncodedImages()  # an item's repeats and turns send its image again
        self._first_byte = Deadlines(endpoint.first_byte_timeout or endpoint.timeout)
        self._read = Deadlines(endpoint.read_timeout or endpoint.timeout)

    @classmethod
    def config_from(cls, rollout: Any) -> dict[str, Any]:
        """The endpoint, resolved now (a missing key or URL is refused before any work)."""
        endpoint = resolve(
            cls.name,
            model=rollout.model,
            base_url=rollout.base_url,
            api_key=rollout.api_key,
            **rollout.endpoint_waits(),
            sending=not rollout.dry_run,
        )
        return {"endpoint": endpoint}

    @classmethod
    def from_config(
        cls,
        endpoint: Endpoint | None = None,
        model: str | None = None,
        base_url: list[str] | tuple[str, ...] = (),
        api_key: str | None = None,
        timeout: float = TIMEOUT_S,
        jobs: int = JOBS,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        first_byte_timeout: float | None = None,
        read_timeout: float | None = None,
    ) -> OpenAIBackend:
        if endpoint is None:
            endpoint = resolve(
                cls.name,
                model=model,
                base_url=base_url,
                api_key=api_key,
                timeout=timeout,
                jobs=jobs,
                connect_timeout=connect_timeout,
                first_byte_timeout=first_byte_timeout,
                read_timeout=read_timeout,
            )
        return cls(endpoint)

    def _pick(self) -> Replica:
        now = time.monotonic()
        awake = [r for r in self.replicas if r.rest_until <= now]
        if not awake:
            return min(self.replicas, key=lambda r: r.rest_until)
        return min(awake, key=lambda r: r.in_flight)

    def _open(self) -> Any:
        if self._session is None:
            import aiohttp
            from aiohttp.helpers import get_env_proxy_for_url
            from yarl import URL

            for replica in self.replicas:
                replica.chat_url = URL(replica.chat_url)
                try:
                    replica.proxy, replica.proxy_auth = get_env_proxy_for_url(replica.chat_url)
                except LookupError:  # no proxy for this URL
                    pass
            jobs = self.config.jobs
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=jobs + 4, limit_per_host=jobs + 4),
                # The first byte and the rest of the reply have timeouts of their own (_post).
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.config.connect_timeout),
                auto_decompress=False,  # inflated by bv.engine.backends.replies, under a cap
                # Proxies from the environment are looked up above, once; trust_env would look
                # them (and ~/.netrc) up in a thread on every request.
                trust_env=False,
            )
        return self._session

    async def request_body(self, messages: list[dict[str, Any]], **params: Any) -> dict[str, Any]:
        """The body of the request for these messages, images inlined: what `complete` posts and
        what a batch job's input line holds (bv.engine.batch)."""
        options = ImageOptions(max_pixels=params.get("max_pixels"))
        try:
            sendable = await inline_images_async(messages, options, self._images)
        except ImageError as exc:
            raise ItemFailure(f"image: {exc}") from None
        return {"model": self.model, "messages": sendable, **body_fields(params, self.config.rule)}

    async def complete(self, messages: list[dict[str, Any]], **params: Any) -> Reply:
        body = await self.request_body(messages, **params)
        replica = self._pick()
        replica.in_flight += 1
        started = time.monotonic()
        try:
            reply = await self._post(replica, body_json(body))
        except Transient:
            replica.failures += 1
            if replica.failures >= 3 and len(self.replicas) > 1:
                replica.rest_until = time.monotonic() + min(60.0, 2.0**replica.failures)
            raise
        finally:
            replica.in_flight -= 1
        replica.failures = 0
        reply.latency_s = time.monotonic() - started
        return reply

    async def _post(self, replica: Replica, data: bytes) -> Reply:
        """One try: connect (--connect-timeout), send, wait for the reply's first byte
        (--first-byte-timeout), read the rest of it (--read-timeout); each named when it runs out."""
        import aiohttp

        first_byte: Deadline | None = None
        read: Deadline | None = None
        if self._watch is None and self.config.first_byte_timeout is None:
            self._watch = asyncio.ensure_future(self._watch_silence())
        try:
            session = self._open()
            with self._first_byte.start() as first_byte:
                async with session.post(
                    replica.chat_url,
                    data=data,
                    headers=self._headers,
                    proxy=replica.proxy,
                    proxy_auth=replica.proxy_auth,
                ) as response:
                    replica.answered = True
                    first_byte.stop()
                    with self._read.start() as read:
                        status, headers = response.status, response.headers
                        raw = await (read_body(response) if status < 400 else error_body(response))
        except (aiohttp.ClientError, OSError) as exc:  # TimeoutError is an OSError
            if first_byte is not None and first_byte.expired:
                if replica.hung:  # as unreachable as a refused port, found so at once
                    replica.silent_rounds, replica.last_error = SILENT_ROUNDS, replica.hung
                    self._fail_fast()
                what = self._timed_out(replica, "first byte")
                # Accepted, then silent: as unreachable as a refused port, counted once a round
                # (at -j 12 the first tries all time out together; a flaky server answers retries).
                if (
                    not replica.answered
                    and first_byte.when - self._first_byte.seconds >= replica.silent_until
                ):
                    replica.silent_until = first_byte.when
                    replica.silent_rounds += 1
                    replica.last_error = what
                    self._fail_fast()
                raise NoReply(what) from None
            if read is not None and read.expired:
                raise NoReply(self._timed_out(replica, "read")) from None
            what, unreachable = describe_transport_error(exc, replica.url, self.config.connect_timeout)
            if unreachable and not replica.answered:
                replica.unreachable += 1
                replica.last_error = what
                self._fail_fast()
            raise NoReply(what) from None
        if status >= 400:
            raise await self._status_error(replica, status, headers, raw)
        return parse_completion(raw)

    def _timed_out(self, replica: Replica, phase: str) -> str:
        where = host_port(replica.url)
        if phase == "first byte":
            return (
                f"first-byte timeout: {where} sent no reply within {self._first_byte.seconds:g} s of"
                " the request (`first_byte_timeout`)"
            )
        return (
            f"read timeout: {where} did not finish its reply within {self._read.seconds:g} s (`read_timeout`)"
        )

    async def _watch_silence(self) -> None:
        """A hung server found in seconds, not after two rounds of the first-byte limit (see
        bv.engine.backends.silence): once the first requests have waited `connect_timeout` and no
        replica has answered any, each is asked GET /models. One that answers is busy and is
        waited on; when none answers within `connect_timeout` either, the requests in flight end
        at once and the stage stops as for a refused port. Off when `first_byte_timeout` is given:
        the user said how long a reply may take to start."""
        wait = self.config.connect_timeout
        await asyncio.sleep(wait)
        if any(r.answered for r in self.replicas):
            return
        session = self._open()
        alive = await asyncio.gather(
            *(
                answers(session, f"{r.url.rstrip('/')}/models", self._headers, r.proxy, r.proxy_auth, wait)
                for r in self.replicas
            )
        )
        if any(alive) or any(r.answered for r in self.replicas):
            return
        for r in self.replicas:
            r.hung = (
                f"{host_port(r.url)} took requests but answered none within {wait:g} s, nor GET"
                f" /models within {wait:g} s more (`connect_timeout`): it is hung"
            )
        self._first_byte.expire_all()

    def _fail_fast(self) -> None:
        """Stop the run when no replica has ever answered and each keeps failing to connect."""
        if all(
            not r.answered and (r.unreachable >= FAIL_FAST_AFTER or r.silent_rounds >= SILENT_ROUNDS)
            for r in self.replicas
        ):
            who = "the judge endpoint" if self.config.role == "judge" else "the model endpoint"
            reasons = "; ".join(dict.fromkeys(r.last_error for r in self.replicas))
            option = "`judge_base_url`" if self.config.role == "judge" else "`base_url`"
            raise Unreachable(
                f"cannot reach {who} {self.endpoint}: {reasons}."
                f" Nothing answered; check {option} and that the server is up"
            )

    async def _status_error(self, replica: Replica, status: int, headers: Any, raw: bytes) -> Exception:
        """Map an HTTP error status to the retry policy's three kinds."""
        message = printable(error_message(raw))
        where = replica.url if self.config.kind == "azure" else self.endpoint
        if status == 429:
            return RateLimited("429 rate limited", wait_seconds(headers))
        if status in (408, 409) or status >= 500:
            return Transient(f"HTTP {status}", wait_seconds(headers))
        if status in (401, 403):
            return Fatal(f"{self.config.key_refusal(where, status)}. Server said: {message}")
        if status == 404:
            return Fatal(await self._not_found(replica, message))
        if status == 400:
            filtered = content_filter_error(raw)
            if filtered is not None:
                return filtered
            pinned = pinned_model(message)
            if pinned is not None and pinned != self.model:  # every request will be refused alike
                return Fatal(
                    f"HTTP 400: {message} {self.endpoint} serves only the model it was started with:"
                    f" run with `model` {pinned}"
                )
        hint = (
            advice(error_object(raw), self.model, self.config.rule, self.config.role) if status == 400 else ""
        )
        # The parameter table's advice says what to change; else the general fix, said if the stage stops.
        fix = "" if hint else _REFUSAL_FIXES.get(status, _REFUSAL_FIX)
        return Refused(f"HTTP {status}: {message}{hint}", fix)

    async def _not_found(self, replica: Replica, message: str) -> str:
        """A 404 made actionable: a missing /v1, and the models the endpoint does serve."""
        if self._diagnosis is None:
            self._diagnosis = asyncio.ensure_future(self._diagnose_404(replica))
        hints = await asyncio.shield(self._diagnosis)
        said = f"{self.endpoint} answered 404 (not found) for model {self.model!r}"
        return f"{said}. Server said: {message}.{hints}"

    async def _diagnose_404(self, replica: Replica) -> str:
        from urllib.parse import urlsplit

        if self.config.kind == "azure":
            return " Check AZURE_OPENAI_ENDPOINT and that the deployment exists."
        base = replica.url.rstrip("/")
        lacks_v1 = not urlsplit(base).path.rstrip("/").endswith("/v1")
        hints = ""
        if lacks_v1:
            hints = f" The base URL's path lacks /v1: try `base_url` {printable(base)}/v1."

        for url in [f"{base}/v1/models"] * lacks_v1 + [f"{base}/models"]:
            models = await self._list_models(url, replica)
            if models:
                shown = ", ".join(models[:12]) + (f" and {len(models) - 12} more" if len(models) > 12 else "")
                return hints + f" {url} serves: {shown}."
        return hints or " Check the base URL and the model name."

    async def _list_models(self, url: str, replica: Replica) -> list[str]:
        """The model ids a /models URL lists (asked as `bv models` asks), or [] if it does not
        answer with a list within a few seconds."""
        try:
            async with asyncio.timeout(5):
                proxy = {"proxy": replica.proxy, "proxy_auth": replica.proxy_auth}
                listed = await fetch_models(self._open(), self.config, url, **proxy)
        except (NoModelList, TimeoutError):
            return []
        return [printable(clean_text(model["id"]))[:80] for model in listed]

    async def aclose(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._session is not None:
            try:
                await self._session.close()
            except Exception:  # closing is best effort; the process is ending anyway
                pass


_REFUSAL_FIX = (
    "Check the model name and the request's parameters (`extra_body` KEY=VALUE, `max_tokens`, `temperature`)"
    " against what this endpoint accepts (docs/backends.md)."
)
_REFUSAL_FIXES = {
    413: "The request is too large for the endpoint: lower `max_pixels`, or use a model with more context.",
}


def error_object(raw: bytes) -> dict[str, Any]:
    """The `error` object of an error body (message, type, param, code), or {}."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, dict) else {}


def body_json(body: dict[str, Any]) -> bytes:
    """The request body as JSON: by orjson (json.dumps scans each character of an image's data URI
    to escape it, most of a request's JSON time), else by json.dumps for what orjson refuses
    (a lone surrogate, an integer beyond 64 bits, a key that is not a string)."""
    try:
        return orjson.dumps(body)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(body).encode()


class AzureBackend(OpenAIBackend):
    """Azure OpenAI: endpoint, key and API version from the environment; the deployment is --model."""

    name = "azure"
