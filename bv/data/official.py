"""`bv import`: the official BabyVision files into bv records.

Official result files (`model_results_run_K.json`, a JSON array with `Id`, `Question`,
`ModelResult`, `GroundTruth`, `ExtractedAnswer`, `LLMJudgeResult`, `Type`, `Subtype`)
become judged rows with `run` K-1 and the official verdict kept (`decided_by: "imported"`),
so `bv report` reproduces the official compute_score.py and `bv judge` can re-judge them.
The official `meta_data.jsonl` becomes bv items.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from bv.core.errors import BadRecord
from bv.core.images import resolve_image
from bv.core.items import id_text, parse_item
from bv.core.jsonl import Problems, read_records
from bv.core.records import Item
from bv.data import foreign, inspect_import, vlmevalkit
from bv.data.foreign import shown
from bv.data.imported import judged_row

RESULT_FIELDS = ("Id", "Question", "ModelResult", "GroundTruth", "LLMJudgeResult")
# Every field an official result may hold, and the JSON types it may have (None: null allowed).
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "Question": (str,),
    "ModelResult": (str,),
    "GroundTruth": (str,),
    "LLMJudgeResult": (bool,),
    "ExtractedAnswer": (str, type(None)),
    "ModelReasoning": (list, str, type(None)),
    "Type": (str,),
    "Subtype": (str,),
}
_JSON_NAMES = {str: "a string", bool: "true or false", list: "a list", type(None): "null", int: "an integer"}


def _checked_fields(record: dict[str, Any]) -> str:
    """The record's id, every official field it has checked for its type; BadRecord naming the
    field and the value's type otherwise."""
    try:
        item_id = id_text(record["Id"], "Id")
    except BadRecord as exc:
        raise BadRecord(f"{exc} (an official Id is an integer)") from None
    if isinstance(record["Id"], float):
        raise BadRecord(f"'Id' must be an integer or a string, not {record['Id']!r}")
    for name, allowed in FIELD_TYPES.items():
        if name in record and not isinstance(record[name], allowed):
            value = record[name]
            want = " or ".join(_JSON_NAMES[t] for t in allowed)
            got = _JSON_NAMES.get(type(value), type(value).__name__)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                got = f"the number {value!r}"
            raise BadRecord(f"Id {item_id}: {name!r} must be {want}, not {got}")
    if not record["GroundTruth"].strip():
        raise BadRecord(f"Id {item_id}: 'GroundTruth' is empty")
    return item_id


_RUN_IN_NAME = re.compile(r"run_(\d+)", re.IGNORECASE)


def run_from_name(path: Path) -> int | None:
    """`model_results_run_3.json` -> run 2 (bv counts runs from 0)."""
    match = _RUN_IN_NAME.search(path.stem)
    return int(match.group(1)) - 1 if match else None


def official_extracted(value: Any) -> str | None:
    """The official ExtractedAnswer, with its "None" (and null) meaning no answer."""
    if value is None or (isinstance(value, str) and value.strip() == "None"):
        return None
    return str(value)


def result_row(record: Any, run: int, model: str | None, items: Mapping[str, Item]) -> dict[str, Any]:
    """One official result as a judged bv row; `items` (by id) supplies choices and images if known."""
    if not isinstance(record, dict):
        raise BadRecord(f"expected a JSON object, got {type(record).__name__}")
    missing = [f for f in RESULT_FIELDS if f not in record]
    if missing:
        raise BadRecord(f"not an official result: missing {', '.join(repr(f) for f in missing)}")
    item_id = _checked_fields(record)
    verdict = record["LLMJudgeResult"]
    gold = record["GroundTruth"]
    base = items.get(item_id) or {
        "id": item_id,
        "ans_type": "blank",
        "choices": [],
        "answer": [gold],
        "type": record.get("Type") or "unknown",
        "subtype": record.get("Subtype") or "unknown",
    }
    extracted = official_extracted(record.get("ExtractedAnswer"))
    row = judged_row(
        dict(base),
        question=record["Question"],
        run=run,
        model=model,
        response=record["ModelResult"],
        extracted=extracted,
        hard=int(verdict),
        reason="the official LLMJudgeResult",
        judge_version="official",
    )
    row["official"] = {"extracted": extracted, "hard": int(verdict), "ground_truth": gold}
    return row


