"""A hostile OpenAI-compatible server for tests: every reply a real server or proxy could send
that bv must survive. The request's `model` picks the behaviour (`bv rollout -m gzip-bomb`).

It is tests/support/fakeopenai.py's server with a responder of its own, so the HTTP side is shared.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator

from support.fakeopenai import FakeOpenAI, Reply, Seen

BOXED = "\\boxed{A}"
HUGE_BYTES = 200 * 1024 * 1024  # far past bv's reply cap
# What the gzip bomb inflates to: 32 times bv's reply cap, and more than the 250 MiB a rollout that
# met it may peak at (tests/engine/test_hostile_replies.py), so a client that inflated it all would
# fail there.
BOMB_BYTES = 256 * 1024 * 1024


def completion(
    content: object, *, model: object = "hostile", finish_reason: object = "stop", usage=None
) -> bytes:
    """A chat completion body with any (also invalid) field values; `content` goes in as JSON."""
    return json.dumps(
        {
            "id": "chatcmpl-hostile",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish_reason,
                }
            ],
            "usage": usage if usage is not None else {"prompt_tokens": 10, "completion_tokens": 5},
        }
    ).encode()


def huge_body() -> Iterator[bytes]:
    """A completion whose content is HUGE_BYTES long, made as it is sent."""
    yield b'{"choices": [{"message": {"content": "'
    chunk = b"x" * (1024 * 1024)
    for _ in range(HUGE_BYTES // len(chunk)):
        yield chunk
    yield b'"}}]}'


_BOMB: bytes | None = None


def gzip_bomb() -> bytes:
    """About 1 MB of gzip that inflates to a 256 MiB JSON string (made once, at level 1: deflate's
    fastest, a second or less)."""
    global _BOMB
    if _BOMB is None:
        packer = zlib.compressobj(1, zlib.DEFLATED, 31)
        parts = [packer.compress(b'{"choices": [{"message": {"content": "')]
        block = b"0" * (16 * 1024 * 1024)
        parts += [packer.compress(block) for _ in range(BOMB_BYTES // len(block))]
        parts.append(packer.compress(b'"}}]}') + packer.flush())
        _BOMB = b"".join(parts)
    return _BOMB


def gzip_body(body: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    return packer.compress(body) + packer.flush()


def respond(seen: Seen) -> Reply:
    """What the hostile server answers, by the request's model name."""
    if not seen.path.startswith("/v1/"):
        return Reply(status=404, body=b'{"detail": "Not Found"}')
    if seen.path.endswith("/models"):
        return Reply(body=json.dumps({"data": [{"id": "served-a"}, {"id": "served-\x1b[31mb"}]}).encode())
    model = seen.body.get("model", "")
    key = seen.headers.get("authorization", "")[len("Bearer ") :]
    if model == "content-list":
        parts = [{"type": "text", "text": "I think "}, "it is ", {"type": "text", "text": BOXED}]
        return Reply(body=completion(parts))
    if model == "content-int":
        return Reply(body=completion(42))
    if model == "lone-surrogate":
        return Reply(body=completion("odd \ud800 text " + BOXED))  # json.dumps writes it as \\ud800
    if model == "huge":
        return Reply(stream=huge_body)
    if model == "huge-declared":
        return Reply(stream=huge_body, headers={"content-length": str(HUGE_BYTES + 44)})
    if model == "gzip-bomb":
        return Reply(body=gzip_bomb(), headers={"content-encoding": "gzip"})
    if model == "gzip-ok":
        return Reply(body=gzip_body(completion("zipped " + BOXED)), headers={"content-encoding": "gzip"})
    if model == "echo-key":
        return Reply(body=completion(f"{BOXED} {key}", model=f"m-{key}", finish_reason=f"stop {key[-14:]}"))
    if model == "escape-error":
        message = f"bad \x1b[2J\x1b[31mrequest\x07 for {key}\r\nbv: forged line"
        return Reply(status=400, body=json.dumps({"error": {"message": message}}).encode())
    if model == "escape-404":
        return Reply(
            status=404, body=json.dumps({"error": {"message": "no \x1b]0;title\x07 model"}}).encode()
        )
    if model == "absurd-usage":
        usage = {"prompt_tokens": 10**400, "completion_tokens": "lots"}
        return Reply(body=completion(BOXED, usage=usage))
    if model == "negative-usage":
        return Reply(body=completion(BOXED, usage={"prompt_tokens": -5, "completion_tokens": 7}))
    return Reply(body=completion(BOXED))


class HostileOpenAI(FakeOpenAI):
    """The hostile server: `HostileOpenAI().start()` returns its base URL."""

    def __init__(self) -> None:
        super().__init__(respond)
