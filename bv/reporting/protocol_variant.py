"""A protocol variant: what makes two sets of judged rows different measurements, for the exports
that hold one score per protocol (`bv export --format eee`, `--format hf-eval-results`).

Rows belong to one variant when they agree on every field a run fixes for all its rows and that
changes what is measured: the model, the prompt style, the skill (by its SHA-256), the replaced
templates of each stage, the generation settings (`params`) and the judge's version. Not in it:
the judge model (with `--mode auto` the rules decide most rows and the LLM judge the rest, so the
rows of one run differ in it), and the number of repeats (more runs of one protocol estimate the
same accuracy more closely; the interval over items says how closely).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from bv.core.records import JudgedRow, row_key
from bv.reporting.report_types import Summary
from bv.reporting.tally import Tally

_KEYS: tuple[str, ...] = ("model", "style", "skill", "templates", "rollout_templates", "params")
_KEYS += ("judge_version", "judge_templates")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
SLUG_CHARS = 40  # the readable part of a file name, at most


@dataclass(frozen=True)
class Variant:
    """One protocol variant: its fields as canonical JSON (`key`) and their readable parts."""

    key: str
    model: str
    style: str
    skill: str | None  # the skill's name, or None
    skill_sha256: str | None

    @property
    def digest(self) -> str:
        """12 hex digits of the key's SHA-256: two variants never share a file name."""
        return hashlib.sha256(self.key.encode("utf-8")).hexdigest()[:12]

    def slug(self) -> str:
        """A portable file-name part: model, style and skill, unsafe characters as `-`, then the
        digest (the readable part may collide; the digest does not)."""
        parts = [self.model, self.style] + ([self.skill] if self.skill else [])
        text = _UNSAFE.sub("-", "_".join(parts)).strip("-.")[:SLUG_CHARS]
        return f"{text}_{self.digest}" if text else self.digest

    def fields(self) -> dict[str, Any]:
        """The variant's fields, as read from its rows."""
        return dict(json.loads(self.key))


def variant_of(row: JudgedRow) -> Variant:
    """The protocol variant a row was measured under."""
    get = row.get
    values: dict[str, Any] = {name: get(name) for name in _KEYS}
    model, style = str(values["model"] or "unknown"), str(values["style"] or "bv")
    values["model"], values["style"] = model, style
    skill = values["skill"] if isinstance(values["skill"], dict) else None
    values["skill"] = {"name": skill.get("name"), "sha256": skill.get("sha256")} if skill else None
    key = json.dumps(values, sort_keys=True, ensure_ascii=False, default=str)
    return Variant(
        key=key,
        model=model,
        style=style,
        skill=str(skill["name"]) if skill and skill.get("name") is not None else None,
        skill_sha256=str(skill["sha256"]) if skill and skill.get("sha256") is not None else None,
    )


@dataclass
class Measured:
    """One variant's rows as counted for bv report (`tally`), and the first `started_at`."""

    variant: Variant
    tally: Tally = field(default_factory=Tally)

    def add(self, row: JudgedRow) -> None:
        item, run = row_key(row)
        self.tally.add(row, item, run)


def by_variant(rows: Iterable[JudgedRow]) -> Iterator[tuple[Measured, JudgedRow]]:
    """Each row with the tally of its variant (counted as it passes), one at a time; the
    caller keeps the `Measured` it sees."""
    measured: dict[str, Measured] = {}
    for row in rows:
        variant = variant_of(row)
        held = measured.get(variant.key)
        if held is None:
            held = measured[variant.key] = Measured(variant)
        held.add(row)
        yield held, row


def variant_notes(variant: Variant, summary: Summary) -> dict[str, str]:
    """What the exports say of a variant beside its score, as text: its fields, the runs and
    the judge models seen (not part of the variant: see the module's docstring)."""
    fields = variant.fields()
    notes = {"model": variant.model, "style": variant.style}
    if variant.skill is not None:
        notes["skill"] = variant.skill
    if variant.skill_sha256 is not None:
        notes["skill_sha256"] = variant.skill_sha256
    for name in ("templates", "rollout_templates", "judge_templates", "params"):
        if fields.get(name) is not None:
            notes[name] = json.dumps(fields[name], sort_keys=True, ensure_ascii=False)
    if fields.get("judge_version") is not None:
        notes["judge_version"] = str(fields["judge_version"])
    judges = summary["provenance"]["judge_models"]
    notes["judge_models"] = ", ".join(judges) if judges else "none (the rules decided)"
    notes["runs"] = str(summary["overall"]["runs"])
    return notes
