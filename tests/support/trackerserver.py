"""A real MLflow tracking server for the tracker tests: `mlflow server` with a SQLite backend and
a local artifact store, on 127.0.0.1 at a free port, started and stopped by the test."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
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
