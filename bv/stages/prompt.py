"""The prompt stage: items to chat requests, with every text taken from bv's templates
(prompts/, or the user's replacements, see bv.core.templates).

Two layouts (`style`). `bv`, the default, follows the reference implementation: a system
prompt with an optional `## Skill` section, then one user message holding the text (an
optional trace snapshot, the question, the choices or the blank instruction, an optional
training readout) and then the image. `official` follows the BabyVision paper's evaluation:
no system prompt, one user message holding the image and then the text (the question, a
`Choices:` block of `(A) text` lines, one boxed-answer instruction). Either way the image
part points at the file; the bytes are attached at send time. docs/protocol.md compares them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from bv.core.errors import BadConfig, BadRecord
from bv.core.images import file_url, resolve_image
from bv.core.jsonl import Problems, Source
from bv.core.records import (
    SCHEMA_VERSION,
    Item,
    PromptFields,
    PromptRecord,
    choice_lines,
    official_choice_lines,
    without_stage,
)
from bv.core.selection import Selection, Unmatched, select
from bv.core.settings import check, setting
from bv.core.templates import BV_TEMPLATES, STYLE_TEMPLATES, TemplateError, Templates, read_text_file

S = TypeVar("S")  # where an item came from (a file and line, or its index)

STYLES = tuple(STYLE_TEMPLATES)


MAX_SKILL_BYTES = 1024 * 1024  # a skill is Markdown a person (or an optimizer) wrote, not data


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
        """The skill in a Markdown file: a regular file of UTF-8 text of at most MAX_SKILL_BYTES;
        BadConfig for anything else (FIFO, device, folder, missing, too big, not UTF-8)."""
        try:
            return cls(name=path.stem, text=read_text_file(path, MAX_SKILL_BYTES, "a skill").strip())
        except TemplateError as exc:  # a bad value of the setting, as a bad template is (exit 2)
            raise BadConfig(f"`skill` {exc}", option="skill") from None


def system_prompt(skill: Skill | None, templates: Templates = BV_TEMPLATES) -> str:
    section = templates.render("skill", skill=skill.text) if skill and skill.text else ""
    return templates.render("system", skill=section)


def user_text(
    item: Item,
    trace: str | None = None,
    diagnostic: str | None = None,
    templates: Templates = BV_TEMPLATES,
) -> str:
    """The text of bv's user message: sections joined by blank lines."""
    parts = []
    if trace:
        parts.append(templates.render("trace", trace=trace.strip()))
    parts.append(templates.render("question", question=item["question"].strip()))
    if item["ans_type"] == "choice":
        parts.append(templates.render("choices", choices=choice_lines(item["choices"])))
    else:
        parts.append(templates.render("blank"))
    if diagnostic:
        parts.append(templates.render("readout", instruction=diagnostic.strip()))
    return "\n\n".join(parts)


def official_text(item: Item, templates: Templates = BV_TEMPLATES) -> str:
    """The text of the paper's user message: lines, no headings, no blank lines."""
    lines = [item["question"].strip()]
    if item["ans_type"] == "choice":
        lines.append(templates.render("official_choices", choices=official_choice_lines(item["choices"])))
    lines.append(templates.render("official_answer"))
    return "\n".join(line for line in lines if line)


def refine_text(previous_reply: str, templates: Templates = BV_TEMPLATES) -> str:
    """The follow-up turn sent when a reply has no \\boxed{} answer."""
    lines = [line.strip() for line in previous_reply.strip().splitlines() if line.strip()]
    previous = lines[-1] if lines else "(empty reply)"
    if len(previous) > 300:
        previous = "…" + previous[-300:]
    return templates.render("refine", previous=previous)


def image_part(url: str, detail: str) -> dict[str, Any]:
    image_url: dict[str, Any] = {"url": url}
    if detail != "auto":
        image_url["detail"] = detail
    return {"type": "image_url", "image_url": image_url}


