"""`bv import` of VLMEvalKit's BabyVision files: predictions and judge files (tsv, json, xlsx).

VLMEvalKit (github.com/open-compass/VLMEvalKit, vlmeval/dataset/babyvision.py) writes a
prediction file `{model}_BabyVision.{xlsx,tsv,json}` (PRED_FORMAT; xlsx by default): a table with
its dataset's columns (`index` = the official taskId, `question`, `raw_question`, `answer`,
`ansType`, `options`, `Type`, `Subtype`, …) and the model's `prediction`. Its judge adds
`ExtractedAnswer`, `LLMJudgeResult` (the verdict), `JudgeResponse` and `JudgePrompt` in
`{model}_BabyVision_{judge}_judge.{ext}`. A judge file's lines become judged bv rows with the
verdict kept; a prediction file's become rollout rows for `bv judge`. docs/formats.md lists the
mapping. tsv is pandas' (tab-separated, every field quoted); json is a list of records; xlsx
needs openpyxl, which is read only when an xlsx file is given.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bv.core.errors import BadRecord
from bv.data.imported import MAPPING_VERSION, base_item, judged_row, options_list

FORMAT = "VLMEvalKit"
NEEDED = ("index", "answer", "prediction")
_NAME = re.compile(r"^(?P<model>.+?)_BabyVision(?:_(?P<judge>.+)_judge)?$")


def is_table(records: list[Any]) -> bool:
    """A JSON array of VLMEvalKit records (not the official `model_results_run_K.json`)."""
    return bool(records) and isinstance(records[0], dict) and "prediction" in records[0]


def names(path: Path) -> tuple[str | None, str | None]:
    """The model and the judge a VLMEvalKit file's name says (`GPT4o_BabyVision_gpt-4o_judge`)."""
    match = _NAME.match(path.stem)
    return (match["model"], match["judge"]) if match else (None, None)


def _cell(value: Any) -> Any:
    """A cell as JSON would hold it: pandas writes None and NaN as an empty cell."""
    if isinstance(value, float) and value != value:
        return None
    return value


def tsv_records(raw: bytes) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, record) for each row of a tsv file, `line` where the row starts (a quoted field may
    span lines)."""
    from bv.core.jsonl import max_line_bytes

    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadRecord(f"not UTF-8 text: {exc}") from None
    csv.field_size_limit(max_line_bytes())  # a reply may be longer than csv's default 128 KiB
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t")
    try:
        yield from _rows(reader)
    except csv.Error as exc:
        raise BadRecord(f"line {reader.line_num}: not a tsv table: {exc}") from None


def _rows(reader: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    header = next(reader, None)
    if not header:
        raise BadRecord("empty file: expected a header line")
    start = reader.line_num + 1
    for cells in reader:
        if cells:
            if len(cells) != len(header):
                raise BadRecord(f"line {start}: {len(cells)} fields where the header has {len(header)}")
            yield start, {k: (v if v != "" else None) for k, v in zip(header, cells, strict=True)}
        start = reader.line_num + 1


def xlsx_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, record) for each row of an xlsx file's first sheet, read with openpyxl."""
    try:
        import openpyxl  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        raise BadRecord("reading xlsx needs openpyxl (pip install openpyxl), or save it as tsv") from None
    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises many kinds for a file that is no workbook
        raise BadRecord(f"not an xlsx workbook: {exc}") from None
    rows = book.worksheets[0].iter_rows(values_only=True)
    header = [str(h) for h in next(rows, ())]
    for number, cells in enumerate(rows, 2):
        yield number, {k: _cell(v) for k, v in zip(header, cells, strict=False)}


def _flag(value: Any) -> bool:
    """LLMJudgeResult: a JSON boolean, or pandas' True/False (tsv), or 1/0."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise BadRecord(f"'LLMJudgeResult' must be True or False, not {value!r}")


def _text(record: dict[str, Any], key: str) -> str:
    value = _cell(record.get(key))
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def table_row(record: Any, run: int, model: str | None, judge: str | None) -> dict[str, Any]:
    """One VLMEvalKit record as a bv row: judged when it has `LLMJudgeResult`, else a rollout row."""
    if not isinstance(record, dict):
        raise BadRecord(f"expected a record (an object), got {type(record).__name__}")
    missing = [k for k in NEEDED if k not in record]
    if missing:
        raise BadRecord(f"not a VLMEvalKit BabyVision record: no {', '.join(repr(k) for k in missing)}")
    kind = _text(record, "ansType") or "blank"
    options = options_list(_cell(record.get("options"))) if kind == "choice" else []
    base = base_item(
        _cell(record["index"]),
        "index",
        _text(record, "answer"),
        kind,
        options,
        _text(record, "Type"),
        _text(record, "Subtype"),
    )
    question = _text(record, "raw_question") or _text(record, "question")
    response = _text(record, "prediction")
    imported: dict[str, Any] = {"format": FORMAT, "mapping": MAPPING_VERSION, "index": base["id"]}
    if "LLMJudgeResult" not in record:
        return {**base, "question": question, "run": run, "backend": "imported", "model": model,
                "response": response, "error": None, "imported": imported}  # fmt: skip
    hard = int(_flag(_cell(record["LLMJudgeResult"])))
    extracted = _text(record, "ExtractedAnswer") or None  # VLMEvalKit's None (no box) is an empty cell
    row = judged_row(
        base,
        question=question,
        run=run,
        model=model,
        response=response,
        extracted=extracted,
        hard=hard,
        reason="VLMEvalKit's LLMJudgeResult",
        judge_version="vlmevalkit",
        judge_model=judge,
        judge_reply=_text(record, "JudgeResponse") or None,
    )
    row["imported"] = {**imported, "hard": hard, "extracted": extracted, "ground_truth": base["answer"][0]}
    return row
