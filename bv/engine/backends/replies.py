"""Reading a server's reply as hostile data: bounded bytes, then field by field.

A body is read in chunks and inflated (gzip, deflate) with a cap on both the bytes received
and the bytes they inflate to, so a huge or gzip-bomb reply costs at most the cap. A
completion is then checked field by field: content given as a list of text parts is joined,
anything else unusable is an unparseable reply; usage values that are not sane counts are
dropped with a note; every text field is redacted for keys and has lone surrogates replaced,
so the row and the cache can always store it.
"""

from __future__ import annotations

import json
import re
import sys
import zlib
from typing import Any

import orjson

from bv.core import redaction
from bv.core.errors import ItemFailure, Transient
from bv.core.run_context import current
from bv.engine.backends import Reply

MAX_REPLY_BYTES = 8 * 1024 * 1024  # per reply body, as received and as inflated
MAX_USAGE = 10**12  # token counts above this are not counts
CHUNK = 64 * 1024


class ReplyTooLarge(ItemFailure):
    """The body went past MAX_REPLY_BYTES (received or inflated)."""


async def read_body(response: Any, limit: int = MAX_REPLY_BYTES) -> bytes:
    """The response body, inflated, or ReplyTooLarge as soon as either side passes `limit`."""
    encoding = (response.headers.get("Content-Encoding") or "identity").strip().lower()
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise ReplyTooLarge(f"reply body of {int(declared):,} bytes is over the {limit:,}-byte limit")
    inflate = None
    if encoding in ("gzip", "x-gzip", "deflate"):
        inflate = zlib.decompressobj(47)  # gzip or zlib header, detected
    elif encoding != "identity":
        raise Transient(f"reply in an unsupported Content-Encoding ({encoding[:40]!r})")
    elif declared and declared.isdigit() and not response.headers.get("Transfer-Encoding"):
        return await response.read()  # exactly Content-Length bytes, checked above: no chunk loop
    received = 0
    parts: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(CHUNK):
        received += len(chunk)
        if received > limit:
            raise ReplyTooLarge(f"reply body over the {limit:,}-byte limit (stopped reading)")
        if inflate is not None:
            try:
                chunk = inflate.decompress(chunk, limit + 1 - size)
            except zlib.error:
                raise Transient("reply body is not valid gzip/deflate") from None
            if inflate.unconsumed_tail:
                raise ReplyTooLarge(f"reply body inflates past the {limit:,}-byte limit (compression bomb?)")
        size += len(chunk)
        if size > limit:
            raise ReplyTooLarge(f"reply body inflates past the {limit:,}-byte limit (compression bomb?)")
        parts.append(chunk)
    return b"".join(parts)


_SURROGATES = re.compile(r"[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """Text fit to store: keys redacted, lone surrogates (invalid in UTF-8) replaced by U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATES.sub("\ufffd", text)
    return redaction.redact(text)


def _content(value: Any) -> str:
    """The message content as text: a string, a list of text parts joined, or None for none."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for part in value:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif not (isinstance(part, dict) and part.get("type") not in (None, "text")):
                raise Transient("unparseable reply (a content part without text)")
        return "".join(texts)
    raise Transient(f"unparseable reply (content is a {type(value).__name__})")


def note_once(key: str, message: str) -> None:
    """Say something on stderr once per run (a server's quirk repeats on every reply)."""
    if current().first_time(f"note: {key}"):
        sys.stderr.write(f"bv: note: {message}\n")


def sane_usage(usage: Any) -> dict[str, int]:
    """prompt_tokens and completion_tokens when they are non-negative ints of sane size; the rest dropped."""
    if not isinstance(usage, dict):
        if usage is not None:
            note_once("usage", "the server's usage is not an object; token counts dropped")
        return {}
    kept = {}
    for name in ("prompt_tokens", "completion_tokens"):
        value = usage.get(name)
        if value is None:
            continue
        if type(value) is int and 0 <= value <= MAX_USAGE:
            kept[name] = value
        else:
            shown = repr(value) if len(repr(value)) < 40 else repr(value)[:37] + "..."
            said = f"the server sent {name} = {clean_text(shown)}, not a token count; dropped"
            note_once(f"usage:{name}", said)
    return kept


def _text_or_none(value: Any) -> str | None:
    return clean_text(value[:200]) if isinstance(value, str) else None


def parse_completion(raw: bytes) -> Reply:
    """A chat completion body as a Reply; Transient("unparseable reply ...") if it is not one."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:  # or what orjson refuses and json takes (a lone surrogate, NaN)
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            raise Transient("unparseable reply (not JSON)") from None
    try:
        choice = data["choices"][0]
        message = choice["message"]
        if not isinstance(message, dict):
            raise TypeError
    except (KeyError, IndexError, TypeError):
        raise Transient("unparseable reply (no choices[0].message)") from None
    return Reply(
        content=clean_text(_content(message.get("content"))),
        finish_reason=_text_or_none(choice.get("finish_reason")),
        usage=sane_usage(data.get("usage")),
        model=_text_or_none(data.get("model")),
    )


def error_message(raw: bytes) -> str:
    """What an error body says (its `error.message` when JSON), redacted, one bounded line."""
    text = raw[:4096].decode("utf-8", errors="replace")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            error = error.get("message", error.get("detail", error))
        if isinstance(error, str):
            text = error
        elif isinstance(data.get("detail"), str):
            text = data["detail"]
    return clean_text(text.strip())[:300]
