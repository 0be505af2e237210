"""`make test-real`'s plugin (`-p support.real_parts`) and helpers: bv against real server
software, each part in its own venv under .venv-real (tests/real/install.sh), or skipped with
the reason its install gave. At the end the versions of what the tests ran against are printed."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from support.paths import ROOT

REAL = Path(os.environ.get("BV_REAL_VENV", ROOT / ".venv-real"))
RAN_AGAINST: dict[str, str] = {}  # what each part ran against, printed at the end
SKIPPED: dict[str, str] = {}


def part(name: str, program: str) -> Path:
    """The executable `program` of part `name`'s venv, or a skip saying why it is not there."""
    note = REAL / f"{name}.unavailable"
    if note.exists():
        reason = f"{name}: {note.read_text().strip()}"
        SKIPPED[name] = reason
        pytest.skip(reason)
    path = REAL / name / "bin" / program
    if not path.exists():
        reason = f"{name}: {path} is not installed (run `make test-real`, which installs it)"
        SKIPPED[name] = reason
        pytest.skip(reason)
    return path


def version_of(python: Path, *packages: str) -> str:
    code = (
        "import importlib.metadata as m, sys; print(', '.join(p + ' ' + m.version(p) for p in sys.argv[1:]))"
    )
    return subprocess.run(
        [python, "-c", code, *packages], capture_output=True, text=True, check=True
    ).stdout.strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, process: subprocess.Popen, log: Path, timeout: float) -> None:
    """Until `url` answers (any status), or fail with the server's log when it died or took too long."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"{url} did not answer within {timeout:g} s:\n{log.read_text()[-3000:]}")


def stop(process: subprocess.Popen) -> None:
    """End a server this test started (its process group), by its id."""
    if process.poll() is None:
        os.killpg(process.pid, 15)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait(5)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    write = terminalreporter.write_line
    write("make test-real ran against:")
    for name, what in sorted(RAN_AGAINST.items()):
        write(f"  {name}: {what}")
    for name, why in sorted(SKIPPED.items()):
        write(f"  {name}: SKIPPED: {why}")
