"""Which reader `bv import` gives a file from another tool: lmms-eval's sample logs (JSON Lines,
told apart from items line by line) and VLMEvalKit's tables (tsv and xlsx by name, a json list by
its records)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bv.core.errors import BadRecord
from bv.core.items import parse_item
from bv.core.jsonl import Problems
from bv.core.records import Item
from bv.data import lmms_eval, vlmevalkit


def shown(path: Path) -> str:
    """A path as messages name it (`-`: stdin)."""
    return "<stdin>" if str(path) == "-" else str(path)


def first_run(run: int | None) -> int:
    """bv's run for a file of one run: `run` K (1-based) is K-1, else 0."""
    return run - 1 if run is not None else 0


def line_record(record: dict[str, Any], path: Path, run: int | None, model: str | None) -> Any:
    """A JSON line: an lmms-eval sample as a judged row (its model, when not given, is the folder
    lmms-eval wrote it in, named after the model), anything else as an item."""
    if not lmms_eval.is_sample(record):
        return parse_item(record)
    if model is None and str(path) != "-":
        model = path.resolve().parent.name
    return lmms_eval.sample_row(record, first_run(run), model)


def is_table_file(path: Path) -> bool:
    """VLMEvalKit's tsv and xlsx files, by their names' ending."""
    return path.suffix.lower() in (".tsv", ".xlsx")


def write_table(
    path: Path,
    records: Any,
    writer: Any,
    problems: Problems,
    run: int | None,
    model: str | None,
    items: Mapping[str, Item],
) -> None:
    """Write the bv rows of a VLMEvalKit file's records (`records`: (where, record) pairs, or
    None to read `path` as tsv or xlsx); a record that cannot be mapped costs its line. Its ids
    are the official ones, so `items` (from `--items`) gives each row its item's images."""
    named_model, judge = vlmevalkit.names(path)
    model = model or named_model
    try:
        if records is None:
            if path.suffix.lower() == ".xlsx":
                records = list(vlmevalkit.xlsx_records(path))
            else:
                records = list(vlmevalkit.tsv_records(_read(path)))
    except BadRecord as exc:
        problems.report(shown(path), str(exc))
        return
    for where, record in records:
        try:
            row = vlmevalkit.table_row(record, first_run(run), model, judge)
            if row["id"] in items:
                row["images"] = items[row["id"]]["images"]
            writer.write(row)
        except BadRecord as exc:
            problems.report(
                f"{shown(path)}:{where}" if isinstance(where, int) else f"{shown(path)}: {where}", str(exc)
            )


def _read(path: Path) -> bytes:
    """A file's bytes, no more than the JSONL line limit allows a whole file here."""
    from bv.core.jsonl import max_line_bytes

    limit = max_line_bytes()
    try:
        with open(path, "rb") as f:
            raw = f.read(limit + 1)
    except OSError as exc:
        raise BadRecord(f"cannot read: {exc}") from None
    if len(raw) > limit:
        raise BadRecord(f"larger than {limit} bytes (BV_MAX_LINE_BYTES)")
    return raw
