"""Ids are strings end to end: through bv data, prompt, export (official and CSV) and import, in
every shape (5,000 digits, 23 digits, leading zeros, floats), with no two ids meeting; and
`bv import` checks the type of every official field, naming the record."""

from __future__ import annotations

import json
import math
import zipfile

import pytest
from support.commands import bv_inproc, jsonl

from bv.core.errors import BadRecord
from bv.core.items import answer_text, id_text, parse_item

IDS = ["9" * 5000, "1" * 23, "0445", "445", "18446744073709551616", "-3", "1.0", "a b", "007", "0"]


def judged(item_id: str, run: int, hard: int = 1) -> dict:
    return {
        "id": item_id,
        "run": run,
        "question": f"q{item_id[:10]}",
        "ans_type": "blank",
        "choices": [],
        "answer": ["1"],
        "type": "T",
        "subtype": "S",
        "model": "m",
        "response": "\\boxed{1}",
        "error": None,
        "extracted": "1",
        "hard": hard,
        "decided_by": "rules",
    }


def test_every_id_shape_survives_export_and_import(tmp_path):
    rows = [judged(i, run) for run in (0, 1) for i in IDS]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = bv_inproc(f"bv export {path} --format official --out {tmp_path / 'off'}")
    assert result.returncode == 0, result.stderr
    written = json.loads((tmp_path / "off" / "model_results_run_1.json").read_text())
    by_id = {str(r["Id"]): r["Id"] for r in written}
    assert sorted(by_id) == sorted(IDS)  # no two ids met
    assert by_id["445"] == 445 and by_id["0"] == 0  # plain integers stay integers, as official files have
    assert all(isinstance(by_id[i], str) for i in IDS if i not in ("445", "0"))
    back = bv_inproc(
        f"bv import {tmp_path / 'off'}/model_results_run_1.json {tmp_path / 'off'}/model_results_run_2.json"
    )
    assert back.returncode == 0, back.stderr
    assert sorted((r["id"], r["run"]) for r in jsonl(back.stdout)) == sorted(
        (r["id"], r["run"]) for r in rows
    )
    csv = bv_inproc(f"bv export {path} --format csv")
    assert csv.returncode == 0
    assert {line.split(",")[0] for line in csv.stdout.splitlines()[1:]} == set(IDS)


@pytest.mark.parametrize(
    "value,expected",
    [
        ("445", "445"),
        ("0445", "0445"),
        (445, "445"),
        (1.0, "1"),
        (10**30, "1" + "0" * 30),
        ("9" * 5000, "9" * 5000),
    ],
)
def test_an_id_is_text_exactly(value, expected):
    assert id_text(value) == expected


@pytest.mark.parametrize("value", [math.nan, math.inf, 1.5, None, "", [1], {"a": 1}, True])
def test_an_id_that_is_no_id_is_refused(value):
    with pytest.raises(BadRecord, match="taskId"):
        id_text(value)


@pytest.mark.parametrize("value", [math.nan, math.inf, None, "", "  "])
def test_a_missing_blank_answer_is_no_answer(value):
    assert answer_text(value) is None
    item = {"taskId": 1, "question": "q", "image": "x.png", "ansType": "blank", "blankAns": value}
    with pytest.raises(BadRecord, match="no gold answer"):
        parse_item(item)


def test_a_whole_float_task_id_is_the_integer_id():
    item = {"taskId": 1.0, "question": "q", "image": "x.png", "ansType": "blank", "blankAns": 4.0}
    parsed = parse_item(item)
    assert parsed["id"] == "1" and parsed["answer"] == ["4"]


