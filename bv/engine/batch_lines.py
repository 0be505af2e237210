"""A batch job's files: the request lines bv writes, the result lines it reads back.

An input file holds one request per line, `{"custom_id", "method": "POST", "url", "body"}`, the
body exactly what an online run would post; bv's custom_id is the request's reply-cache key, so
each result lands in the cache under the key an online run would use. A result line (of the
output or the error file) is `{"id", "custom_id", "response": {"status_code", "request_id",
"body"}, "error": {"code", "message"}}` (OpenAI's batch guide and API reference; Azure's batch
pages), read as hostile data: bounded, field by field, a chat completion through the same reader
as an online reply (bv.engine.backends.replies), a failure as the error an online request would
have had. Input files are split to stay within the providers' limits (50,000 requests, 200 MB).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from bv.core import environment
from bv.core.errors import ItemFailure, Refused, Transient
from bv.core.terminal import printable
from bv.engine.backends import Reply
from bv.engine.backends.replies import (
    MAX_REPLY_BYTES,
    clean_text,
    content_filter_error,
    error_message,
    parse_completion,
)

# OpenAI: at most 50,000 requests and 200 MB per input file; Azure: 100,000 requests, 200 MB.
MAX_REQUESTS = 50_000
MAX_FILE_BYTES = 190 * 1000 * 1000  # under 200 MB, with room for a provider counting otherwise
MAX_RESULT_LINE_BYTES = MAX_REPLY_BYTES + 64 * 1024  # a reply body and its envelope


def limits() -> tuple[int, int]:
    """(requests, bytes) per input file: BV_BATCH_MAX_REQUESTS and BV_BATCH_MAX_BYTES can lower
    them, never raise them past the providers' limits."""
    requests = environment.integer("BV_BATCH_MAX_REQUESTS", MAX_REQUESTS)
    size = environment.integer("BV_BATCH_MAX_BYTES", MAX_FILE_BYTES)
    return max(1, min(requests, MAX_REQUESTS)), max(1024, min(size, MAX_FILE_BYTES))


def request_line(custom_id: str, url: str, body: bytes) -> bytes:
    """One line of an input file; `body` is the request body as JSON, as it would be posted."""
    head = orjson.dumps({"custom_id": custom_id, "method": "POST", "url": url})
    return head[:-1] + b',"body":' + body + b"}\n"


@dataclass
class InputFile:
    """One input file being written (a temporary file in `folder`), and the keys it holds in order."""

    path: Path
    stream: IO[bytes]
    keys: list[str] = field(default_factory=list)
    size: int = 0


STALE_INPUT_S = 24 * 3600  # an input file left this long by a killed run is removed


class InputFiles:
    """Request lines into as many input files as the limits ask; each file is then one batch.
    Each is removed once uploaded; those a killed run left behind go after a day."""

    def __init__(self, folder: Path, max_requests: int, max_bytes: int) -> None:
        self.folder, self.max_requests, self.max_bytes = folder, max_requests, max_bytes
        self.files: list[InputFile] = []
        now = time.time()
        for left in folder.glob(".batch-input-*.jsonl") if folder.is_dir() else []:
            try:
                if now - left.stat().st_mtime > STALE_INPUT_S:
                    left.unlink()
            except OSError:
                pass

    def add(self, key: str, line: bytes) -> None:
        """Write one line; a line too big for any file fails its item (an online request that size
        would be refused as well)."""
        if len(line) > self.max_bytes:
            raise ItemFailure(
                f"request of {len(line):,} bytes is over the batch input file limit of {self.max_bytes:,}"
                " bytes (lower `max_pixels`)"
            )
        last = self.files[-1] if self.files else None
        if last is None or len(last.keys) >= self.max_requests or last.size + len(line) > self.max_bytes:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=".batch-input-", suffix=".jsonl", dir=self.folder)
            last = InputFile(Path(name), os.fdopen(fd, "wb"))
            self.files.append(last)
        last.stream.write(line)
        last.keys.append(key)
        last.size += len(line)

    def close(self) -> list[InputFile]:
        for file in self.files:
            file.stream.close()
        return self.files

    def remove(self) -> None:
        for file in self.files:
            file.stream.close()
            file.path.unlink(missing_ok=True)


Result = Reply | ItemFailure


Advice = Callable[[Mapping[str, Any]], str]  # what to change, for a 400's error object ("" if nothing)


def read_result(line: bytes, batch_id: str, advise: Advice | None = None) -> tuple[str, Result] | None:
    """(custom_id, the reply or the failure) of one result line; None for a line that names no
    request (blank, not JSON, no custom_id): it can be matched to nothing. `advise`: the hint a
    refused parameter gets online (bv.engine.params.advice)."""
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):
            return None
    if not isinstance(data, dict) or not isinstance(data.get("custom_id"), str):
        return None
    return data["custom_id"], _result(data, batch_id, advise)


def _result(data: dict[str, Any], batch_id: str, advise: Advice | None) -> Result:
    where = f"in batch {printable(clean_text(batch_id[:80]))}"
    response = data.get("response")
    error = data.get("error")
    if isinstance(response, dict) and isinstance(response.get("status_code"), int):
        status, body = response["status_code"], response.get("body")
        raw = orjson.dumps(body) if body is not None else b""
        if status == 200:
            try:
                reply = parse_completion(raw)
            except Transient as exc:  # no second try inside a batch: the row's error, retried next run
                return ItemFailure(f"{exc} {where}")
            reply.batch = True  # paid at batch rates, recorded with it (in the cache too)
            return reply
        if status == 400:
            filtered = content_filter_error(raw)
            if filtered is not None:
                return filtered
        message = error_message(raw) if raw else _error_text(error) or "no message"
        refused = body.get("error") if isinstance(body, dict) else None
        hint = advise(refused) if advise is not None and status == 400 and isinstance(refused, dict) else ""
        return Refused(f"HTTP {status}: {printable(message)} ({where}){hint}")
    if isinstance(error, dict) or isinstance(error, str):
        return ItemFailure(f"{_error_text(error) or 'failed'} ({where})")
    return ItemFailure(f"no response in the result line ({where})")


def _error_text(error: Any) -> str:
    """`code: message` of a result line's error (an object, or vLLM's plain string)."""
    if isinstance(error, str):
        return printable(clean_text(error[:300]))
    if not isinstance(error, dict):
        return ""
    code, message = error.get("code"), error.get("message")
    parts = [clean_text(v[:300]) for v in (code, message) if isinstance(v, str) and v]
    return printable(": ".join(parts))
