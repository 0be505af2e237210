"""The code stays ruff-clean and formatted (ruff.toml) and type-checks (mypy, setup.cfg), checked
with every test run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import ROOT

RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent))


@pytest.mark.skipif(RUFF is None, reason="ruff is installed with the test extra; not found here")
@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff(args):
    folders = [name for name in ("bv", "tests", "bench", "tools") if (ROOT / name).is_dir()]
    result = subprocess.run([RUFF, *args, *folders], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


MYPY = shutil.which("mypy", path=str(Path(sys.executable).parent))


@pytest.mark.skipif(MYPY is None, reason="mypy is installed with the test extra; not found here")
def test_mypy():
    """bv/ type-checks: records are TypedDicts, so a misspelt record key fails here (setup.cfg's
    [mypy]; its cache goes to build/, so a re-run takes a second or two)."""
    cache = ROOT / "build" / "mypy_cache"
    result = subprocess.run([MYPY, "--cache-dir", str(cache)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
