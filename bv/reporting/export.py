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
import functools
import io
import json
import os
import re
import shutil
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from bv.core.atomic import staging_folder, swap_in
from bv.core.errors import Fatal
from bv.core.jsonl import Problems
from bv.core.records import JudgedRow, row_key
from bv.reporting.key_table import KeyTable
from bv.reporting.sorted_spool import SortedSpool, natural_bytes

RESULT_NAME = "model_results_run_{k}.json"
_RESULT_FILE = re.compile(r"model_results_run_(\d+)\.json")
_RUN = struct.Struct(">Q")  # a run, first in its results' sort key (runs are >= 0 here)
CSV_COLUMNS = ("id", "run", "type", "subtype", "gold", "extracted", "hard", "decided_by", "model")


VARIANT_FORMATS = ("eee", "hf-eval-results")  # one score per protocol variant (bv.reporting.protocol_variant)
SHOWN = 10  # rows named in a message about rows without a verdict, or undecided ones


@dataclass
class Export:
    """What an export saw, for the messages on stderr: how many rows without a verdict (judge
    errors) and undecided (counted wrong: no judge decided), and the first `SHOWN` of each."""

    unjudged: list[tuple[str, int]] = field(default_factory=list)
    undecided: list[tuple[str, int]] = field(default_factory=list)
    unjudged_count: int = 0
    undecided_count: int = 0
    rows: int = 0


def official_id(item_id: Any) -> int | str:
    """Official ids are integers, bv's strings: an id is written as an integer only when that
    integer reads back as the very same id (`"445"` -> 445); every other id stays a string
    (`"0445"`, a 23-digit id, one of 5,000 digits, `"1.0"`), so no two ids meet and every id
    reads back (bv's readers refuse integers beyond ±2^63)."""
    text = str(item_id)
    if text.isascii() and text.isdecimal() and len(text) <= 18 and (text == "0" or text[0] != "0"):
        return int(text)
    return text


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


def exported_rows(
    records: Iterable[tuple[Any, JudgedRow]], problems: Problems, export: Export, fmt: str = "official"
) -> Iterator[JudgedRow]:
    """The rows, once per (id, run), in input order and one at a time (an export holds no row
    in memory); rows without a verdict noted in `export`, and a second row for the same
    (id, run) reported as a bad line (`bv merge` says which to keep). The formats that write one
    score per protocol variant take the same (id, run) once per variant."""
    seen = KeyTable()  # the duplicate check: a byte per (id, run), not per row
    scoped = fmt in VARIANT_FORMATS
    if scoped:
        from bv.reporting.protocol_variant import variant_of
    for source, row in records:
        item, run = row_key(row)
        key = f"{variant_of(row).digest}\x00{item}" if scoped else item
        if not seen.add(key, run):  # presence only: the verdict is not needed here
            problems.report(source, f"a second row for id {item} run {run} (bv merge keeps one)")
            continue
        export.rows += 1
        if row.get("hard") is None:
            export.unjudged_count += 1
            if len(export.unjudged) < SHOWN:
                export.unjudged.append((item, run))
        elif row.get("undecided"):
            export.undecided_count += 1
            if len(export.undecided) < SHOWN:
                export.undecided.append((item, run))
        yield row


