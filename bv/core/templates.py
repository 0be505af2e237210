"""bv's prompt templates (prompts/*.md) and the user's replacements for them (`--prompts DIR`).

A file DIR/NAME.md replaces bv's template NAME.md for every stage given `--prompts DIR`. A
replacement may use only the placeholders of the template it replaces: an unknown file name
or an unknown `{{placeholder}}` is an error, because a typo that silently fell back to bv's
text would make an experiment measure nothing. Rows record each replaced template by name
and SHA-256 (of the file's bytes, as `sha256sum` prints it), as they record the skill.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

from bv.core.errors import BVError

MAX_TEMPLATE_BYTES = 256 * 1024  # a prompt template is text a person wrote, not data

_SLOT = re.compile(r"\{\{(\w+)\}\}")
_LOOKS_LIKE_SLOT = re.compile(r"\{\{([^{}]{0,200})\}\}")  # bounded: linear in the file's size


# The templates each prompt style renders, and the templates each stage renders.
STYLE_TEMPLATES = {
    "bv": ("system", "skill", "trace", "question", "choices", "blank", "readout"),
    "official": ("official_choices", "official_answer"),
}
STAGE_TEMPLATES = {
    "prompt": STYLE_TEMPLATES["bv"] + STYLE_TEMPLATES["official"],
    "rollout": ("refine",),  # the refinement turn
    "judge": ("judge",),  # the LLM judge
    "optimize": ("reflect",),  # the optimizer's reflection on a minibatch (bv optimize)
}


class TemplateError(BVError, ValueError):
    """A `--prompts` folder bv cannot use: said to the user, who fixes the folder."""


@cache
def names() -> tuple[str, ...]:
    """The names of bv's templates: the .md files packaged from prompts/, without the suffix."""
    files = resources.files("bv.prompts").iterdir()
    return tuple(sorted(f.name[:-3] for f in files if f.name.endswith(".md")))


@cache
def packaged(name: str) -> str:
    """The text of prompts/<name>.md, as packaged with bv."""
    return resources.files("bv.prompts").joinpath(f"{name}.md").read_text(encoding="utf-8")


def placeholders(text: str) -> list[str]:
    """The `{{name}}` placeholders of a template, in order of first use."""
    return list(dict.fromkeys(_SLOT.findall(text)))


def _shown(value: object) -> str:
    """A path or a piece of a file as it may be printed on a terminal: quoted when not plain."""
    text = str(value)
    return text if text.isprintable() else repr(text)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _check(path: Path, name: str, text: str) -> list[tuple[str, str]]:
    """Raise TemplateError for a placeholder the template `name` does not have; return warnings
    for the placeholders it has that the replacement leaves out."""
    allowed = placeholders(packaged(name))
    for match in _LOOKS_LIKE_SLOT.finditer(text):
        if match.group(1) not in allowed:
            may = ", ".join(f"{{{{{p}}}}}" for p in allowed) or "no placeholders"
            found = _shown(match.group(0)[:80])
            raise TemplateError(
                f"{_shown(path)}: unknown placeholder {found} in {name}.md (it may use {may})"
            )
    outside = _SLOT.sub("", text)
    if "{{" in outside:
        found = _shown(outside[outside.index("{{") :][:40])
        raise TemplateError(f"{_shown(path)}: a `{{{{` that opens no placeholder in {name}.md: {found}")
    used = placeholders(text)
    left_out = [p for p in allowed if p not in used]
    return [(name, f"{_shown(path)} leaves out {{{{{p}}}}}: that value is not sent") for p in left_out]


