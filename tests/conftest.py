"""The fixtures every folder's tests share: an isolated environment, a sample set, its prompts and a
loopback OpenAI-compatible server. What is not a fixture (the fakes, `sh` and `bv_inproc`, paths)
is in tests/support/ (tests/README.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# tests/ on the path, so every test imports what they share as `support.<module>` (tests/README.md).
sys.path.insert(0, str(Path(__file__).parent))
from hypothesis import HealthCheck, settings
from support.commands import BIN, bv_inproc
from support.fakeopenai import FakeOpenAI
from support.installing import Dist, build_bv
from support.optimizing import SEED_SKILL

# Several suites on two cores (or make test's workers) can slow the making of an example past
# Hypothesis's health check: that says nothing about bv, so it fails no test. Test-level settings
# made after this (all of them) inherit it.
settings.register_profile("bv", suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("bv")

# tests/real/ starts real servers that `make test-real` installs (it sets BV_TEST_REAL=1): not make test.
collect_ignore = [] if os.environ.get("BV_TEST_REAL") else ["real"]


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's keys, endpoints or cache."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "AZURE_OPENAI_", "BV_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv("COLUMNS", raising=False)  # a pipe's table fits $COLUMNS when it is set
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bv synth sample set of 12 items (all four categories, both answer types)."""
    from bv.data.synth import write_sample_set

    out = tmp_path_factory.mktemp("sample")
    write_sample_set(out, 12, seed=7)
    return out


@pytest.fixture
def prompts(sample_dir: Path, tmp_path: Path) -> Path:
    """The sample set's 12 prompts as `bv prompt` writes them (a file a rollout reads)."""
    out = tmp_path / "prompts.jsonl"
    result = bv_inproc(f"bv prompt {sample_dir / 'meta_data.jsonl'} > {out}")
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory: pytest.TempPathFactory, sample_dir: Path) -> Path:
    """Three chance runs over the sample, judged by rules: rights and wrongs in every group (the
    results.jsonl the exports are tested on)."""
    out = tmp_path_factory.mktemp("judged") / "results.jsonl"
    result = bv_inproc(
        f"bv prompt {sample_dir / 'meta_data.jsonl'} | bv rollout --backend chance --repeats 3 --seed 2 -q"
        f" | bv judge --mode rules -q > {out}"
    )
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bv optimize's data: a bv synth set of 96 items and a seed skill (seed.md) beside them."""
    from bv.data.synth import write_sample_set

    out = tmp_path_factory.mktemp("optimize-data")
    write_sample_set(out, 96, seed=0)
    (out / "seed.md").write_text(SEED_SKILL + "\n")
    return out


@pytest.fixture
def server():
    """A loopback OpenAI-compatible server; set `server.responder` to script its replies."""
    fake = FakeOpenAI()
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture(scope="session")
def bv_dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """bv's sdist and the wheel built from it (support/installing.py), built once per worker."""
    return build_bv(tmp_path_factory.mktemp("dist"), tmp_path_factory.mktemp("unpacked"))


@pytest.fixture(scope="module")
def inspect_log():
    """inspect_ai.log, or the test skips: inspect-ai is heavy, so only `make test-interop` installs it."""
    return pytest.importorskip(
        "inspect_ai.log",
        reason="inspect-ai is not installed here: `make test-interop` runs these tests in .venv-interop",
    )


@pytest.fixture
def without_inspect(tmp_path: Path) -> dict[str, str]:
    """An environment where inspect_ai cannot be imported, in either venv: a package of that name
    that fails to import stands for a missing one."""
    fake = tmp_path / "no-inspect" / "inspect_ai"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no inspect_ai here')\n")
    return {**os.environ, "PYTHONPATH": str(fake.parent)}