def write_official(rows: Iterable[JudgedRow], out_dir: Path) -> list[tuple[Path, int]]:
    """Write model_results_run_K.json for every run as one new folder that takes `out_dir`'s
    place once every file is complete (bv.core.atomic.swap_in): an interrupted export leaves the
    old files or the new ones, never a new run 1 beside old runs 2 and 3. Results are spooled to
    disk as they come (a SortedSpool under TMPDIR) and each file is written in natural id order
    from there, so memory holds neither the rows nor their places."""
    _check_replaceable(out_dir)
    staged = staging_folder(out_dir)
    try:
        counts = _write_runs(rows, staged)
        _check_no_stale_runs(out_dir, {RESULT_NAME.format(k=run + 1) for run in counts})
        swap_in(staged, out_dir)
    except OSError as exc:
        raise Fatal(f"cannot write {out_dir}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return [(out_dir / RESULT_NAME.format(k=run + 1), counts[run]) for run in sorted(counts)]


def write_folder(fmt: str, rows: Iterable[JudgedRow], out_dir: Path) -> list[tuple[Path, int]]:
    """The folder formats: each file written and its rows (eee and hf-eval-results in their modules)."""
    if fmt == "eee":
        from bv.reporting.eee import write_eee as write
    elif fmt == "hf-eval-results":
        from bv.reporting.hf_eval_results import write_hf_eval_results as write
    else:
        write = write_official
    return write(rows, out_dir)


def _check_replaceable(out_dir: Path) -> None:
    """`out_dir` may be replaced as a whole: missing, or a folder of run files only."""
    if out_dir.exists() and not out_dir.is_dir():
        raise Fatal(f"{out_dir} exists and is not a folder")
    others = (
        sorted(p.name for p in out_dir.iterdir() if not _RESULT_FILE.fullmatch(p.name))
        if out_dir.is_dir()
        else []
    )
    if others:
        raise Fatal(
            f"{out_dir} holds {', '.join(others[:5])}{' …' if len(others) > 5 else ''}, not only"
            " model_results_run_K.json files; the export replaces the whole folder: export into an"
            " empty folder"
        )


def _check_no_stale_runs(out_dir: Path, names: set[str]) -> None:
    """Refuse to drop run files of an earlier, longer export (another model's, perhaps): the
    folder would lose them, and compute_score.py reads what a folder holds as runs."""
    stale = sorted(p.name for p in out_dir.iterdir() if p.name not in names) if out_dir.is_dir() else []
    if stale:
        raise Fatal(
            f"{out_dir} already holds {', '.join(stale)}, which this export would not replace and"
            " compute_score.py would read as runs: export into an empty folder"
        )


def _write_runs(rows: Iterable[JudgedRow], folder: Path) -> dict[int, int]:
    """Each run's results written as its file in `folder`, in natural id order, by way of a
    SortedSpool (each result on disk until its file is written); counts by run."""
    counts: dict[int, int] = {}
    spool = SortedSpool()
    out: IO[bytes] | None = None
    try:
        for row in rows:
            run = row.get("run", 0)
            if run < 0:
                raise Fatal("rows with a negative run cannot be named model_results_run_K.json")
            spool.add(_RUN.pack(run) + _id_key(str(row["id"])), _indented(official_result(row)))
            counts[run] = counts.get(run, 0) + 1
        current = -1
        for key, data in spool.sorted():
            run = _RUN.unpack_from(key)[0]
            if out is None or run != current:
                if out is not None:
                    _finish(out)
                out = open(folder / RESULT_NAME.format(k=run + 1), "xb", buffering=1 << 16)
                out.write(b"[\n")
                current = run
            else:
                out.write(b",\n")
            out.write(data)
        if out is not None:
            _finish(out)
            out = None
    finally:
        if out is not None:
            out.close()
        spool.close()
    return counts


_id_key = functools.lru_cache(maxsize=1 << 12)(natural_bytes)  # ids repeat, once per run


def _finish(out: IO[bytes]) -> None:
    """Close a run's file, synced."""
    with out:
        out.write(b"\n]")
        out.flush()
        os.fsync(out.fileno())


def _indented(result: dict[str, Any]) -> bytes:
    """One result as `json.dumps(results, indent=2, ensure_ascii=False)` writes an element of the
    array, in UTF-8: by orjson (json's indenting encoder is pure Python, 10x slower), which writes
    the same bytes but for floats (`1e-7`, not json's `1e-07`), so a result holding one, in its
    reasoning entries, and whatever orjson refuses, go json's way. Each line is indented after
    each newline, which outside a string is all the JSON holds (textwrap.indent also broke the
    lines at U+2028, U+2029 and U+0085 inside a text, adding two spaces to the model's reply)."""
    data = None
    if not _holds_float(result["ModelReasoning"]):
        try:
            data = orjson.dumps(result, option=orjson.OPT_INDENT_2)
        except orjson.JSONEncodeError:  # an integer beyond 64 bits
            pass
    if data is None:
        data = json.dumps(result, indent=2, ensure_ascii=False).encode("utf-8")
    return b"  " + data.replace(b"\n", b"\n  ")


def _holds_float(value: Any) -> bool:
    if value.__class__ is float:
        return True
    if isinstance(value, list):
        return any(_holds_float(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_float(v) for v in value.values())
    return False


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
