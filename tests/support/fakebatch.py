"""A small loopback server of the files and batches API (OpenAI's `/v1/...` and Azure's
`/openai/...?api-version=`), for tests of bv's batch mode.

Uploads (multipart, purpose `batch`) are kept; a created batch moves on each time it is asked
for: validating, in_progress (for as long as `hold` is set), finalizing, then `outcome`
(completed, expired, cancelled or failed). Its input lines are answered by `responder`, like
tests/support/fakeopenai.py's, and written as result lines in the documented shapes (the batch object,
file object and result lines are fixtures under tests/fixtures/batch/ naming their sources).
It also answers chat completions online, with the same responder, so an online run and a batch
run can meet the same endpoint. Every request is recorded (`seen`); `creations` counts the
batches created, `chats` the online requests.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from support.fakeopenai import Reply, completion_body
from support.paths import FIXTURES as TEST_FIXTURES

FIXTURES = TEST_FIXTURES / "batch"


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())["body"]


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    json: Any = None
    form: dict[str, str] = field(default_factory=dict)  # multipart fields (the file's by its name)


@dataclass
class Job:
    info: dict[str, Any]
    lines: list[dict[str, Any]]
    polls: int = 0


Responder = Callable[[dict[str, Any]], Reply | None]  # an input line: its reply, or None (never run)


class FakeBatch:
    """The server; `start()` runs it on a background thread and returns its OpenAI base URL."""

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder: Responder = responder or (lambda line: Reply())
        self.outcome = "completed"
        self.hold = threading.Event()  # set: batches stay in_progress
        self.errors: list[dict[str, Any]] = []  # a failed batch's errors.data
        self.seen: list[Call] = []
        self.files: dict[str, bytes] = {}
        self.jobs: dict[str, Job] = {}
        self.creations = 0
        self.api_key: str | None = None  # set: a request with another key is refused (401)
        self.retrievals = 0
        self.chats = 0  # chat completions answered online
        # Azure's completed shape: an error file even when no request failed (its fixture
        # azure_batch_completed, from Azure's batch guide), and its download this slow (seconds)
        self.always_error_file = False
        self.error_file_delay_s = 0.0
        self._error_files: set[str] = set()
        self.expires_in = 86400  # a batch's expires_at, from its creation (OpenAI's 24h window)
        self.gzip_files = False  # files' content sent with Content-Encoding: gzip
        self.mangle: Callable[[bytes], bytes] | None = None  # applied to each output file written
        self.unknown_by_id = False  # set: asked for by id, a batch is 404 (it still runs and is listed)
        self.port = 0
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: Any = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def azure_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> str:
        from aiohttp import web

        ready = threading.Event()

        async def listen() -> None:
            app = web.Application(client_max_size=1024**3)
            app.router.add_route("*", "/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(listen())
            ready.set()
            self._loop.run_forever()

        threading.Thread(target=run, daemon=True).start()
        ready.wait(10)
        return self.base_url

    def stop(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)

    def _id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):04d}"

    async def _handle(self, request: Any) -> Any:
        from aiohttp import web

        path, query = request.path, dict(request.query)
        call = Call(request.method, path, query, {k.lower(): v for k, v in request.headers.items()})
        if request.content_type == "multipart/form-data":
            reader = await request.multipart()
            async for part in reader:
                data = await part.read()
                call.form[str(part.name)] = data.decode()
                if part.filename is not None:
                    call.form["filename"] = part.filename
        elif request.can_read_body:
            call.json = json.loads(await request.read())
        self.seen.append(call)
        if self.error_file_delay_s and any(f"/files/{f}/content" in path for f in self._error_files):
            await asyncio.sleep(self.error_file_delay_s)
        given = call.headers.get("api-key") or call.headers.get("authorization", "").removeprefix("Bearer ")
        if self.api_key is not None and given != self.api_key:
            refused = {
                "message": "Incorrect API key provided.",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
            return web.json_response({"error": refused}, status=401)
        if path.startswith("/openai/"):
            if "api-version" not in query:
                return web.json_response({"error": {"message": "api-version is required"}}, status=400)
            route = path[len("/openai/") :]
        elif path.startswith("/v1/"):
            route = path[len("/v1/") :]
        else:
            return web.json_response({"error": {"message": f"no route {path}"}}, status=404)
        answer, status = self._route(request.method, route, call, query)
        if self.gzip_files and route.endswith("/content") and status == 200:
            import gzip

            packed = gzip.compress(answer)
            return web.Response(
                body=packed, headers={"Content-Encoding": "gzip"}, content_type="application/jsonl"
            )
        return web.Response(body=answer, status=status, content_type="application/json")

    def _route(self, method: str, route: str, call: Call, query: dict[str, str]) -> tuple[bytes, int]:
        parts = route.strip("/").split("/")
        if method == "POST" and parts == ["chat", "completions"]:  # online, for runs to compare with
            self.chats += 1
            reply = self.responder({"custom_id": None, "body": call.json}) or Reply()
            raw = reply.body or completion_body(reply, call.json.get("model", "fake"))
            return raw, reply.status
        if method == "POST" and parts == ["files"]:
            return self._upload(call)
        if method == "GET" and len(parts) == 3 and parts[0] == "files" and parts[2] == "content":
            if parts[1] not in self.files:
                return _error(f"No such File object: {parts[1]}", 404)
            return self.files[parts[1]], 200
        if method == "POST" and parts == ["batches"]:
            return self._create(call.json)
        if method == "GET" and parts == ["batches"]:
            return self._list(query)
        if method == "GET" and len(parts) == 2 and parts[0] == "batches":
            job = self.jobs.get(parts[1])
            if job is None:
                return _error(f"No batch found with id '{parts[1]}'.", 404)
            self.retrievals += 1
            self._advance(job)
            if self.unknown_by_id:
                return _error(f"No batch found with id '{parts[1]}'.", 404)
            return json.dumps(job.info).encode(), 200
        return _error(f"no route {method} {route}", 404)

    def _upload(self, call: Call) -> tuple[bytes, int]:
        if call.form.get("purpose") != "batch" or "file" not in call.form:
            return _error("purpose batch and a file are required", 400)
        file_id = self._id("file-")
        content = call.form["file"].encode()
        self.files[file_id] = content
        body = fixture("openai_file")
        body.update(
            id=file_id, bytes=len(content), created_at=int(time.time()), filename=call.form["filename"]
        )
        return json.dumps(body).encode(), 200

    def _create(self, body: dict[str, Any]) -> tuple[bytes, int]:
        file_id = body.get("input_file_id")
        if file_id not in self.files:
            return _error(f"Invalid 'input_file_id': '{file_id}'.", 404)
        lines = [json.loads(line) for line in self.files[file_id].decode().splitlines() if line.strip()]
        self.creations += 1
        info = copy.deepcopy(fixture("openai_batch"))
        now = int(time.time())
        info.update(
            id=self._id("batch_"),
            endpoint=body.get("endpoint"),
            input_file_id=file_id,
            status="validating",
            output_file_id=None,
            error_file_id=None,
            created_at=now,
            in_progress_at=None,
            expires_at=now + self.expires_in,
            finalizing_at=None,
            completed_at=None,
            request_counts={"total": 0, "completed": 0, "failed": 0},
            metadata=body.get("metadata"),
        )
        job = Job(info, lines)
        self.jobs[info["id"]] = job
        return json.dumps(info).encode(), 200

    def _list(self, query: dict[str, str]) -> tuple[bytes, int]:
        jobs = [job.info for job in reversed(self.jobs.values())]  # newest first, as OpenAI lists them
        if "after" in query:
            ids = [info["id"] for info in jobs]
            jobs = jobs[ids.index(query["after"]) + 1 :] if query["after"] in ids else []
        limit = int(query.get("limit", 20))
        page = {"object": "list", "data": jobs[:limit], "has_more": len(jobs) > limit}
        page.update(first_id=page["data"][0]["id"] if page["data"] else None)
        page.update(last_id=page["data"][-1]["id"] if page["data"] else None)
        return json.dumps(page).encode(), 200

    def _advance(self, job: Job) -> None:
        """One step of the batch's life per look at it."""
        info = job.info
        job.polls += 1
        status = info["status"]
        if status == "validating":
            if self.outcome == "failed":
                info.update(status="failed", failed_at=int(time.time()))
                info["errors"] = {"object": "list", "data": self.errors}
                return
            info.update(status="in_progress", in_progress_at=int(time.time()))
            info["request_counts"] = {"total": len(job.lines), "completed": 0, "failed": 0}
        elif status == "in_progress" and not self.hold.is_set():
            info.update(status="finalizing", finalizing_at=int(time.time()))
        elif status == "finalizing":
            self._finish(job)

    def _finish(self, job: Job) -> None:
        """Answer the lines (all, or none once expired or cancelled) and write the result files."""
        outputs, errors = [], []
        ended = self.outcome in ("expired", "cancelled")
        for line in job.lines:
            reply = None if ended else self.responder(line)
            if reply is None:
                entry = fixture("openai_expired_line")
                if self.outcome == "cancelled":
                    entry["error"] = {"code": "batch_cancelled", "message": "This request was cancelled."}
                entry.update(id=self._id("batch_req_"), custom_id=line["custom_id"])
                errors.append(entry)
            elif reply.status != 200:
                entry = fixture("openai_error_status_line")
                body = (
                    json.loads(reply.body)
                    if reply.body
                    else {"error": {"message": f"fake error {reply.status}"}}
                )
                entry.update(id=self._id("batch_req_"), custom_id=line["custom_id"])
                entry["response"].update(status_code=reply.status, body=body)
                errors.append(entry)
            else:
                entry = fixture("openai_output_line")
                raw = reply.body or completion_body(reply, line["body"].get("model", "fake"))
                entry.update(id=self._id("batch_req_"), custom_id=line["custom_id"])
                entry["response"]["body"] = json.loads(raw)
                outputs.append(entry)
        info = job.info
        counts = {"total": len(job.lines), "completed": len(outputs), "failed": len(errors)}
        info["request_counts"] = counts
        for name, entries in (("output_file_id", outputs), ("error_file_id", errors)):
            if entries or (name == "error_file_id" and self.always_error_file):
                file_id = self._id("file-")
                self.files[file_id] = b"".join(json.dumps(e).encode() + b"\n" for e in entries)
                if name == "output_file_id" and self.mangle is not None:
                    self.files[file_id] = self.mangle(self.files[file_id])
                info[name] = file_id
                if name == "error_file_id":
                    self._error_files.add(file_id)
        when = int(time.time())
        if self.outcome == "completed":
            info.update(status="completed", completed_at=when)
        else:
            info.update(status=self.outcome, **{f"{self.outcome}_at": when})


def _error(message: str, status: int) -> tuple[bytes, int]:
    return json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode(), status


@pytest.fixture(name="batches")
def batch_server() -> Any:
    """A running FakeBatch (import this into a test module to use the `batches` fixture)."""
    fake = FakeBatch()
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture(name="fast_polls", autouse=True)
def quick_batch_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches polled every 20 ms, not every 30 s (imported, it applies to the module's tests)."""
    monkeypatch.setenv("BV_BATCH_POLL_S", "0.02")
