"""The files and batches endpoints, as OpenAI and Azure OpenAI serve them.

OpenAI (and OpenAI-compatible servers that offer batches): `POST {base}/files` (multipart,
`purpose=batch`), `POST {base}/batches` `{input_file_id, endpoint: "/v1/chat/completions",
completion_window: "24h"}`, `GET {base}/batches/{id}`, `GET {base}/batches?limit=&after=`, `GET
{base}/files/{id}/content`. Azure: the same under `{resource}/openai/...?api-version=…`, with the
`api-key` header, the deployment as each line's `model` and `/chat/completions` as the endpoint
and each line's url. Requests carry the headers of the endpoint's chat requests (bv.engine.
endpoints). What comes back is read as hostile: bodies under a cap, a batch object field by field
(Azure writes its status capitalised and its times as dates, and may give nulls for counts).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from bv.core.errors import Fatal, ItemFailure, RateLimited, Transient
from bv.core.terminal import printable
from bv.engine.backends.replies import clean_text, error_body, error_message, read_body
from bv.engine.batch_lines import MAX_RESULT_LINE_BYTES
from bv.engine.endpoints import Endpoint, describe_transport_error
from bv.engine.retry import RetryPolicy, wait_seconds

TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
MAX_OBJECT_BYTES = 4 * 1024 * 1024  # a file or batch object, a page of the batch list
LIST_PAGES = 20  # pages of 100 batches looked through for one made from a given input file
EXPIRY_GRACE_S = 15 * 60  # past a batch's expires_at, time left for the provider to end it
TRIES = 6  # tries of one call to these endpoints for a transient failure (429, 5xx, the wire)


@dataclass
class BatchInfo:
    """What bv reads of a batch object."""

    id: str
    status: str  # lower case, as OpenAI spells it
    input_file_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    total: int | None = None
    completed: int | None = None
    failed: int | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)  # code, message, line (1-based)
    expires_at: float | None = None  # Unix seconds: past it (and a grace), polling ends

    def overdue(self, now: float) -> bool:
        """Still not ended EXPIRY_GRACE_S after its expires_at: the provider should have ended it
        (`expired`); a server that keeps it running is not polled forever (issue 34)."""
        return not self.done and self.expires_at is not None and now > self.expires_at + EXPIRY_GRACE_S

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    def progress(self) -> str:
        """`in_progress, 120/388 requests done, 2 failed`."""
        text = self.status
        if self.total:
            text += f", {self.completed or 0}/{self.total} requests done"
            if self.failed:
                text += f", {self.failed} failed"
        return text


def _text(value: Any, limit: int = 200) -> str | None:
    return printable(clean_text(value[:limit])) if isinstance(value, str) and value else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**9 else None


def batch_info(data: Any) -> BatchInfo:
    """A batch object read field by field; Transient when it names no batch (a broken reply)."""
    if not isinstance(data, dict) or not _text(data.get("id")):
        raise Transient("unparseable batch object (no id)")
    counts = data.get("request_counts")
    counts = counts if isinstance(counts, dict) else {}
    errors = data.get("errors")
    listed = errors.get("data") if isinstance(errors, dict) else None
    found = []
    for entry in listed[:100] if isinstance(listed, list) else []:
        if isinstance(entry, dict):
            found.append(
                {
                    "code": _text(entry.get("code")),
                    "message": _text(entry.get("message"), 400),
                    "line": _count(entry.get("line")),
                }
            )
    return BatchInfo(
        id=str(_text(data["id"])),
        status=(_text(data.get("status"), 40) or "unknown").lower(),
        input_file_id=_text(data.get("input_file_id")),
        output_file_id=_text(data.get("output_file_id")),
        error_file_id=_text(data.get("error_file_id")),
        total=_count(counts.get("total")),
        completed=_count(counts.get("completed")),
        failed=_count(counts.get("failed")),
        errors=found,
        expires_at=_when(data.get("expires_at")),
    )


def _when(value: Any) -> float | None:
    """A time as OpenAI writes it (Unix seconds) or Azure's REST pages may (an ISO 8601 date)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 1e11:
        return float(value)
    if isinstance(value, str) and len(value) <= 40:
        from datetime import UTC, datetime

        try:
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
    return None


