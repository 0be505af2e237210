"""The run folder of `bv optimize`: what a person reads and what a re-run resumes from.

    run.json       what the run is (items, seed skill, split, options, models, templates): a re-run
                   with other settings is refused, not mixed in
    split.json     the item ids of train, selection and test
    skills/        every skill version, step-NNN-<sha12>.md
    history.jsonl  one row per finished step (step 0: the seed skill's selection score), and a
                   `stopped` row wherever a run stopped before its end (Ctrl-C, SIGTERM, the cost limit)
    test.json      the final comparison on the test split
    test-best.jsonl, test-seed.jsonl   its judged rows: the best skill's and the seed's (what
                   `bv report FOLDER` reads, as a `bv eval` folder's results.jsonl)
    best.md, report.md, report.html

A step is finished when its history row is on disk: each row is one write, synced, so a kill -9
leaves at most a partial last line, which the re-run drops (and redoes that step from the reply
cache). Every other file is written whole or not at all (bv.core.atomic). The folder is owned
(bv.core.run_folder): a folder that is not a bv optimize run is refused, and while a run
writes no other may."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from bv.core import run_folder
from bv.core.atomic import atomic_output
from bv.core.errors import BadRecord, Fatal
from bv.core.json_values import read_json_file
from bv.core.run_folder import FolderRefused
from bv.optimize.results import OptimizeError

MAX_RECORD_BYTES = 64 * 2**20  # run.json, split.json, test.json: a few kB to a few MB

MAX_HISTORY_LINE = 64 * 1024 * 1024  # a history row, written or read (the JSONL line limit)
STOPPED = "stopped"  # the kind of a history row that says where and why a run stopped early
RESUMED_ELSEWHERE = ("endpoints",)  # run.json keys a re-run may change (a model served elsewhere)
_NAMED = {"items_sha256": "the items file's SHA-256", "seed_skill_sha256": "the seed skill's SHA-256"}


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 80 else text[:79] + "…"


def differences(before: Mapping[str, Any], now: Mapping[str, Any], prefix: str = "") -> list[str]:
    """What differs between two run.json records, each as `name: old → new` (nested settings
    dotted: `options.repeats: 1 → 2`); the split is named, not listed. Keys are recorded as
    `***`, so none is ever shown."""
    said = []
    for key in sorted(set(before) | set(now)):
        old, new = before.get(key), now.get(key)
        if old == new or (not prefix and key in RESUMED_ELSEWHERE):
            continue
        name = f"{prefix}{key}"
        if isinstance(old, Mapping) and isinstance(new, Mapping) and name != "split":
            said += differences(old, new, f"{name}.")
        elif name == "split":
            said.append("split: other item ids in train, selection or test")
        else:
            said.append(f"{_NAMED.get(name, name)}: {_shown(old)} → {_shown(new)}")
    return said


class RunFolder:
    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def history_path(self) -> Path:
        return self.path / "history.jsonl"

    @contextlib.contextmanager
    def owned(self) -> Iterator[None]:
        """The folder this run's alone until the block ends (bv.core.run_folder.owned)."""
        with run_folder.owned(self.path, "optimize"):
            yield

    def open(self, identity: Mapping[str, Any], split: Any) -> None:
        """Take up the run the folder holds, or start one: run.json (and split.json) written; a
        run with other settings is refused (OptimizeError names each difference, both values)."""
        run_folder.check(self.path, "optimize")
        before = self.read_json("run.json")
        if before is not None and not isinstance(before, dict):
            raise FolderRefused(
                f"{self.path / 'run.json'} is not a bv optimize run's record (not a JSON object):"
                " use another `out`, or delete that folder to replace what it holds"
            )
        differ = differences(before, identity) if before is not None else []
        if differ:
            raise OptimizeError(
                f"{self.path} holds a run with other settings ({'; '.join(differ)}): use another"
                " `out`, or the same items, skill and options to resume it"
            )
        if before != identity:  # new, or served elsewhere now
            self.write_json("run.json", identity)
        if before is None:
            self.write_json("split.json", split)

    def write_text(self, name: str, text: str) -> None:
        with atomic_output(self.path / name) as f:
            f.write(text)

    def write_rows(self, name: str, rows: Any) -> None:
        """Judged rows as JSONL, the file whole or not at all, each line one the reader accepts."""
        from bv.core.jsonl import fitting_line

        with atomic_output(self.path / name) as f:
            f.write("".join(fitting_line(dict(row)) + "\n" for row in rows))

    def write_json(self, name: str, value: Any) -> None:
        self.write_text(name, json.dumps(value, indent=2, ensure_ascii=False) + "\n")

    def read_json(self, name: str) -> Any:
        path = self.path / name
        if not path.exists():
            return None
        try:  # bounded in bytes and nesting: a run folder's files are data a user or a tool may edit
            return read_json_file(path, MAX_RECORD_BYTES)
        except (OSError, BadRecord) as exc:
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

    def finished_rows(self) -> int:
        """How many history rows the folder holds (0 when new), for a dry run: a folder that is
        not a bv optimize run's is refused first, not read."""
        run_folder.check(self.path, "optimize")
        return len(self.history()) if self.history_path.exists() else 0

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
            if len(line) > MAX_HISTORY_LINE:
                raise BadRecord(f"{path}:{number}: a history row over {MAX_HISTORY_LINE >> 20} MiB")
            try:
                row = json.loads(line)
            except (ValueError, RecursionError):
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
        if len(line) > MAX_HISTORY_LINE:  # never a row the reader refuses: the step is not recorded
            raise Fatal(
                f"cannot write {self.history_path}: the row of step {row.get('step')} is {len(line)}"
                f" bytes, over the {MAX_HISTORY_LINE >> 20} MiB a history row may be"
            )
        try:
            fd = os.open(self.history_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:  # a full disk: the partial line is dropped by the next run's read
            raise Fatal(f"cannot write {self.history_path}: {exc.strerror or exc}") from None
