"""What each stage of a run says on stderr, also kept in the run folder (logs/<stage>.log).

While a stage runs, stderr is a `Tee`: the terminal gets everything as before (a live progress bar
included), the log the lines as text: terminal control sequences dropped, a line redrawn in
place (`\\r`) kept as last drawn, the bar's unfinished frames never written.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]")
_UP = re.compile(r"\x1b\[\d*A")  # the cursor goes back up: the line above is drawn again or erased


def as_text(line: str) -> str:
    """A line written to a terminal as it reads: escapes dropped, what `\\r` overwrote gone."""
    return _CONTROL.sub("", line).rsplit("\r", 1)[-1].rstrip()


class Tee(io.TextIOBase):
    """A text stream that writes to the terminal (unless `silent`) and, line by line, to a log."""

    def __init__(self, terminal: IO[str], log: IO[str], silent: bool = False) -> None:
        self.terminal, self.log, self.silent = terminal, log, silent
        self._pending = ""
        self._held: str | None = None  # the last line, kept until no later line erases it

    def write(self, text: str) -> int:
        if not self.silent:
            self.terminal.write(text)
        self._pending += text
        if "\n" in self._pending:
            *lines, self._pending = self._pending.split("\n")
            for line in lines:
                self._line(line)
            self.log.flush()
        return len(text)

    def _line(self, line: str) -> None:
        """Log the line held before this one, unless this one moves up over it (a progress bar's
        last frame, erased when the bar goes); hold this one."""
        if _UP.search(line):
            self._held = None
        if self._held:
            self.log.write(self._held + "\n")
        self._held = as_text(line)

    def flush(self) -> None:
        if not self.silent:
            with contextlib.suppress(OSError, ValueError):
                self.terminal.flush()
        self.log.flush()

    def isatty(self) -> bool:  # a progress bar on a terminal, plain lines otherwise, as without the tee
        return not self.silent and self.terminal.isatty()

    def fileno(self) -> int:
        return self.terminal.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def close_line(self) -> None:
        """Keep the last lines (one that did not end: a message cut by an interruption)."""
        self._line(self._pending)
        if self._held:
            self.log.write(self._held + "\n")
        self._pending, self._held = "", None
        self.log.flush()


@contextlib.contextmanager
def logged(path: Path, silent: bool = False) -> Iterator[None]:
    """stderr also written to `path` (appended: a resumed run's log follows the first one's)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as log:
        saved = sys.stderr
        tee = Tee(saved, log, silent)
        sys.stderr = tee
        try:
            yield
        finally:
            tee.close_line()
            sys.stderr = saved
