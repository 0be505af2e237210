"""bv import of VLMEvalKit's BabyVision prediction and judge files (tests/fixtures/vlmevalkit,
built from its code): tsv, json and xlsx."""

from __future__ import annotations

import csv
import json

from support.commands import bv_inproc, jsonl, read_items
from support.paths import FIXTURES

from bv.data.imported import MAPPING_VERSION

KIT = FIXTURES / "vlmevalkit"
GPT_PRED = KIT / "GPT4o_BabyVision.tsv"
GPT_JUDGED = KIT / "GPT4o_BabyVision_openai_gpt-5.2_judge.tsv"
QWEN_JUDGED = KIT / "Qwen2.5-VL-7B_BabyVision_openai_gpt-5.2_judge.json"


def tsv_records(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def check_kept(rows, records):
    """Each row keeps its record's id, verdict, answer, type and subtype."""
    assert [r["id"] for r in rows] == [str(rec["index"]) for rec in records]
    for row, rec in zip(rows, records, strict=True):
        assert row["hard"] == int(str(rec["LLMJudgeResult"]) == "True") and row["decided_by"] == "imported"
        assert (row["type"], row["subtype"], row["answer"]) == (rec["Type"], rec["Subtype"], [rec["answer"]])
        assert row["ans_type"] == rec["ansType"] and row["response"] == rec["prediction"]
        assert row["extracted"] == (rec["ExtractedAnswer"] or None)
        assert row["imported"]["format"] == "VLMEvalKit" and row["imported"]["mapping"] == MAPPING_VERSION
        assert row["judge_model"] == "openai_gpt-5.2" and row["judge_reply"] == rec["JudgeResponse"]


def test_judge_tsv_keeps_ids_verdicts_and_subtypes(tmp_path):
    result = bv_inproc(
        f"bv import {GPT_JUDGED} > {tmp_path}/gpt.jsonl && bv report {tmp_path}/gpt.jsonl --format json"
    )
    assert result.returncode == 0, result.stderr
    rows = jsonl((tmp_path / "gpt.jsonl").read_text())
    check_kept(rows, tsv_records(GPT_JUDGED))
    assert rows[1]["choices"][2] == {"label": "C", "text": "End C"} and rows[1]["model"] == "GPT4o"
    assert not rows[0]["question"].endswith("format.")  # raw_question, without the answer instruction
    overall = json.loads(result.stdout)["inputs"][0]["overall"]
    assert (overall["correct"], overall["n"]) == (3, 6)


def test_judge_json_keeps_ids_verdicts_and_subtypes():
    result = bv_inproc(f"bv import {QWEN_JUDGED}")
    assert result.returncode == 0, result.stderr
    check_kept(jsonl(result.stdout), json.loads(QWEN_JUDGED.read_text()))


def test_judge_xlsx_keeps_ids_verdicts_and_subtypes(tmp_path):
    import openpyxl  # the xlsx extra; VLMEvalKit's default PRED_FORMAT

    records = tsv_records(GPT_JUDGED)
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(list(records[0]))
    for rec in records:  # typed cells, as pandas writes them: numbers, booleans, empty cells
        cells = {**rec, "index": int(rec["index"]), "LLMJudgeResult": rec["LLMJudgeResult"] == "True"}
        sheet.append([cells[k] if cells[k] != "" else None for k in records[0]])
    path = tmp_path / GPT_JUDGED.with_suffix(".xlsx").name
    book.save(path)
    result = bv_inproc(f"bv import {path}")
    assert result.returncode == 0, result.stderr
    check_kept(jsonl(result.stdout), records)


def test_prediction_file_becomes_rows_that_bv_judge_judges(tmp_path):
    result = bv_inproc(
        f"bv import {GPT_PRED} > {tmp_path}/pred.jsonl"
        f" && bv judge --mode rules {tmp_path}/pred.jsonl > {tmp_path}/judged.jsonl"
        f" && bv import {GPT_JUDGED} > {tmp_path}/kit.jsonl"
    )
    assert result.returncode == 0, result.stderr
    pred = jsonl((tmp_path / "pred.jsonl").read_text())
    assert all("hard" not in r and r["imported"]["format"] == "VLMEvalKit" for r in pred)
    judged = jsonl((tmp_path / "judged.jsonl").read_text())
    kit = jsonl((tmp_path / "kit.jsonl").read_text())
    assert [r["hard"] for r in judged] == [r["hard"] for r in kit]  # bv's rules agree with its judge here


def test_two_judge_files_give_a_paired_verdict(tmp_path):
    result = bv_inproc(
        f"bv import {QWEN_JUDGED} > {tmp_path}/qwen.jsonl && bv import {GPT_JUDGED} > {tmp_path}/gpt.jsonl"
        f" && bv report {tmp_path}/qwen.jsonl {tmp_path}/gpt.jsonl --format json"
    )
    assert result.returncode == 0, result.stderr
    paired = json.loads(result.stdout)["comparison"]["paired"]
    assert paired["n_items"] == 6 and paired["verdict"] and paired["method"]
    assert paired["improved_ids"] == ["2"] and paired["regressed_ids"] == []


def test_records_that_cannot_be_mapped_are_refused_with_file_and_line(tmp_path):
    text = GPT_JUDGED.read_text()
    bad = text.replace('"False"\t"False"\t"You are', '"maybe"\t"False"\t"You are', 1)  # record 3's verdict
    bad = bad.replace('"blank"', '"sketch"', 1)  # record 1's answer type
    bad = bad.replace(
        '"[""A piece"", ""B piece"", ""C piece"", ""D piece""]"', '"[]"', 1
    )  # record 5's options
    path = tmp_path / "M_BabyVision_j_judge.tsv"
    path.write_text(bad)
    result = bv_inproc(f"bv import {path}")
    assert result.returncode == 1
    assert [r["id"] for r in jsonl(result.stdout)] == ["2", "4", "6"]
    assert f"{path}:2: unknown answer type 'sketch'" in result.stderr  # record 1 starts on line 2
    third = next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith('"3"'))
    assert third > 4  # records span lines: the message names the line record 3 starts on
    assert f"{path}:{third}: 'LLMJudgeResult' must be True or False, not 'maybe'" in result.stderr
    fifth = next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith('"5"'))
    assert f"{path}:{fifth}: a choice item without its options" in result.stderr
    assert "Traceback" not in result.stderr


def test_items_give_a_judge_file_its_images(sample_dir, tmp_path):
    """VLMEvalKit's index is the official taskId, so --items meta_data.jsonl finds each row's image."""
    result = bv_inproc(f"bv import --items {sample_dir}/meta_data.jsonl {GPT_JUDGED}")
    assert result.returncode == 0, result.stderr
    rows = jsonl(result.stdout)
    assert len(rows) == 6 and all(r["images"] and r["images"][0].startswith("/") for r in rows)
    image = {str(i["taskId"]): i["image"] for i in read_items(sample_dir)}["4"]
    assert rows[3]["images"] == [str((sample_dir / image).resolve())]
    assert rows[3]["subtype"] == "Count 3D blocks"  # the rest is VLMEvalKit's
