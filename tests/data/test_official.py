"""bv against the official BabyVision evaluation's real outputs (../shared, when present)."""

from __future__ import annotations

import json

from support.commands import bv_inproc, jsonl
from support.official import OFFICIAL_FILES, needs_official_results

from bv.core.extract import extract_answer
from bv.core.rules import decide
from bv.data.official import official_extracted

FILES = OFFICIAL_FILES
pytestmark = needs_official_results


def official_records() -> list[tuple[int, dict]]:
    return [(k, record) for k, path in enumerate(FILES, 1) for record in json.loads(path.read_text())]


def test_extraction_equals_the_official_on_all_24():
    records = official_records()
    assert len(records) == 24
    for k, record in records:
        assert extract_answer(record["ModelResult"]) == official_extracted(record["ExtractedAnswer"]), (
            k,
            record["Id"],
        )


def test_rules_reach_the_official_verdict_on_all_24():
    for k, record in official_records():
        row = {"ans_type": "blank", "choices": [], "answer": [record["GroundTruth"]], "error": None}
        verdict = decide(row, extract_answer(record["ModelResult"]))
        assert verdict.hard == int(record["LLMJudgeResult"]), (k, record["Id"], verdict.reason)


def test_import_then_report_reproduces_compute_score():
    result = bv_inproc(f"bv import {' '.join(map(str, FILES))} | bv report --format json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)["inputs"][0]
    overall = report["overall"]
    assert (overall["n"], overall["runs"], overall["rows"]) == (8, 3, 24)
    assert round(overall["accuracy"], 4) == 0.8333 and round(overall["std"], 4) == 0.0589
    assert overall["per_run"] == [0.875, 0.875, 0.75]
    fine = report["by_type"]["Fine-grained Discrimination"]
    assert round(fine["accuracy"], 4) == 0.8333 and round(fine["std"], 4) == 0.0589
    subtype = report["by_subtype"]["Find the different"]
    assert subtype["type"] == "Fine-grained Discrimination" and round(subtype["accuracy"], 4) == 0.8333


def test_imported_rows_rejudged_by_rules_agree_and_need_no_llm(tmp_path):
    result = bv_inproc(
        f"bv import {' '.join(map(str, FILES))} > {tmp_path}/imported.jsonl"
        f" && bv judge --mode rules {tmp_path}/imported.jsonl > {tmp_path}/rejudged.jsonl"
    )
    assert result.returncode == 0, result.stderr
    rows = jsonl((tmp_path / "rejudged.jsonl").read_text())
    assert len(rows) == 24 and all(r["decided_by"] == "rules" for r in rows)
    assert all(
        r["hard"] == r["official"]["hard"] and r["extracted"] == r["official"]["extracted"] for r in rows
    )
    assert {r["run"] for r in rows} == {0, 1, 2}


def test_run_comes_from_the_file_name_or_the_option(tmp_path):
    copy = tmp_path / "results.json"
    copy.write_text(FILES[1].read_text())
    assert "no run number" in bv_inproc(f"bv import {copy}").stderr
    rows = jsonl(bv_inproc(f"bv import --run 7 --model gemini {copy}").stdout)
    assert {r["run"] for r in rows} == {6} and {r["model"] for r in rows} == {"gemini"}
