"""Tracking servers for the tracker tests, on 127.0.0.1 at a free port, started and stopped by the
test: a real `mlflow server` with a SQLite backend and a local artifact store (`MlflowServer`), and
`HostileTracker`, which answers MLflow's REST calls well until the one it is told to spoil: a body
of 2 GiB, an empty run id, or no answer at all."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SECRET = "sk-test-SECRETJUDGEKEY-9f8e7d6c"  # given as --judge-api-key: in no tracker's data
QUIET = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}  # no call home from a test


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MlflowServer:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, wait_s: float = 120) -> None:
        mlflow = Path(sys.executable).parent / "mlflow"
        log = (self.folder / "server.log").open("wb")
        self.process = subprocess.Popen(
            [str(mlflow), "server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
             "--backend-store-uri", f"sqlite:///{self.folder / 'mlflow.db'}",
             "--default-artifact-root", str(self.folder / "artifacts")],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **QUIET},
        )  # fmt: skip
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"mlflow server exited: {(self.folder / 'server.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"mlflow server not up after {wait_s} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # its own session: it and its workers
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=20)


class HostileTracker:
    """An MLflow tracking server in its answers, whose `spoil` (`huge`, `empty-id` or `hang`) is
    what it does instead from the first request whose path or body holds `on` (`hit` set then)
    on: a hung server stays hung."""

    def __init__(self, spoil: str, on: str) -> None:
        self.spoil, self.on = spoil, on
        self.hit, self.stopping = threading.Event(), threading.Event()
        self.paths: list[str] = []
        tracker = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                tracker.answer(self, b"")

            def do_POST(self) -> None:
                tracker.answer(self, self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            do_PUT = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, request: BaseHTTPRequestHandler, body: bytes) -> None:
        self.paths.append(request.path)
        if self.on in request.path + body.decode("utf-8", "replace"):
            self.hit.set()
        spoiled = self.hit.is_set()
        try:
            if spoiled and self.spoil == "hang":
                self.stopping.wait()
            elif spoiled and self.spoil == "huge":
                self._send(request, b" " * (1 << 20), length=2 << 30)
            else:
                self._send(request, json.dumps(self._reply(request.path, spoiled)).encode())
        except OSError:  # the client gave up reading: what a bounded client does
            pass

    def _reply(self, path: str, spoiled: bool) -> dict:
        run_id = "" if spoiled and self.spoil == "empty-id" else "0123456789abcdef0123456789abcdef"
        info = {"run_id": run_id, "run_uuid": run_id, "experiment_id": "1", "status": "RUNNING",
                "run_name": "r", "start_time": 0, "lifecycle_stage": "active",
                "artifact_uri": f"mlflow-artifacts:/1/{run_id}/artifacts"}  # fmt: skip
        if "experiments/get" in path:
            return {"experiment": {"experiment_id": "1", "name": "bv", "lifecycle_stage": "active",
                                   "artifact_location": "mlflow-artifacts:/1"}}  # fmt: skip
        if "runs/create" in path or "runs/get" in path:
            return {"run": {"info": info, "data": {}}}
        if "runs/update" in path:
            return {"run_info": info}
        return {}

    def _send(self, request: BaseHTTPRequestHandler, body: bytes, length: int = 0) -> None:
        """`body`, or (given `length`) `body` again and again up to `length` bytes."""
        request.send_response(200)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(length or len(body)))
        request.end_headers()
        sent = 0
        while sent < (length or len(body)) and not self.stopping.is_set():
            request.wfile.write(body)
            sent += len(body)

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


def eval_line(sample_dir: Path, out: Path, track: str, experiment: str) -> str:
    """A chance-baseline `bv eval` with a judge key given (never to be logged), tracked."""
    return (
        f"bv eval {sample_dir}/meta_data.jsonl --backend chance --repeats 2 -o {out} --mode rules"
        f" --judge-api-key {SECRET} --no-cache --track {track} --track-project {experiment}"
    )


def history(out: Path) -> list[dict]:
    """A bv optimize run folder's history rows."""
    import json

    return [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