@dataclass(frozen=True)
class PromptOptions:
    """How items become prompts: the layout (`style`), the templates, the skill, the image part's
    detail; bv prompt's further sections (`diagnostic`, `traces`) and where images are found."""

    style: str = setting(
        "bv",
        "--style",
        choices=STYLES,
        show_default=True,
        help="bv: system prompt (with the skill), text then image. official: the paper's layout,"
        " no system prompt, image then text (docs/protocol.md).",
    )
    templates: Templates = BV_TEMPLATES
    skill: Skill | None = None
    image_detail: str = setting(
        "auto",
        "--image-detail",
        choices=("auto", "low", "high"),
        show_default=True,
        help="The image part's 'detail' (omitted for auto).",
    )
    diagnostic: str | None = None
    traces: dict[str, str] | None = None  # item id -> snapshot text
    image_root: Path | None = None  # for items read from stdin
    allow_any_path: bool = False

    def __post_init__(self) -> None:
        check(self)
        if self.style == "official" and (self.skill or self.diagnostic or self.traces is not None):
            raise BadConfig(
                "`style` official has no system prompt and no sections, so it takes no `skill`,"
                " `diagnostic_instruction` or `trace_context`; use `style` bv for skill work"
                " (docs/protocol.md)",
                option="style",
            )


def build_prompt(item: Item, folder: Path | None, options: PromptOptions) -> PromptRecord:
    """One prompt record: the item as given plus the chat messages, whose image parts name the
    resolved files by `file://` URL (the item's `images` stay as written in the items file)."""
    root = folder or options.image_root or Path.cwd()
    paths = [resolve_image(p, root, options.allow_any_path) for p in item["images"]]
    images = [image_part(file_url(p), options.image_detail) for p in paths]
    templates = options.templates
    if options.style == "official":
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": [*images, {"type": "text", "text": official_text(item, templates)}]}
        ]
    else:
        trace = (options.traces or {}).get(item["id"])
        text = user_text(item, trace=trace, diagnostic=options.diagnostic, templates=templates)
        messages = [
            {"role": "system", "content": system_prompt(options.skill, templates)},
            {"role": "user", "content": [{"type": "text", "text": text}, *images]},
        ]
    skill = options.skill
    fields: PromptFields = {
        "schema": SCHEMA_VERSION,
        "messages": messages,
        "skill": {"name": skill.name, "sha256": skill.sha256} if skill and skill.text else None,
    }
    # Written only when they differ from the default, so a default run's records stay as they were.
    if options.style != "bv":
        fields["style"] = options.style
    recorded = templates.recorded(*STYLE_TEMPLATES[options.style])
    if recorded:
        fields["templates"] = recorded
    return cast(PromptRecord, {**without_stage(item, "prompt"), **fields})


def prompt_records(
    items: Iterable[tuple[S, Item]],
    folder: Callable[[S], Path | None],
    options: PromptOptions,
    bad: Callable[[S, BadRecord], None],
) -> Iterator[PromptRecord]:
    """The stage, lazily: one prompt record per item, its images resolved in `folder(source)`
    (None: the options' image root). An item that cannot be used goes to `bad` with its source
    (the command line reports it and goes on; bv.api raises)."""
    for source, item in items:
        try:
            record = build_prompt(item, folder(source), options)
        except BadRecord as exc:
            bad(source, exc)
            continue
        yield record


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


def run_prompt(
    entries: Iterable[tuple[Source, Item]],
    options: PromptOptions,
    selection: Selection,
    write: Callable[[Mapping[str, Any]], None],
    problems: Problems,
    words: Callable[[str], str] = str,
) -> list[str]:
    """The whole stage over read items: the prompt record of every item the selection keeps, to
    `write`; a bad item costs its own line (to `problems`, its message through `words`: the
    command line names its options there). Returns what the selection asked for and the input
    did not have (for instance `--type: no item matches 'visual trackng' (did you mean ...)`)."""
    unmatched = Unmatched()

    def bad(source: Source, exc: BadRecord) -> None:
        why = str(exc)
        if source.folder is None and options.image_root is None and "file not found" in why:
            why += "; items read from stdin look for images in the current folder: give `image_root` DIR"
        problems.report(source, words(why))

    kept = select(entries, selection, unmatched, key=lambda pair: pair[1])
    for record in prompt_records(kept, lambda source: source.folder, options, bad):
        write(record)
    return unmatched.messages()
