"""A non-editable install carries the prompts (they live in prompts/, packaged as bv.prompts)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import jsonl

ROOT = Path(__file__).resolve().parents[1]


# Offline and quick: the build requirements of pyproject.toml are in the test extra, a wheel needs
# no index and no byte-compiling to show what it carries, and pip need not look for a newer pip.
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
OFFLINE = ["-q", "--no-index", "--no-deps"]


def test_wheel_has_prompts_and_works_installed(tmp_path, sample_dir):
    built = subprocess.run(
        [*PIP, "wheel", *OFFLINE, "--no-build-isolation", str(ROOT), "-w", str(tmp_path / "dist")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    wheel = next((tmp_path / "dist").glob("babyvision_bv-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for prompt in (ROOT / "prompts").glob("*.md"):
        assert f"bv/prompts/{prompt.name}" in names
    target = tmp_path / "site"
    installed = subprocess.run(
        [*PIP, "install", *OFFLINE, "--no-compile", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    # Run from the installed copy (first on the path), in a folder far from the source tree.
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run(
        [sys.executable, "-m", "bv", "prompt", str(sample_dir / "meta_data.jsonl")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "## Task Format" in jsonl(result.stdout)[0]["messages"][0]["content"]
    where = subprocess.run(
        [sys.executable, "-c", "import bv.prompts; print(bv.prompts.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert where.stdout.startswith(str(target))
