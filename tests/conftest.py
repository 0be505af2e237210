"""Shared fixtures: an isolated environment, a sample set, a loopback OpenAI-compatible server,
and a way to run bv exactly as users type it (shell pipelines of the installed `bv` script)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fakeopenai import FakeOpenAI, Reply

BIN = Path(sys.executable).parent
SHARED = Path(__file__).resolve().parents[2] / "shared"
OFFICIAL_RESULTS = SHARED / "babyvision" / "official-results"
OFFICIAL_FILES = [OFFICIAL_RESULTS / f"model_results_run_{k}.json" for k in (1, 2, 3)]
# The official evaluation's real outputs sit in ../shared beside the project, which users' machines lack.
needs_official_results = pytest.mark.skipif(
    not all(f.exists() for f in OFFICIAL_FILES),
    reason="the official result files are in ../shared/babyvision/official-results, not on this machine",
)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's keys, endpoints or cache."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "AZURE_OPENAI_", "BV_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bv synth sample set of 12 items (all four categories, both answer types)."""
    from bv.synth import write_sample_set

    out = tmp_path_factory.mktemp("sample")
    write_sample_set(out, 12, seed=7)
    return out


def read_items(sample_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (sample_dir / "meta_data.jsonl").read_text().splitlines()]


@pytest.fixture
def server():
    """A loopback OpenAI-compatible server; set `server.responder` to script its replies."""
    fake = FakeOpenAI()
    fake.start()
    yield fake
    fake.stop()


def sh(
    command: str,
    *,
    cwd: Path | None = None,
    input: str | None = None,
    timeout: float = 120,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Run a shell command line (a bv pipeline) the way a user would, capturing both streams."""
    path = f"{BIN}{os.pathsep}{os.environ['PATH']}"  # the installed bv, also for module-scoped fixtures
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PATH": path, **(env or {})},
    )


def jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


__all__ = ["SHARED", "FakeOpenAI", "Reply", "jsonl", "read_items", "sh"]