OFFICIAL = {
    "Id": 7,
    "Question": "q",
    "ModelReasoning": [],
    "ModelResult": "r",
    "GroundTruth": "B",
    "ExtractedAnswer": "B",
    "LLMJudgeResult": True,
    "Type": "T",
    "Subtype": "S",
}


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("Question", ["a", "list"], "'Question' must be a string, not a list"),
        ("ModelResult", 3, "'ModelResult' must be a string, not the number 3"),
        ("Type", 4.5, "'Type' must be a string, not the number 4.5"),
        ("Subtype", None, "'Subtype' must be a string, not null"),
        ("GroundTruth", None, "'GroundTruth' must be a string, not null"),
        ("GroundTruth", "  ", "'GroundTruth' is empty"),
        ("ExtractedAnswer", 2, "'ExtractedAnswer' must be a string or null, not the number 2"),
        ("LLMJudgeResult", "true", "'LLMJudgeResult' must be true or false, not a string"),
        ("ModelReasoning", {"a": 1}, "'ModelReasoning' must be a list or a string or null"),
        ("Id", None, "missing or empty 'Id'"),
        ("Id", 1.5, "'Id' must be"),
        ("Id", [7], "'Id' must be"),
    ],
)
def test_import_checks_every_official_field_and_names_the_record(tmp_path, field, value, message):
    good = {**OFFICIAL, "Id": 8}
    bad = {**OFFICIAL, field: value}
    path = tmp_path / "model_results_run_1.json"
    path.write_text(json.dumps([good, bad]))
    result = bv_inproc(f"bv import {path}")
    assert result.returncode == 1
    assert f"{path}: result 2" in result.stderr and message in result.stderr, result.stderr
    if field != "Id":
        assert "Id 7" in result.stderr  # the record is named by its id where it has one
    assert [r["id"] for r in jsonl(result.stdout)] == ["8"]  # the good record still comes through


def test_bv_data_takes_float_ids_and_refuses_nan_ones_by_row(tmp_path, sample_dir):
    """A float taskId column (what a data frame with a gap writes): 1.0 is id 1, NaN costs its row."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from support.commands import read_items
    from support.sources import write_parquet

    records = read_items(sample_dir)
    images = [(sample_dir / r["image"]).read_bytes() for r in records]
    table = pq.read_table(write_parquet(tmp_path / "ints.parquet", records, images))
    ids = [float(r["taskId"]) for r in records]
    ids[1] = math.nan
    table = table.set_column(table.schema.get_field_index("taskId"), "taskId", pa.array(ids, pa.float64()))
    pq.write_table(table, tmp_path / "floats.parquet")
    result = bv_inproc(f"bv data --from {tmp_path / 'floats.parquet'} --out {tmp_path / 'set'} --skip-bad")
    assert result.returncode == 0, result.stderr
    assert "row 2: 'taskId' must be a string or a whole number, not nan" in result.stderr
    items = [json.loads(line) for line in (tmp_path / "set" / "meta_data.jsonl").read_text().splitlines()]
    assert items[0]["taskId"] == int(ids[0]) and len(items) == len(records) - 1
    first = str(int(ids[0]))
    prompts = bv_inproc(f"bv prompt {tmp_path / 'set' / 'meta_data.jsonl'} --ids {first}")
    assert [r["id"] for r in jsonl(prompts.stdout)] == [first]


def test_bv_data_refuses_a_nan_blank_answer_by_row(tmp_path, sample_dir):
    """`"blankAns": NaN` in a meta_data.jsonl (Python's json writes it) is no gold, not "nan"."""
    from support.commands import read_items

    records = read_items(sample_dir)
    blank = next(i for i, r in enumerate(records) if r["ansType"] == "blank")
    records[blank]["blankAns"] = math.nan
    source = tmp_path / "nan.zip"
    with zipfile.ZipFile(source, "w") as archive:
        archive.writestr("meta_data.jsonl", "".join(json.dumps(r) + "\n" for r in records))
        for r in records:
            archive.write(sample_dir / r["image"], r["image"])
    result = bv_inproc(f"bv data --from {source} --out {tmp_path / 'set'} --skip-bad")
    assert result.returncode == 0, result.stderr
    assert f"meta_data.jsonl:{blank + 1}: no gold answer ('blankAns' is empty)" in result.stderr
    assert "nan" not in (tmp_path / "set" / "meta_data.jsonl").read_text().lower().replace("nanny", "")
