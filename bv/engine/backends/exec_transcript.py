"""What an agent's JSON transcript on stdout says: its final answer, the model it ran, its token
usage, and whether it opened the image.

Two transcripts are read: Claude Code's `--output-format stream-json --verbose` (or `json`:
the result alone) and Codex's `exec --json`. A transcript is recognised by its first line being
a JSON object with a `type`; any other stdout is a plain reply. Whether the image was opened is
known only where the transcript lists the agent's tool calls (Claude Code's stream-json: a
`Read` of the attachment); elsewhere it stays unknown (None), never guessed. Every line is
someone else's text: lines over MAX_LINE_BYTES (an image read back into the transcript) are
skipped, the fields taken are bounded, and nothing else of the transcript is kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import IO, Any

MAX_LINE_BYTES = 1 << 20
MAX_LINES = 100_000
MAX_MODEL_CHARS = 200
READ_TOOLS = frozenset({"Read", "read_file", "view_image"})  # tools that show the model a file


@dataclass
class Transcript:
    reply: str | None = None
    model: str | None = None
    image_opened: bool | None = None
    usage: dict[str, int] = field(default_factory=dict)


def _event(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("type"), str) else None


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _opens(block: Any, attachments: tuple[str, ...]) -> bool:
    """Whether a tool call reads one of the attachments (by its name, as relative or absolute path)."""
    if not isinstance(block, dict) or block.get("type") != "tool_use" or block.get("name") not in READ_TOOLS:
        return False
    given = block.get("input")
    target = given.get("file_path") or given.get("path") if isinstance(given, dict) else None
    return isinstance(target, str) and any(target.endswith(name) for name in attachments)


def read_transcript(out: IO[bytes], attachments: tuple[str, ...], limit: int) -> Transcript | None:
    """The transcript on `out` (rewound), or None when stdout is not one. `attachments`: the
    images' paths relative to the workspace (`attachments/image-1.png`); `limit`: a reply's most."""
    out.seek(0)
    seen = Transcript()
    found = turns_listed = False
    for number, line in enumerate(out):
        if number >= MAX_LINES:
            break
        if len(line) > MAX_LINE_BYTES or not line.strip():
            continue
        event = _event(line)
        if event is None:
            if not found:
                return None  # a plain reply: the caller reads stdout as it is
            continue
        found = True
        kind = event["type"]
        if kind == "system" and event.get("subtype") == "init" and isinstance(event.get("model"), str):
            seen.model = event["model"][:MAX_MODEL_CHARS]
        elif kind == "assistant" and isinstance(event.get("message"), dict):
            content = event["message"].get("content")
            blocks = content if isinstance(content, list) else []
            turns_listed = True  # stream-json lists every tool call the agent made
            seen.image_opened = bool(seen.image_opened) or any(_opens(b, attachments) for b in blocks)
        elif kind == "result":
            if isinstance(event.get("result"), str):
                seen.reply = event["result"][-limit:]
            if isinstance(event.get("usage"), dict):
                usage: dict[str, Any] = event["usage"]
                prompt = _count(usage.get("input_tokens")) + _count(usage.get("cache_read_input_tokens"))
                prompt += _count(usage.get("cache_creation_input_tokens"))
                seen.usage = {
                    "prompt_tokens": prompt,
                    "completion_tokens": _count(usage.get("output_tokens")),
                }
        elif kind == "item.completed" and isinstance(event.get("item"), dict):
            item = event["item"]
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                seen.reply = item["text"][-limit:]  # Codex: the last message is the answer
        elif kind == "turn.completed" and isinstance(event.get("usage"), dict):
            usage = event["usage"]
            seen.usage = {
                "prompt_tokens": _count(usage.get("input_tokens")),
                "completion_tokens": _count(usage.get("output_tokens")),
            }
    if not found:
        return None
    if not attachments or not turns_listed:
        seen.image_opened = None  # no image, or a transcript without the agent's turns: unknown
    return seen