def _stdin_head(size: int) -> bytes:
    """stdin's first bytes, left to be read (a pipe: peeked; a test's in-memory stdin: read back)."""
    stream = sys.stdin.buffer
    if hasattr(stream, "peek"):
        return stream.peek(size)[:size]
    start = stream.tell()
    head = stream.read(size)
    stream.seek(start)
    return head


def read_official_results(path: Path) -> list[Any]:
    """The records of an official result file (a JSON array; `-`: stdin), read no further than
    the line limit of JSONL input and checked as JSONL lines are (bv.core.json_values.checked_value)."""
    from bv.core.json_values import checked_value, parse_json, unparsable
    from bv.core.jsonl import max_line_bytes

    limit = max_line_bytes()
    try:
        if str(path) == "-":
            raw = sys.stdin.buffer.read(limit + 1)
        else:
            with open(path, "rb") as f:
                raw = f.read(limit + 1)
        if len(raw) > limit:
            raise BadRecord(f"larger than {limit} bytes (BV_MAX_LINE_BYTES)")
        data = parse_json(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BadRecord(f"cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise BadRecord(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except BadRecord:
        raise
    except (RecursionError, ValueError) as exc:
        raise BadRecord(unparsable(exc)) from None
    data, _ = checked_value(data, raw)  # a lone surrogate is replaced quietly here
    if not isinstance(data, list):
        raise BadRecord("expected a JSON array of results (model_results_run_K.json)")
    return data


def is_result_file(path: Path) -> bool:
    """Official result files are JSON arrays; meta_data.jsonl is JSON Lines."""
    if str(path) == "-":
        head = _stdin_head(64)
    else:
        with open(path, "rb") as f:
            head = f.read(64)
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"[")


def import_files(
    paths: list[Path],
    writer: Any,
    problems: Problems,
    run: int | None = None,
    model: str | None = None,
    items_path: Path | None = None,
    scorer: str | None = None,
) -> None:
    """Write bv rows for every official result file, and bv items for every meta_data.jsonl
    (and for other tools' files, bv.data.foreign; `scorer`: an inspect log's scorer to keep)."""
    items = {}
    if items_path is not None:
        folder = items_path.resolve().parent
        for source, item in read_records([str(items_path)], problems, parse_item):
            try:  # absolute, so the HTML viewer finds the images whatever folder it runs in
                item["images"] = [str(resolve_image(p, folder)) for p in item["images"]]
            except BadRecord as exc:
                problems.report(source, str(exc))
                continue
            items[item["id"]] = item
    for path in paths:
        if inspect_import.is_log(path):
            inspect_import.write_log(path, writer, problems, model, items, scorer)
            continue
        if foreign.is_table_file(path):
            foreign.write_table(path, None, writer, problems, run, model, items)
            continue
        if not is_result_file(path):
            read_line = partial(foreign.line_record, path=path, run=run, model=model)
            for _, record in read_records([str(path)], problems, read_line):
                writer.write(record)
            continue
        try:
            records = read_official_results(path)
        except BadRecord as exc:
            problems.report(shown(path), str(exc))
            continue
        if vlmevalkit.is_table(records):
            numbered = [(f"record {n}", record) for n, record in enumerate(records, 1)]
            foreign.write_table(path, numbered, writer, problems, run, model, items)
            continue
        file_run = run_from_name(path)
        if file_run is None and run is not None:
            file_run = run - 1
        if file_run is None:
            problems.report(shown(path), "no run number: name it model_results_run_K.json or give `run` K")
            continue
        for number, record in enumerate(records, 1):
            try:
                writer.write(result_row(record, file_run, model, items))
            except BadRecord as exc:
                problems.report(f"{shown(path)}: result {number}", str(exc))
