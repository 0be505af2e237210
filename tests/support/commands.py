"""Run bv as users type it (`sh`: a shell command line of the installed `bv` script) or in this
process through its entry point (`bv_inproc`: for tests of logic), and read what it wrote."""

from __future__ import annotations

import contextlib
import fnmatch
import glob
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent  # the venv's bin/: the installed `bv`


def read_items(sample_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (sample_dir / "meta_data.jsonl").read_text().splitlines()]


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


# Read once, when Python (or a library: huggingface_hub) starts or is imported: a subprocess test varies them.
IMPORT_TIME_VARIABLES = ("PYTHONPATH", "HF_*")


def bv_inproc(
    command: str,
    *,
    cwd: Path | None = None,
    input: str | bytes | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Run a bv command line in this process, through the entry point users run (`bv.cli.app.main`:
    its exit statuses and error messages), with stdin, stdout and stderr captured.

    For tests of logic: no interpreter start-up (0.2-0.4 s a stage). `command` is bv commands
    joined by `|` (run one after the other, each reading what the one before wrote; the status is
    bash's with pipefail; `| head -N` keeps the first lines) or `&&`, with `< file`, `> file` and
    globs. Concurrency between stages,
    broken pipes, signals, terminals and what the interpreter does at exit are for `sh` and real
    processes."""
    if any(fnmatch.fnmatch(name, pattern) for name in env or {} for pattern in IMPORT_TIME_VARIABLES):
        raise ValueError(f"{IMPORT_TIME_VARIABLES} are read at import: use sh() to set them")
    folder = Path(cwd or ".")
    words: list[str] = []
    if any(c in command for c in ";$`") or "2>" in command:
        raise ValueError(f"bv_inproc runs bv command lines, not {command!r}: use sh()")
    for word in shlex.split(command):
        matches = sorted(glob.glob(str(folder / word))) if any(c in word for c in "*?[") else []
        words += matches or [word]
    status, stdout, stderr = 0, b"", ""
    data: str | bytes | None = input
    stage: list[str] = []
    for word in [*words, "&&"]:
        if word not in ("|", "&&"):
            stage.append(word)
            continue
        if stage[:1] == ["head"] and re.fullmatch(r"head -\d+( > \S+)?", " ".join(stage)):
            step = _first_lines(stage, folder, data)  # `| head -2`: a stage of the data, not a reader leaving
        else:
            step = _run_stage(stage, folder, data, env, command)
        stderr += step.stderr
        status = step.returncode or status  # pipefail: the last stage that failed
        data, stage = step.stdout if word == "|" else None, []
        if word == "&&":
            stdout += step.stdout
            if status != 0:
                break
    return subprocess.CompletedProcess(command, status, stdout.decode(), stderr)


def _first_lines(argv: list[str], folder: Path, input: str | bytes | None) -> subprocess.CompletedProcess:
    data = input.encode() if isinstance(input, str) else input or b""
    kept = b"".join(data.splitlines(keepends=True)[: int(argv[1][1:])])
    if len(argv) == 4:
        (folder / argv[3]).write_bytes(kept)
        kept = b""
    return subprocess.CompletedProcess(argv, 0, kept, "")


def _run_stage(
    argv: list[str], folder: Path, input: str | bytes | None, env: dict[str, str] | None, command: str
) -> subprocess.CompletedProcess:
    """One `bv ...` of a command line, with its redirections, run through `bv.cli.app.run` (what the
    `bv` script runs before it exits with the status), in a run context of its own."""
    from click.testing import CliRunner

    import bv.cli.app

    stdin_path = stdout_path = None
    if "<" in argv:
        at = argv.index("<")
        stdin_path, argv = argv[at + 1], argv[:at] + argv[at + 2 :]
    if ">" in argv:
        at = argv.index(">")
        stdout_path, argv = argv[at + 1], argv[:at] + argv[at + 2 :]
    if not argv or Path(argv[0]).name != "bv" or {";", "2>", "2>&1", ">>", "||"} & set(argv):
        raise ValueError(f"bv_inproc runs bv command lines, not {command!r}: use sh()")

    saved_signals = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    saved_cwd = os.getcwd()
    stdin_file = open(folder / stdin_path, "rb") if stdin_path else None
    try:
        with CliRunner().isolation(input=stdin_file or input, env=env) as (out, err, _):
            os.chdir(folder)
            try:
                status = bv.cli.app.run(argv[1:])
            finally:
                with contextlib.suppress(OSError, ValueError):
                    sys.stdout.flush()
                    sys.stderr.flush()
            stdout, stderr = out.getvalue(), err.getvalue()
    finally:
        os.chdir(saved_cwd)
        for signum, handler in saved_signals.items():
            signal.signal(signum, handler)
        if stdin_file is not None:
            stdin_file.close()
    if stdout_path is not None:
        (folder / stdout_path).write_bytes(stdout)
        stdout = b""
    return subprocess.CompletedProcess(argv, status, stdout, stderr.decode())


def jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]
