"""A run folder's summary.json: the few figures a table of runs reads (bv report DIR), written by
`bv eval` as the run goes (at each stage, `finished` false) and once more at its end.

It says who and what (label, model, judge, skill name and SHA-256, items SHA-256, bv's version)
and the report's overall figures (accuracy with its 95% interval and how it is computed, items,
runs, errors, cost). Written atomically, so a reader sees the last whole version; read bounded,
as data: a file that is missing, too big or not an object reads as no summary.
"""

# No `from __future__ import annotations` here: under Python 3.11 it hides NotRequired from the
# TypedDicts at run time (every key would be listed in __required_keys__).

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict, cast

from bv.core.errors import BadRecord
from bv.core.json_values import read_json_file

SUMMARY = "summary.json"
MAX_SUMMARY_BYTES = 256 * 1024  # a summary is under a kB


class SkillRef(TypedDict):
    name: str
    sha256: str


class RunSummary(TypedDict):
    """summary.json (docs/formats.md)."""

    bv_version: str
    label: str
    model: str | None
    judge: list[str]  # the LLM judge's models; [] when the rules alone judge
    skill: SkillRef | None  # None: no skill
    items_sha256: str
    finished: bool  # the run wrote its results and report
    stage: str  # where it is: prompt, rollout, judge, report, finished, stopped
    updated_at: str  # UTC, ISO 8601
    items: int | None  # distinct items (the prompts, while it runs)
    runs: int | None  # runs per item (`repeats`)
    rows: int | None  # judged rows
    accuracy: float | None  # Avg@k over all rows
    ci95: list[float] | None  # its 95% interval over items
    interval: str | None  # how ci95 is computed
    errors: int | None  # rollout errors
    judge_errors: int | None
    cost_usd: float | None  # with prices: the replies' cost (so far, while it runs)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_summary(folder: Path, summary: RunSummary) -> None:
    from bv.core.atomic import atomic_output  # a table of runs reads summaries: it starts without it

    with atomic_output(folder / SUMMARY) as stream:
        json.dump(summary, stream, indent=2, ensure_ascii=False)
        stream.write("\n")


def read_summary(folder: Path) -> RunSummary | None:
    """The folder's summary.json, or None when it has none that reads as one."""
    try:
        data = read_json_file(folder / SUMMARY, MAX_SUMMARY_BYTES)
    except (OSError, BadRecord):
        return None
    if not isinstance(data, dict) or not all(key in data for key in RunSummary.__required_keys__):
        return None
    return cast(RunSummary, data)


def newer(first: Path, than: Path) -> bool:
    """Whether `first` was written at or after `than` (a summary against the results it sums up)."""
    try:
        return os.stat(first).st_mtime_ns >= os.stat(than).st_mtime_ns
    except OSError:
        return False


def text_of(value: Any) -> str | None:
    """A string from a record that is data: only a non-empty string is taken."""
    return value if isinstance(value, str) and value else None
