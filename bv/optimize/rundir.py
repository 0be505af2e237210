"""The run folder of `bv optimize`: what a person reads and what a re-run resumes from.

    run.json       what the run is (items, seed skill, split, options, models, templates): a re-run
                   with other settings is refused, not mixed in
    split.json     the item ids of train, selection and test
    skills/        every skill version, step-NNN-<sha12>.md
    history.jsonl  one row per finished step (step 0: the seed skill's selection score), and a
                   `stopped` row wherever a run stopped before its end (Ctrl-C, SIGTERM, the cost limit)
    test.json      the final comparison on the test split
    best.md, report.md, report.html

A step is finished when its history row is on disk: each row is one write, synced, so a kill -9
leaves at most a partial last line, which the re-run drops (and redoes that step from the reply
cache). Every other file is written whole or not at all (bv.core.atomic)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bv.core.atomic import atomic_output
from bv.core.errors import BadRecord

MAX_HISTORY_LINE = 64 * 1024 * 1024
STOPPED = "stopped"  # the kind of a history row that says where and why a run stopped early


class RunFolder:
    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def history_path(self) -> Path:
        return self.path / "history.jsonl"

    def write_text(self, name: str, text: str) -> None:
        with atomic_output(self.path / name) as f:
            f.write(text)

    def write_json(self, name: str, value: Any) -> None:
        self.write_text(name, json.dumps(value, indent=2, ensure_ascii=False) + "\n")

    def read_json(self, name: str) -> Any:
        path = self.path / name
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise BadRecord(f"{path}: unreadable ({exc}); remove it or use another `out`") from None

    def skill_file(self, step: int, sha: str) -> str:
        return f"skills/step-{step:03d}-{sha[:12]}.md"

    def write_skill(self, step: int, sha: str, text: str) -> str:
        name = self.skill_file(step, sha)
        if not (self.path / name).exists():
            self.write_text(name, text + "\n")
        return name

    def read_skill(self, name: str, sha: str) -> str:
        """A skill version back from skills/, checked against the SHA-256 its history row names."""
        import hashlib

        path = self.path / name
        try:
            # bytes, not read_text: its newline translation turns a CRLF skill's \r\n into \n, and
            # its hash would never be the one written (issue 34)
            text = path.read_bytes().decode("utf-8").removesuffix("\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadRecord(f"{path}: cannot read this run's skill ({exc})") from None
        if hashlib.sha256(text.encode()).hexdigest() != sha:
            raise BadRecord(f"{path}: changed since the run wrote it (its SHA-256 is not the history's)")
        return text

    def history(self) -> list[dict[str, Any]]:
        """The finished steps' rows; a partial last line (a kill during its write) is cut off."""
        return [row for row in self._rows() if row.get("kind") != STOPPED]

    def stops(self) -> list[dict[str, Any]]:
        """Where runs in this folder stopped before their end, and why (the `stopped` rows)."""
        return [row for row in self._rows() if row.get("kind") == STOPPED]

    def _rows(self) -> list[dict[str, Any]]:
        path = self.history_path
        if not path.exists():
            return []
        data = path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            with path.open("r+b") as f:
                f.truncate(end)
        rows: list[dict[str, Any]] = []
        stops: list[dict[str, Any]] = []
        for number, line in enumerate(data[:end].splitlines(), 1):
            try:
                row = json.loads(line)
            except ValueError:
                raise BadRecord(
                    f"{path}:{number}: not a history row; remove the run folder to start over"
                ) from None
            if isinstance(row, dict) and row.get("kind") == STOPPED:
                stops.append(row)
                continue
            if not isinstance(row, dict) or row.get("step") != len(rows):
                raise BadRecord(f"{path}:{number}: expected the row of step {len(rows)}")
            rows.append(row)
        return rows + stops

    def append_history(self, row: dict[str, Any]) -> None:
        line = (json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.history_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
