"""Per-item artifacts of a rollout (`--artifacts DIR`): what was sent and what came back,
as files a person can open: DIR/<run>/<id>/system.md, user.md and conversation.json."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from bv.core.jsonl import Problems
from bv.core.records import RolloutRow, message_text

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(item_id: str) -> str:
    """A file name for an id: no `/`, no `..`, nothing hidden, at most 90 characters. An id that
    had to change, is long, or has capitals (case-insensitive file systems) gets a short hash of
    itself, so two ids never share a folder."""
    name = _UNSAFE.sub("_", item_id).strip("._") or "_"
    if name != item_id or len(name) > 80 or name != name.lower():
        name = f"{name[:80]}-{hashlib.sha256(item_id.encode()).hexdigest()[:8]}"
    return name


class Artifacts:
    """The artifacts of a rollout (`--artifacts DIR`), row by row. They are a by-product: failing
    to write them (a full disk) never costs the row itself, and is said on stderr as bad input
    lines are (bv.core.jsonl.Problems): the first few of a kind, then one count at `finish`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._problems: Problems | None = None  # made at the first failure: stderr as it is then

    def write(self, row: RolloutRow, conversation: list[dict[str, Any]]) -> None:
        """Write one rolled-out row's artifacts; `conversation` is every message sent and received,
        follow-up prompts of later turns included."""
        try:
            _write(self.root / str(row["run"]) / safe_name(str(row["id"])), row, conversation)
        except OSError as exc:
            if self._problems is None:
                self._problems = Problems()
            where = f"artifacts of id {row['id']!r} run {row['run']}"
            self._problems.warn(where, f"not written: {exc.strerror or exc}")

    def finish(self) -> None:
        """Say how many failures were not shown one by one."""
        if self._problems is not None:
            self._problems.finish()


def _write(folder: Path, row: RolloutRow, conversation: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    messages = row["messages"]
    system = next((m for m in messages if m.get("role") == "system"), {"content": ""})
    user = next((m for m in messages if m.get("role") == "user"), {"content": ""})
    (folder / "system.md").write_text(
        message_text(system["content"], image_marks=True) + "\n", encoding="utf-8"
    )
    (folder / "user.md").write_text(message_text(user["content"], image_marks=True) + "\n", encoding="utf-8")
    record = {
        "id": row["id"],
        "run": row["run"],
        "backend": row["backend"],
        "model": row["model"],
        "params": row["params"],
        "messages": conversation,
        "turns": row["turns"],
        "response": row["response"],
        "error": row["error"],
        "usage": row["usage"],
        "latency_s": row["latency_s"],
    }
    (folder / "conversation.json").write_text(
        json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
