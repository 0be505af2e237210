"""The prompt stage: items to chat requests, with every text taken from prompts/.

The message layout follows the reference implementation: a system prompt with an optional
`## Skill` section, then one user message holding the text (an optional trace snapshot,
the question, the choices or the blank instruction, an optional training readout) and the
image as an `image_url` part that points at the file; the bytes are attached at send time.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from bv.errors import BadRecord
from bv.images import file_url, resolve_image
from bv.records import SCHEMA_VERSION, choice_lines, without_stage


@cache
def template(name: str) -> str:
    """The text of prompts/<name>.md, as packaged with bv."""
    return resources.files("bv.prompts").joinpath(f"{name}.md").read_text(encoding="utf-8")


_SLOT = re.compile(r"\{\{(\w+)\}\}")


def render(name: str, **values: str) -> str:
    """Fill the `{{key}}` slots of a template in one pass, so a value is never searched for slots
    (a question may contain `{{gold}}`). Blank lines left by empty slots fold into one; the
    values themselves are left as they are."""
    text = _SLOT.sub(lambda m: m.group(0) if values[m.group(1)] else "", template(name))
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    return _SLOT.sub(lambda m: values[m.group(1)], text)


@dataclass(frozen=True)
class Skill:
    """A skill: Markdown text for the system prompt, named so runs can say which one they used."""

    name: str
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @classmethod
    def load(cls, path: Path) -> Skill:
        try:
            return cls(name=path.stem, text=path.read_text(encoding="utf-8").strip())
        except UnicodeDecodeError:
            raise BadRecord(f"--skill {path}: not UTF-8 text") from None


def system_prompt(skill: Skill | None) -> str:
    section = render("skill", skill=skill.text) if skill and skill.text else ""
    return render("system", skill=section)


def user_text(item: dict[str, Any], trace: str | None = None, diagnostic: str | None = None) -> str:
    parts = []
    if trace:
        parts.append(render("trace", trace=trace.strip()))
    parts.append(render("question", question=item["question"].strip()))
    if item["ans_type"] == "choice":
        parts.append(render("choices", choices=choice_lines(item["choices"])))
    else:
        parts.append(render("blank"))
    if diagnostic:
        parts.append(render("readout", instruction=diagnostic.strip()))
    return "\n\n".join(parts)


def refine_text(previous_reply: str) -> str:
    """The follow-up turn sent when a reply has no \\boxed{} answer."""
    lines = [line.strip() for line in previous_reply.strip().splitlines() if line.strip()]
    previous = lines[-1] if lines else "(empty reply)"
    if len(previous) > 300:
        previous = "…" + previous[-300:]
    return render("refine", previous=previous)


def image_part(url: str, detail: str) -> dict[str, Any]:
    image_url: dict[str, Any] = {"url": url}
    if detail != "auto":
        image_url["detail"] = detail
    return {"type": "image_url", "image_url": image_url}


@dataclass(frozen=True)
class PromptOptions:
    skill: Skill | None = None
    detail: str = "auto"
    diagnostic: str | None = None
    traces: dict[str, str] | None = None  # item id -> snapshot text
    image_root: Path | None = None  # for items read from stdin
    allow_any_path: bool = False


def build_prompt(item: dict[str, Any], folder: Path | None, options: PromptOptions) -> dict[str, Any]:
    """One prompt record: the item as given plus the chat messages, whose image parts name the
    resolved files by `file://` URL (the item's `images` stay as written in the items file)."""
    root = folder or options.image_root or Path.cwd()
    paths = [resolve_image(p, root, options.allow_any_path) for p in item["images"]]
    trace = (options.traces or {}).get(item["id"])
    content: list[dict[str, Any]] = [
        {"type": "text", "text": user_text(item, trace=trace, diagnostic=options.diagnostic)}
    ]
    content += [image_part(file_url(p), options.detail) for p in paths]
    record = without_stage(item, "prompt")
    record["schema"] = SCHEMA_VERSION
    record["messages"] = [
        {"role": "system", "content": system_prompt(options.skill)},
        {"role": "user", "content": content},
    ]
    skill = options.skill
    record["skill"] = {"name": skill.name, "sha256": skill.sha256} if skill and skill.text else None
    return record


def load_traces(path: Path) -> dict[str, str]:
    """Trace snapshots by item id, from a JSONL file of {"id": ..., "text": ...}."""
    import json

    traces = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            traces[str(obj["id"])] = str(obj["text"])
        except (ValueError, KeyError, TypeError):
            raise BadRecord(f'{path}:{number}: expected {{"id": ..., "text": ...}}') from None
    return traces
