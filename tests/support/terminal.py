"""Run a command on a pseudo-terminal of a given size, as a user's shell would, and read what it shows."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def on_terminal(
    argv: list[str | Path],
    columns: int = 80,
    *,
    stdin_terminal: bool = True,
    stdin: int | None = None,
    stdout_terminal: bool = True,
    input_bytes: bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> tuple[int, str, bytes]:
    """(exit status, what the terminal showed without colour codes, stdout when it is a pipe).

    stderr always goes to the terminal; stdin and stdout too unless told otherwise. `input_bytes`
    is typed on the terminal, then Ctrl-D."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    process = subprocess.Popen(
        [str(a) for a in argv],
        stdin=slave if stdin_terminal else stdin,
        stdout=slave if stdout_terminal else subprocess.PIPE,
        stderr=slave,
        env={**os.environ, "TERM": "xterm", "COLUMNS": str(columns), **(env or {})},
    )
    os.close(slave)
    if input_bytes is not None:
        os.write(master, input_bytes + b"\x04")
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    out = process.stdout.read() if process.stdout else b""
    status = process.wait(timeout)
    os.close(master)
    return status, ANSI.sub("", seen.decode("utf-8", errors="replace")).replace("\r\n", "\n"), out
