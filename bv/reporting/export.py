"""`bv export`: judged rows in the formats other tools read.

`official`: one `model_results_run_K.json` per run (bv's run K-1), in the schema of the
official BabyVision result files, so the official `compute_score.py` prints the figures
`bv report` prints, and `bv import` reads them back. The scorer takes each file as one run,
`LLMJudgeResult` as the verdict and `Type`/`Subtype` as the groups, and reports the mean and
population standard deviation over runs; a row without a verdict (a judge error, `hard` null)
is written as false, as the official protocol judges a failed call and as `bv report` counts
it, and said on stderr. `ModelReasoning` is the final reply's reasoning as the official files
hold it: the endpoint's `reasoning_details` entries as sent (OpenRouter's, as in the official
runs), else its reasoning text as one `reasoning.text` entry. `csv`: one row per (id, run).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bv.core.atomic import atomic_output
from bv.core.errors import Fatal
from bv.core.jsonl import Problems
from bv.core.records import JudgedRow, natural_key, row_key

RESULT_NAME = "model_results_run_{k}.json"
_RESULT_FILE = re.compile(r"model_results_run_(\d+)\.json")
CSV_COLUMNS = ("id", "run", "type", "subtype", "gold", "extracted", "hard", "decided_by", "model")


@dataclass
class Export:
    """Rows grouped by run, and what was left out (judge errors), for the message on stderr."""

    rows: list[JudgedRow] = field(default_factory=list)  # every row once, in input order
    runs: dict[int, list[JudgedRow]] = field(default_factory=lambda: defaultdict(list))
    unjudged: list[tuple[str, int]] = field(default_factory=list)


def official_id(item_id: Any) -> int | str:
    """Official ids are integers; bv's are strings (`"445"` -> 445; other ids kept as text)."""
    text = str(item_id)
    return int(text) if text.isascii() and text.isdecimal() else text


def gold_answer(row: JudgedRow) -> str:
    """The official GroundTruth: the label of a choice item, the accepted answer of a blank one
    (several joined by ` | `)."""
    answer = row.get("answer") or []
    return " | ".join(str(a) for a in answer) if isinstance(answer, list) else str(answer)


def official_result(row: JudgedRow) -> dict[str, Any]:
    """One judged row as an official result record (the official files' key order)."""
    return {
        "Id": official_id(row["id"]),
        "Question": str(row.get("question") or ""),
        "ModelReasoning": model_reasoning(row),
        "ModelResult": row.get("response") or "",
        "GroundTruth": gold_answer(row),
        "ExtractedAnswer": row.get("extracted"),
        "LLMJudgeResult": row["hard"] == 1,
        "Type": row.get("type") or "unknown",
        "Subtype": row.get("subtype") or "unknown",
    }


def model_reasoning(row: JudgedRow) -> list[dict[str, Any]]:
    """The official `ModelReasoning` of a row: its final turn's reasoning_details entries (the
    shape the official files carry), else its reasoning text as one entry of that shape, else []."""
    turns = row.get("turns")
    last = turns[-1] if isinstance(turns, list) and turns and row.get("response") is not None else None
    if not isinstance(last, dict):
        return []
    details = last.get("reasoning_details")
    if isinstance(details, list) and details:
        return [entry for entry in details if isinstance(entry, dict)]
    text = last.get("reasoning")
    if isinstance(text, str) and text:
        return [{"type": "reasoning.text", "text": text, "format": "unknown", "index": 0}]
    return []


def group_runs(records: Iterable[tuple[Any, JudgedRow]], problems: Problems) -> Export:
    """(source, row) pairs by run, in natural id order; rows without a verdict set apart, and a
    second row for the same (id, run) reported as a bad line (`bv merge` says which to keep)."""
    export, seen = Export(), set()
    for source, row in records:
        key = row_key(row)
        if key in seen:
            problems.report(source, f"a second row for id {key[0]} run {key[1]} (bv merge keeps one)")
            continue
        seen.add(key)
        export.rows.append(row)
        if row.get("hard") is None:
            export.unjudged.append(key)
        export.runs[key[1]].append(row)
    for members in export.runs.values():
        members.sort(key=lambda r: natural_key(str(r["id"])))
    return export


def write_official(export: Export, out_dir: Path) -> list[tuple[Path, int]]:
    """Write model_results_run_K.json for every run into `out_dir`; refuse to leave stale run files
    of an earlier, longer export beside them (the scorer would count them as runs)."""
    names = {RESULT_NAME.format(k=run + 1) for run in export.runs}
    stale = sorted(
        p.name for p in (out_dir.iterdir() if out_dir.is_dir() else []) if _RESULT_FILE.fullmatch(p.name)
    )
    stale = [name for name in stale if name not in names]
    if stale:
        raise Fatal(
            f"{out_dir} already holds {', '.join(stale)}, which this export would not replace and"
            " compute_score.py would read as runs: export into an empty folder"
        )
    if any(run < 0 for run in export.runs):
        raise Fatal("rows with a negative run cannot be named model_results_run_K.json")
    written = []
    for run in sorted(export.runs):
        path = out_dir / RESULT_NAME.format(k=run + 1)
        results = [official_result(row) for row in export.runs[run]]
        with atomic_output(path) as stream:
            stream.write(json.dumps(results, indent=2, ensure_ascii=False))
        written.append((path, len(results)))
    return written


_FORMULA_START = ("=", "+", "@", "\t", "\r")
_NUMBER = re.compile(r"-\d*\.?\d+(?:[eE][-+]?\d+)?")


def csv_cell(value: Any) -> str:
    """A value for a spreadsheet cell: text a spreadsheet would run as a formula gets a leading
    `'` (a model's reply is not trusted); negative numbers stay numbers."""
    text = "" if value is None else str(value)
    if text.startswith(_FORMULA_START) or (text.startswith("-") and not _NUMBER.fullmatch(text)):
        return "'" + text
    return text


def write_csv(rows: Iterable[JudgedRow], stream: IO[str]) -> int:
    """One CSV row per (id, run); returns how many."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    count = 0
    for row in rows:
        values = {**row, "gold": gold_answer(row), "run": row.get("run", 0)}
        writer.writerow([csv_cell(values.get(column)) for column in CSV_COLUMNS])
        count += 1
        if buffer.tell() > 1 << 16:
            stream.write(buffer.getvalue())
            buffer.seek(0)
            buffer.truncate()
    stream.write(buffer.getvalue())
    return count
