"""bv as a user installs it: the sdist, the wheel built from it, installed (not editable) with any
other wheels in a fresh venv outside the checkout (tests/project/test_packaging.py, and the plugin
package of tests/engine/test_backend_plugins.py). Offline and quick: the build requirements are in
the test extra, and the fresh venv borrows this venv's dependencies (a .pth file naming its
site-packages; a .pth there, such as the editable install's finder, is not read)."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import tarfile
import venv
from dataclasses import dataclass
from pathlib import Path

from support.paths import ROOT


def build(hook: str, source: Path, out: Path) -> Path:
    """Call setuptools' PEP 517 hook in `source`, as a frontend (pip, build) does."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; from setuptools import build_meta; print(build_meta.{hook}(sys.argv[1]))",
            str(out),
        ],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return out / done.stdout.splitlines()[-1]


@dataclass
class Dist:
    sdist: Path
    wheel: Path


def build_bv(dist: Path, unpacked: Path) -> Dist:
    """bv's sdist, and its wheel built from the sdist, as `python -m build` does: what the sdist
    lacks, the wheel lacks."""
    sdist = build("build_sdist", ROOT, dist)
    with tarfile.open(sdist) as tar:
        tar.extractall(unpacked, filter="data")
    return Dist(sdist, build("build_wheel", next(unpacked.iterdir()), dist))


@dataclass
class Installed:
    venv: Path
    home: Path  # the user's folder: every command runs here, far from the checkout

    def sh(self, command: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
        """A command line as a user of the installed bv types it: the venv's bin first on PATH."""
        clean = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("OPENAI_", "AZURE_OPENAI_", "BV_", "PYTHON", "VIRTUAL_ENV"))
        }
        return subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={
                **clean,
                "PATH": f"{self.venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
                "XDG_CACHE_HOME": str(self.home / ".cache"),
                "XDG_DATA_HOME": str(self.home / ".local" / "share"),
                **env,
            },
        )

    def ok(self, command: str, **env: str) -> subprocess.CompletedProcess:
        done = self.sh(command, **env)
        assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stderr}"
        return done


def install(wheels: list[Path], env_dir: Path, home: Path) -> Installed:
    """A fresh venv in `env_dir` with `wheels` installed from their files alone (no index), and this
    venv's dependencies borrowed."""
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", str(python)]
    done = subprocess.run(
        [*pip, "install", "-q", "--no-index", "--no-deps", *map(str, wheels)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    borrowed = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (Path(purelib) / "bv_test_dependencies.pth").write_text("\n".join(borrowed) + "\n")
    return Installed(env_dir, home)
