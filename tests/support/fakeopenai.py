"""A small OpenAI-compatible HTTP server for tests and benchmarks.

It speaks just enough HTTP/1.1 (keep-alive, Content-Length bodies) for the real
``openai`` client, records every request, measures how many were in flight at
once, and lets a test decide per request what to answer or which fault to inject.
Run it as a script for benchmarks: ``python tests/support/fakeopenai.py --latency 0.2``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Reply:
    """What the server does with one request."""

    content: str | None = "\\boxed{A}"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None  # raw body instead of a completion
    stream: Callable[[], Iterable[bytes]] | None = (
        None  # a body made as it is sent, then the connection closes
    )
    delay: float = 0.0
    drop: bool = False  # close the connection without answering
    hang: bool = False  # never answer
    release: threading.Event | None = None  # answer only once the test sets this
    finish_reason: str = "stop"
    usage: tuple[int, int] = (10, 5)


@dataclass
class Seen:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    started: float
    finished: float | None = None  # set once a full reply was written
    status: int | None = None


Responder = Callable[[Seen], Reply]

# Run as a script too (bench/), so its own path, not support.paths: tests/fixtures/.
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def reasoning_model(responder: Responder | None = None) -> Responder:
    """A responder that answers as OpenAI's reasoning models (o1, o3, o4-mini, gpt-5…) do: HTTP 400
    with OpenAI's own error body (tests/fixtures/openai_reasoning_errors.json, which names its
    sources) to a request with `max_tokens`, or with a `temperature` other than 1; anything else
    goes to `responder`."""
    errors = json.loads((FIXTURES / "openai_reasoning_errors.json").read_text())
    answer = responder or (lambda seen: Reply())

    def respond(seen: Seen) -> Reply:
        if seen.path.endswith("/chat/completions"):
            if "max_tokens" in seen.body:
                return Reply(status=errors["status"], body=json.dumps(errors["max_tokens"]).encode())
            if "temperature" in seen.body and seen.body["temperature"] != 1:
                refused = json.loads(json.dumps(errors["temperature"]))
                value = json.dumps(seen.body["temperature"])
                refused["error"]["message"] = refused["error"]["message"].replace("{value}", value)
                return Reply(status=errors["status"], body=json.dumps(refused).encode())
        return answer(seen)

    return respond


def completion_body(reply: Reply, model: str) -> bytes:
    prompt_tokens, completion_tokens = reply.usage
    return json.dumps(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content},
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    ).encode()


def models_body(names: list[str]) -> bytes:
    """The answer to GET /v1/models."""
    data = [{"id": name, "object": "model", "created": 0, "owned_by": "fake"} for name in names]
    return json.dumps({"object": "list", "data": data}).encode()


REPLY_FIXTURES = FIXTURES / "replies"


def reply_fixture(name: str) -> dict[str, Any]:
    """A recorded or documented reply shape: `source` (the doc page or upstream file it comes
    from), `status`, optional `headers`, and `body`, the JSON the endpoint sends."""
    return json.loads((REPLY_FIXTURES / f"{name}.json").read_text())


def replay(name: str) -> Reply:
    """The server's answer to a request: the fixture's status, headers and body, byte for byte."""
    fixture = reply_fixture(name)
    body = json.dumps(fixture["body"], ensure_ascii=False).encode()
    return Reply(status=fixture.get("status", 200), headers=dict(fixture.get("headers", {})), body=body)


def decode_images(body: Any) -> int:
    """Decode every base64 data-URI image of a chat request, as a vision model's server must
    before it can answer; returns how many. What is not a decodable image is skipped (the
    server still answers), so a benchmark's figures never hinge on this check."""
    import base64
    import binascii
    import io

    from PIL import Image, UnidentifiedImageError

    decoded = 0
    messages = body.get("messages") if isinstance(body, dict) else None
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else ():
            url = part.get("image_url", {}).get("url", "") if isinstance(part, dict) else ""
            if not isinstance(url, str) or not url.startswith("data:") or "," not in url:
                continue
            try:
                with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as image:
                    image.load()
            except (binascii.Error, OSError, UnidentifiedImageError, ValueError):
                continue
            decoded += 1
    return decoded


REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class FakeOpenAI:
    """The server; ``start()`` runs it on a background thread and returns its base URL."""

    def __init__(
        self,
        responder: Responder | None = None,
        latency: float = 0.0,
        keep_bodies: bool = True,
        decode_images: bool = False,
    ) -> None:
        self.responder = responder or (lambda seen: Reply())
        self.latency = latency
        self.keep_bodies = keep_bodies  # False for benchmarks: bodies hold images, and parsing costs CPU
        # True for benchmarks that want a server doing what a model server does with each request
        # (parse the body, decode every image) instead of an idle one; see decode_images().
        self.decode_images = decode_images
        self.images_decoded = 0
        self.seen: list[Seen] = []
        self.models = ["fake-model"]  # what GET /v1/models lists
        self.in_flight = 0
        self.peak_in_flight = 0
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def finished(self) -> list[Seen]:
        return [s for s in self.seen if s.finished is not None]

    def start(self) -> str:
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._listen())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self.base_url

    def stop(self) -> None:
        """Close the listener and every open connection, then the loop."""
        if self._loop is None:
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for writer in list(self._writers):
                writer.close()
            await asyncio.sleep(0)
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()
            asyncio.get_running_loop().stop()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop)
        if self._thread is not None:
            self._thread.join(5)
        self._loop.close()

    async def _listen(self, port: int = 0) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port, backlog=2048)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while await self._one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        _method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        raw = await reader.readexactly(int(headers.get("content-length", "0")))
        body = json.loads(raw) if raw and (self.keep_bodies or self.decode_images) else {}
        if self.decode_images:
            self.images_decoded += decode_images(body)
            if not self.keep_bodies:
                body = {"model": body.get("model", "fake")} if isinstance(body, dict) else {}
        seen = Seen(path=path, headers=headers, body=body, started=time.monotonic())
        self.seen.append(seen)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            reply = self.responder(seen)
            if self.latency or reply.delay:
                await asyncio.sleep(self.latency + reply.delay)
            if reply.hang:
                await asyncio.sleep(3600)
            while reply.release is not None and not reply.release.is_set():
                await asyncio.sleep(0.01)
            if reply.drop:
                return False
            if reply.stream is not None:
                return await self._stream(writer, reply, seen)
            payload = (
                reply.body
                if reply.body is not None
                else (
                    json.dumps({"error": {"message": f"fake error {reply.status}"}}).encode()
                    if reply.status != 200
                    else models_body(self.models)
                    if path.endswith("/models")
                    else completion_body(reply, body.get("model", "fake"))
                )
            )
            head_lines = [
                f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, 'Status')}",
                "content-type: application/json",
                f"content-length: {len(payload)}",
            ]
            head_lines += [f"{k}: {v}" for k, v in reply.headers.items()]
            # Marked before the write: a client in this process may read the reply before this
            # thread runs again; a connection that fails meanwhile unmarks it.
            seen.status, seen.finished = reply.status, time.monotonic()
            try:
                writer.write(("\r\n".join(head_lines) + "\r\n\r\n").encode() + payload)
                await writer.drain()
            except BaseException:
                seen.finished = None
                raise
            return True
        finally:
            self.in_flight -= 1

    async def _stream(self, writer: asyncio.StreamWriter, reply: Reply, seen: Seen) -> bool:
        """Send a body chunk by chunk (its length only if the reply's headers declare one), then close."""
        head_lines = [f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, 'Status')}", "connection: close"]
        head_lines += ["content-type: application/json", *(f"{k}: {v}" for k, v in reply.headers.items())]
        writer.write(("\r\n".join(head_lines) + "\r\n\r\n").encode())
        for chunk in reply.stream():  # type: ignore[misc]
            writer.write(chunk)
            await writer.drain()
        seen.status, seen.finished = reply.status, time.monotonic()
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--stats", help="write request statistics as JSON here on SIGTERM")
    parser.add_argument(
        "--reasoning", action="store_true", help="answer as OpenAI's reasoning models do (reasoning_model)"
    )
    parser.add_argument(
        "--decode-images",
        action="store_true",
        help="parse every request and decode each of its images, as a model server must (for benchmarks)",
    )
    args = parser.parse_args()
    server = FakeOpenAI(
        responder=reasoning_model() if args.reasoning else None,
        latency=args.latency,
        keep_bodies=args.reasoning,  # the reasoning mode reads the body
        decode_images=args.decode_images,
    )

    async def run() -> None:
        import signal

        await server._listen(args.port)
        print(server.base_url, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        await stop.wait()
        if args.stats:
            done = server.finished()
            stats = {
                "requests": len(server.seen),
                "finished": len(done),
                "peak_in_flight": server.peak_in_flight,
                "images_decoded": server.images_decoded,
                "first_request": min((s.started for s in server.seen), default=None),
                "last_reply": max((s.finished for s in done), default=None),
            }
            with open(args.stats, "w") as f:
                json.dump(stats, f)

    asyncio.run(run())


if __name__ == "__main__":
    main()
