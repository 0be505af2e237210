"""Reading a server's reply as hostile data: bounded bytes, then field by field.

A body is read in chunks and inflated (gzip, deflate) with a cap on both the bytes received
and the bytes they inflate to, so a huge or gzip-bomb reply costs at most the cap. A
completion is then checked field by field: content given as a list of text parts is joined,
anything else unusable is an unparseable reply; usage values that are not sane counts are
dropped with a note; every text field is redacted for keys and has lone surrogates replaced,
so the row and the cache can always store it.

Beside the content bv reads what endpoints say about it (docs/backends.md, "Replies bv reads";
each shape is a fixture under tests/fixtures/replies/ naming its source): the reasoning, from
`reasoning` (vLLM, OpenRouter), `reasoning_content` (DeepSeek, SGLang, older vLLM),
`reasoning_details` (OpenRouter, kept as sent) or `<think>` blocks in the content; `refusal`;
a content filter's verdict (Azure's `finish_reason: content_filter`, and its HTTP 400 policy
body, ContentFiltered); and the usage's `reasoning_tokens` and `cached_tokens`.
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
from bv.core.extract import split_thinking
from bv.core.run_context import current
from bv.engine.backends import Reply

MAX_REPLY_BYTES = 8 * 1024 * 1024  # per reply body, as received and as inflated
MAX_USAGE = 10**12  # token counts above this are not counts
CHUNK = 64 * 1024
MAX_REASONING_CHARS = 512 * 1024  # reasoning kept per turn: its end, where an answer would be
MAX_REASONING_DETAILS = 64  # reasoning_details entries kept per turn
_DETAIL_KEYS = ("type", "text", "summary", "data", "signature", "id", "format", "index")


class ReplyTooLarge(ItemFailure):
    """The body went past MAX_REPLY_BYTES (received or inflated)."""


class ContentFiltered(ItemFailure):
    """The endpoint's content filter refused the request (Azure's HTTP 400 policy error);
    `categories` says which filters fired, e.g. `hate (high)`."""

    def __init__(self, message: str, categories: str) -> None:
        super().__init__(message)
        self.categories = categories


MAX_ERROR_BODY_BYTES = 1024 * 1024  # an error reply is read for its message only


async def error_body(response: Any) -> bytes:
    """An error reply's body, read for its message: at most MAX_ERROR_BODY_BYTES; a longer one
    is dropped (empty), so a 500 with a huge body is still an HTTP 500, retried as one."""
    try:
        return await read_body(response, MAX_ERROR_BODY_BYTES)
    except ReplyTooLarge:
        return b""


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
    """prompt_tokens and completion_tokens, and reasoning_tokens and cached_tokens when given
    (OpenAI's `*_tokens_details`, DeepSeek's `prompt_cache_hit_tokens`), when they are
    non-negative ints of sane size; the rest dropped."""
    if not isinstance(usage, dict):
        if usage is not None:
            note_once("usage", "the server's usage is not an object; token counts dropped")
        return {}
    completion = usage.get("completion_tokens_details")
    prompt = usage.get("prompt_tokens_details")
    found = {
        "prompt_tokens": usage.get("prompt_tokens"),
        "completion_tokens": usage.get("completion_tokens"),
        "reasoning_tokens": completion.get("reasoning_tokens") if isinstance(completion, dict) else None,
        "cached_tokens": prompt.get("cached_tokens") if isinstance(prompt, dict) else None,
    }
    if found["cached_tokens"] is None:
        found["cached_tokens"] = usage.get("prompt_cache_hit_tokens")
    kept = {}
    for name, value in found.items():
        if value is None:
            continue
        if type(value) is int and 0 <= value <= MAX_USAGE:
            kept[name] = value
        else:
            shown = repr(value) if len(repr(value)) < 40 else repr(value)[:37] + "..."
            said = f"the server sent {name} = {clean_text(shown)}, not a token count; dropped"
            note_once(f"usage:{name}", said)
    return kept


def bounded_reasoning(text: str) -> str:
    """Reasoning fit to keep: at most MAX_REASONING_CHARS, its end kept (where an answer would
    be), the cut said in the text; redacted like the content."""
    if len(text) > MAX_REASONING_CHARS:
        cut = len(text) - MAX_REASONING_CHARS
        text = f"[{cut:,} earlier characters of reasoning not kept]\n" + text[cut:]
    return clean_text(text)


def _reasoning_details(value: Any) -> list[dict[str, Any]] | None:
    """OpenRouter's reasoning_details as sent (text, summary, encrypted data, their format and
    index), each entry's known fields only, strings redacted, at most MAX_REASONING_DETAILS."""
    if not isinstance(value, list):
        return None
    kept = []
    for entry in value[:MAX_REASONING_DETAILS]:
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            continue
        fields: dict[str, Any] = {}
        for key in _DETAIL_KEYS:
            item = entry.get(key)
            if isinstance(item, str):
                fields[key] = clean_text(item)
            elif type(item) is int:
                fields[key] = item
        kept.append(fields)
    return kept or None


