"""Per-item artifacts of a rollout (`--artifacts DIR`): what was sent and what came back,
as files a person can open: DIR/<run>/<id>/system.md, user.md and conversation.json."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(item_id: str) -> str:
    """A file name for an id: no `/`, no `..`, nothing hidden; ids changed to fit get a short hash
    so two ids never share a folder."""
    name = _UNSAFE.sub("_", item_id).strip("._") or "_"
    if name != item_id:
        name = f"{name[:80]}-{hashlib.sha256(item_id.encode()).hexdigest()[:8]}"
    return name


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        if part.get("type") == "text":
            parts.append(part["text"])
        elif part.get("type") == "image_url":
            parts.append(f"[image: {part['image_url']['url']}]")
    return "\n\n".join(parts)


def write_artifacts(root: Path, row: dict[str, Any]) -> Path:
    """Write one rolled-out row's artifacts; returns their folder."""
    folder = root / str(row["run"]) / safe_name(str(row["id"]))
    folder.mkdir(parents=True, exist_ok=True)
    messages = row["messages"]
    system = next((m for m in messages if m.get("role") == "system"), {"content": ""})
    user = next((m for m in messages if m.get("role") == "user"), {"content": ""})
    (folder / "system.md").write_text(_text(system["content"]) + "\n", encoding="utf-8")
    (folder / "user.md").write_text(_text(user["content"]) + "\n", encoding="utf-8")
    conversation = {
        "id": row["id"],
        "run": row["run"],
        "backend": row["backend"],
        "model": row["model"],
        "params": row["params"],
        "messages": messages,
        "turns": row["turns"],
        "response": row["response"],
        "error": row["error"],
        "usage": row["usage"],
        "latency_s": row["latency_s"],
    }
    (folder / "conversation.json").write_text(
        json.dumps(conversation, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return folder