class BatchClient:
    """Calls to one endpoint's files and batches API; transient failures retried a few times."""

    def __init__(self, endpoint: Endpoint, policy: RetryPolicy | None = None) -> None:
        self.config = endpoint
        self.base = endpoint.base_url[0].rstrip("/")
        self.policy = policy or RetryPolicy()
        self._session: Any = None

    @property
    def line_url(self) -> str:
        """Each input line's `url`, and the batch's `endpoint`."""
        return "/chat/completions" if self.config.kind == "azure" else "/v1/chat/completions"

    def url(self, path: str, query: Mapping[str, str] | None = None) -> str:
        """The URL of `path` (`files`, `batches/{id}`, …) on this endpoint."""
        args = dict(query or {})
        if self.config.kind == "azure":
            args["api-version"] = self.config.api_version or ""
            url = f"{self.base}/openai/{path}"
        else:
            url = f"{self.base}/{path}"
        if args:
            url += "?" + "&".join(f"{quote(k)}={quote(v, safe='')}" for k, v in args.items())
        return url

    def _open(self) -> Any:
        if self._session is None:
            import aiohttp

            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=self.config.connect_timeout, sock_read=self.config.timeout
                ),
                auto_decompress=False,  # inflated under a cap (bv.engine.backends.replies)
                trust_env=True,  # HTTP(S)_PROXY, NO_PROXY, as for chat requests
            )
        return self._session

    def _headers(self, json_body: bool) -> dict[str, str]:
        headers = self.config.headers()
        if not json_body:
            headers.pop("Content-Type", None)  # aiohttp writes the multipart boundary
        return headers

    async def _call(
        self, method: str, url: str, what: str, *, json: Any = None, upload: Path | None = None
    ) -> Any:
        """One call, retried for transient failures; its JSON reply, or Fatal / ItemFailure."""
        attempt = 0
        while True:
            try:
                return await self._once(method, url, what, json, upload)
            except Transient as exc:
                if attempt + 1 >= TRIES:
                    raise Fatal(f"{what} failed: {exc.reason} (gave up after {TRIES} tries)") from None
                await asyncio.sleep(self.policy.delay(attempt, exc.retry_after))
                attempt += 1

    async def _once(self, method: str, url: str, what: str, json: Any, upload: Path | None) -> Any:
        import aiohttp

        data: Any = None
        opened = None
        if upload is not None:
            opened = upload.open("rb")
            data = aiohttp.FormData()
            data.add_field("purpose", "batch")
            data.add_field("file", opened, filename="bv-batch-input.jsonl", content_type="application/jsonl")
        elif json is not None:
            data = orjson.dumps(json)
        try:
            async with self._open().request(
                method, url, data=data, headers=self._headers(upload is None)
            ) as response:
                status, headers = response.status, response.headers
                raw = await (read_body(response, MAX_OBJECT_BYTES) if status < 400 else error_body(response))
        except (aiohttp.ClientError, OSError) as exc:
            raise Transient(describe_transport_error(exc, url, self.config.connect_timeout)[0]) from None
        finally:
            if opened is not None:
                opened.close()
        if status >= 400:
            raise self._status_error(status, headers, raw, what)
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise Transient(f"{what}: the reply is not JSON") from None

    def _status_error(self, status: int, headers: Any, raw: bytes, what: str) -> Exception:
        message = printable(error_message(raw))
        if status == 429:
            return RateLimited("429 rate limited", wait_seconds(headers))
        if status in (408, 409) or status >= 500:
            return Transient(f"HTTP {status}", wait_seconds(headers))
        if status in (401, 403):
            return Fatal(f"{self.config.key_refusal(self.config.public, status)}. Server said: {message}")
        if status == 404 and what in ("uploading the batch input file", "creating the batch"):
            return Fatal(
                f"{self.config.public} has no Batch API ({what}: HTTP 404: {message}); batches need"
                " OpenAI, Azure OpenAI (a Global-Batch deployment) or a server that offers /files and"
                " /batches: run without batch mode for others"
            )
        return ItemFailure(f"{what}: HTTP {status}: {message}")

    async def upload(self, path: Path) -> str:
        """Upload an input file (purpose `batch`); its file id."""
        reply = await self._call("POST", self.url("files"), "uploading the batch input file", upload=path)
        file_id = _text(reply.get("id")) if isinstance(reply, dict) else None
        if file_id is None:
            raise Fatal("uploading the batch input file: the reply names no file id")
        return file_id

    async def create(self, input_file_id: str, metadata: Mapping[str, str]) -> BatchInfo:
        body = {
            "input_file_id": input_file_id,
            "endpoint": self.line_url,
            "completion_window": "24h",
            "metadata": dict(metadata),
        }
        return batch_info(await self._call("POST", self.url("batches"), "creating the batch", json=body))

    async def retrieve(self, batch_id: str) -> BatchInfo:
        path = "batches/" + quote(batch_id, safe="")
        return batch_info(await self._call("GET", self.url(path), f"asking for batch {batch_id}"))

    async def find(self, input_file_id: str | None, batch_id: str | None = None) -> BatchInfo | None:
        """The batch with this id or made from this input file, if the endpoint lists one (a run
        killed between creating its batch and recording the batch's id finds it here; so does one
        whose server answers 404 for a batch it still lists)."""
        after = None
        for _ in range(LIST_PAGES):
            query = {"limit": "100", **({"after": after} if after else {})}
            page = await self._call("GET", self.url("batches", query), "listing batches")
            entries = page.get("data") if isinstance(page, dict) else None
            if not isinstance(entries, list) or not entries:
                return None
            for entry in entries:
                if not isinstance(entry, dict):
                    continue
                if (batch_id and entry.get("id") == batch_id) or (
                    input_file_id and entry.get("input_file_id") == input_file_id
                ):
                    return batch_info(entry)
            last = entries[-1].get("id") if isinstance(entries[-1], dict) else None
            if not page.get("has_more") or not isinstance(last, str):
                return None
            after = last
        return None

    async def lines(self, file_id: str) -> AsyncIterator[bytes]:
        """The lines of a result file, streamed; a line over MAX_RESULT_LINE_BYTES is skipped
        (its request then has no result and fails, named)."""
        import aiohttp

        url = self.url("files/" + quote(file_id, safe="") + "/content")
        what = f"downloading batch results {file_id}"
        for attempt in range(TRIES):
            try:
                async for line in self._stream_lines(url, what):
                    yield line
                return
            except Transient as exc:
                if attempt + 1 >= TRIES:
                    raise Fatal(f"{what} failed: {exc.reason} (gave up after {TRIES} tries)") from None
                await asyncio.sleep(self.policy.delay(attempt, exc.retry_after))
            except (aiohttp.ClientError, OSError) as exc:
                if attempt + 1 >= TRIES:
                    raise Fatal(f"{what} failed: {describe_transport_error(exc, url)[0]}") from None
                await asyncio.sleep(self.policy.delay(attempt))

    async def _stream_lines(self, url: str, what: str) -> AsyncIterator[bytes]:
        async with self._open().get(url, headers=self._headers(False)) as response:
            if response.status >= 400:
                raise self._status_error(response.status, response.headers, await error_body(response), what)
            import zlib

            encoding = (response.headers.get("Content-Encoding") or "identity").lower()
            inflate = zlib.decompressobj(47) if encoding in ("gzip", "x-gzip", "deflate") else None
            pending, skipping = b"", False
            async for chunk in response.content.iter_chunked(64 * 1024):
                for data in _inflated(inflate, chunk):
                    *whole, pending = (pending + data).split(b"\n")
                    for line in whole:
                        if skipping:
                            skipping = False  # the end of an oversized line
                        elif line.strip():
                            yield line
                    if len(pending) > MAX_RESULT_LINE_BYTES:
                        pending, skipping = b"", True
            if pending.strip() and not skipping:
                yield pending

    async def aclose(self) -> None:
        if self._session is not None:
            try:
                await self._session.close()
            except Exception:  # best effort: the run is ending
                pass


INFLATE_PIECE = 256 * 1024  # the most one step of inflating a result file may give


def _inflated(inflate: Any, chunk: bytes) -> Iterator[bytes]:
    """A downloaded chunk, inflated INFLATE_PIECE at a time: 64 KiB of gzip can hold 64 MiB of
    newlines (issue 34: 1.2-1.7 GB when inflated whole and split), so what is held at once is
    bounded as a reply's inflation is (bv.engine.backends.replies)."""
    if inflate is None:
        yield chunk
        return
    data = inflate.decompress(chunk, INFLATE_PIECE)
    while True:
        yield data
        if not inflate.unconsumed_tail:
            return
        data = inflate.decompress(inflate.unconsumed_tail, INFLATE_PIECE)