@dataclass(frozen=True)
class Templates:
    """bv's templates with the user's replacements: what every stage renders its prompts from."""

    overrides: dict[str, str] = field(default_factory=dict)  # template name -> replacement text
    folder: Path | None = None
    warnings: tuple[tuple[str, str], ...] = ()  # (template name, what is odd about its replacement)

    @classmethod
    def load(cls, folder: Path | None) -> Templates:
        """The templates with DIR's replacements; TemplateError for anything DIR holds that is
        not a usable replacement (files whose names start with `.` are ignored)."""
        if folder is None:
            return cls()
        try:
            entries = sorted(folder.iterdir())
        except OSError as exc:
            raise TemplateError(f"{_shown(folder)}: {exc.strerror or exc}") from None
        overrides: dict[str, str] = {}
        warnings: list[tuple[str, str]] = []
        known = names()
        for path in entries:
            if path.name.startswith("."):
                continue
            name = path.name[:-3] if path.name.endswith(".md") else None
            if name not in known or path.is_dir():
                raise TemplateError(
                    f"{_shown(path)}: not one of bv's templates ({', '.join(n + '.md' for n in known)});"
                    " `bv templates` lists them"
                )
            overrides[name] = _read(path)
            warnings += _check(path, name, overrides[name])
        return cls(overrides=overrides, folder=folder, warnings=tuple(warnings))

    def warnings_for(self, stage: str) -> list[str]:
        """The warnings about replacements of the templates `stage` renders (all, for another name)."""
        rendered = STAGE_TEMPLATES.get(stage, names())
        return [message for name, message in self.warnings if name in rendered]

    def text(self, name: str) -> str:
        return self.overrides[name] if name in self.overrides else packaged(name)

    def sha256(self, name: str) -> str:
        return sha256(self.text(name))

    def recorded(self, *used: str) -> dict[str, str]:
        """The replaced templates among `used`, by name with their SHA-256: what a row records."""
        return {name: sha256(self.overrides[name]) for name in used if name in self.overrides}

    def render(self, name: str, **values: str) -> str:
        """Fill the `{{key}}` slots of a template in one pass, so a value is never searched for
        slots (a question may contain `{{gold}}`). Blank lines left by empty slots fold into one;
        the values themselves are left as they are."""
        text = _SLOT.sub(lambda m: m.group(0) if values[m.group(1)] else "", self.text(name))
        text = re.sub(r"\n{3,}", "\n\n", text).strip()
        return _SLOT.sub(lambda m: values[m.group(1)], text)


def _read(path: Path) -> str:
    return read_text_file(path, MAX_TEMPLATE_BYTES, "a template")


def read_text_file(path: Path, limit: int, what: str) -> str:
    """A text file a person wrote (a template, a skill): a regular file of at most `limit` bytes
    of UTF-8, checked on the open file (opened without blocking: a FIFO or /dev/zero is refused
    at once, never waited on or read until memory runs out); TemplateError saying what is wrong."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise TemplateError(f"{_shown(path)}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise TemplateError(f"{_shown(path)}: not a regular file (a FIFO or a device cannot be {what})")
        if info.st_size > limit:
            raise TemplateError(
                f"{_shown(path)}: {info.st_size} bytes, over {limit // 1024} KiB; is it {what}?"
            )
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise TemplateError(f"{_shown(path)}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise TemplateError(f"{_shown(path)}: over {limit // 1024} KiB; is it {what}?")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise TemplateError(f"{_shown(path)}: not UTF-8 text") from None


def fenced(text: str) -> str:
    """Text as a Markdown code block it cannot close or leave: fenced by more backticks than its
    longest run of them (at least three), so data pasted into a prompt (a model's answer) cannot
    open a section of its own. One pass over the text."""
    longest = max(map(len, _BACKTICKS.findall(text)), default=0)
    mark = "`" * max(3, longest + 1)
    return f"{mark}\n{text}\n{mark}"


_BACKTICKS = re.compile(r"`+")
BV_TEMPLATES = Templates()


def describe(templates: Templates) -> list[str]:
    """One tab-separated line per template: name, SHA-256, where it comes from, its placeholders."""
    lines = []
    for name in names():
        folder = templates.folder
        source = _shown(folder / f"{name}.md") if folder is not None and name in templates.overrides else "bv"
        slots = " ".join(f"{{{{{p}}}}}" for p in placeholders(packaged(name))) or "-"
        lines.append(f"{name}.md\t{templates.sha256(name)}\t{source}\t{slots}")
    return lines


def copy_templates(templates: Templates, folder: Path, chosen: tuple[str, ...] = ()) -> int:
    """Write templates (all, or the `chosen` names) into `folder`, never over an existing file;
    TemplateError for an unknown name or a file that is already there."""
    unknown = [n for n in chosen if n.removesuffix(".md") not in names()]
    if unknown:
        raise TemplateError(f"not one of bv's templates: {', '.join(map(_shown, unknown))}")
    wanted = [n.removesuffix(".md") for n in chosen] or list(names())
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name in wanted:
            with (folder / f"{name}.md").open("x", encoding="utf-8") as f:
                f.write(templates.text(name))
    except FileExistsError as exc:
        raise TemplateError(f"{_shown(exc.filename)} exists; remove it or copy to another folder") from None
    except OSError as exc:
        raise TemplateError(f"{_shown(folder)}: {exc.strerror or exc}") from None
    return len(wanted)