def _reasoning(message: dict[str, Any], details: list[dict[str, Any]] | None, content: str) -> str | None:
    """The reasoning text of a reply: its first field that has some, else its `<think>` blocks."""
    for name in ("reasoning", "reasoning_content"):
        value = message.get(name)
        if isinstance(value, str) and value.strip():
            return bounded_reasoning(value)
    if details:
        texts = [d.get("text") or d.get("summary") or "" for d in details]
        joined = "\n\n".join(t for t in texts if t)
        if joined.strip():
            return bounded_reasoning(joined)
    if "<" in content:
        thought = split_thinking(content)[1]
        if thought:
            return bounded_reasoning(thought)
    return None


def filtered_categories(results: Any) -> str | None:
    """Which filters fired in an Azure content_filter_result(s) object (`violence (medium)`,
    `jailbreak`), or None when none says filtered."""
    if not isinstance(results, dict):
        return None
    fired = []
    for name, verdict in list(results.items())[:32]:
        if isinstance(verdict, dict) and verdict.get("filtered") is True:
            severity = verdict.get("severity")
            fired.append(f"{name} ({severity})" if isinstance(severity, str) else str(name))
    return clean_text(", ".join(fired))[:200] if fired else None


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
    content = clean_text(_content(message.get("content")))
    details = _reasoning_details(message.get("reasoning_details"))
    finish_reason = _text_or_none(choice.get("finish_reason"))
    refusal = message.get("refusal")
    content_filter = None
    if finish_reason == "content_filter":
        content_filter = (
            filtered_categories(choice.get("content_filter_results")) or "finish_reason content_filter"
        )
    return Reply(
        content=content,
        finish_reason=finish_reason,
        usage=sane_usage(data.get("usage")),
        model=_text_or_none(data.get("model")),
        reasoning=_reasoning(message, details, content),
        reasoning_details=details,
        refusal=clean_text(refusal[:4000]) if isinstance(refusal, str) and refusal.strip() else None,
        content_filter=content_filter,
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


def content_filter_error(raw: bytes) -> ContentFiltered | None:
    """Azure's HTTP 400 for a prompt its content filter refused (`error.code` content_filter,
    `innererror.code` ResponsibleAIPolicyViolation), as ContentFiltered; None for other errors."""
    try:
        data = json.loads(raw[:MAX_REPLY_BYTES])
    except (ValueError, RecursionError):
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None
    inner = error.get("innererror")
    inner = inner if isinstance(inner, dict) else {}
    if error.get("code") != "content_filter" and inner.get("code") != "ResponsibleAIPolicyViolation":
        return None
    categories = filtered_categories(inner.get("content_filter_result")) or "no category named"
    return ContentFiltered(f"HTTP 400: content filter refused the prompt: {categories}", categories)
