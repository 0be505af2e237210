"""bv import of lmms-eval's BabyVision sample logs (tests/fixtures/lmms_eval, built from its code)."""

from __future__ import annotations

import json

from support.commands import bv_inproc, jsonl
from support.paths import FIXTURES

from bv.data.imported import MAPPING_VERSION

QWEN = FIXTURES / "lmms_eval" / "qwen2_5_vl" / "20260801_101500_samples_babyvision.jsonl"
LLAVA = FIXTURES / "lmms_eval" / "llava_onevision" / "20260801_101500_samples_babyvision.jsonl"


def test_samples_import_with_ids_verdicts_and_subtypes_kept(tmp_path):
    result = bv_inproc(
        f"bv import {QWEN} > {tmp_path}/qwen.jsonl && bv report {tmp_path}/qwen.jsonl --format json"
    )
    assert (
        result.returncode == 1 and "qwen: 1 judge error(s)" in result.stderr
    )  # lmms-eval's judge failed once
    rows = {r["id"]: r for r in jsonl((tmp_path / "qwen.jsonl").read_text())}
    samples = {str(s["doc_id"]): s for s in jsonl(QWEN.read_text())}
    assert rows.keys() == samples.keys()
    for doc_id, sample in samples.items():
        row, metric = rows[doc_id], sample["babyvision_overall_accuracy"]
        assert (row["type"], row["subtype"]) == (metric["task_type"], metric["subtype"])
        assert row["response"] == sample["filtered_resps"] and row["answer"] == [sample["target"]]
        assert row["model"] == "qwen2_5_vl" and row["run"] == 0
        assert (
            row["imported"]["format"] == "lmms-eval samples" and row["imported"]["mapping"] == MAPPING_VERSION
        )
        if "error" in metric:  # its judge failed: a judge error, counted wrong as lmms-eval counts it
            assert row["hard"] is None and row["decided_by"] == "error" and "429" in row["judge_error"]
        else:
            assert row["hard"] == int(metric["correct"]) and row["decided_by"] == "imported"
            assert row["extracted"] == metric["parsed_pred"]
    connect = rows["1"]  # a choice item: its options read back from the prompt's "(A) text" lines
    assert connect["ans_type"] == "choice" and [c["text"] for c in connect["choices"]] == [
        "End A",
        "End B",
        "End C",
        "End D",
    ]
    assert connect["question"].endswith("point 4 end?")
    overall = json.loads(result.stdout)["inputs"][0]["overall"]
    assert (overall["correct"], overall["n"], overall["judge_errors"]) == (3, 6, 1)  # lmms-eval's 3/6


def test_two_imported_runs_give_a_paired_verdict(tmp_path):
    result = bv_inproc(
        f"bv import {QWEN} > {tmp_path}/qwen.jsonl && bv import {LLAVA} > {tmp_path}/llava.jsonl"
        f" && bv report {tmp_path}/qwen.jsonl {tmp_path}/llava.jsonl --format json"
    )
    assert result.returncode == 1 and "qwen: 1 judge error(s)" in result.stderr, result.stderr
    paired = json.loads(result.stdout)["comparison"]["paired"]
    assert paired["n_items"] == 6 and paired["verdict"]
    assert sorted(paired["improved_ids"]) == ["1", "3", "5"] and paired["regressed_ids"] == ["4"]
    assert paired["by_subtype"]["Maze"]["improved"] == 1


def test_a_sample_that_cannot_be_mapped_is_refused_with_file_and_line(tmp_path):
    lines = QWEN.read_text().splitlines()
    other = json.loads(lines[1])
    other["mme_percetion_score"] = other.pop("babyvision_overall_accuracy")
    many = json.loads(lines[2])
    many["filtered_resps"] = ["\\boxed{A}", "\\boxed{B}"]
    path = tmp_path / "20260801_samples_babyvision.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(other), json.dumps(many)]) + "\n")
    result = bv_inproc(f"bv import {path}")
    assert result.returncode == 1
    assert len(jsonl(result.stdout)) == 1  # the good line is still imported
    assert f"{path}:2: no 'babyvision_overall_accuracy'" in result.stderr
    assert "mme_percetion_score" in result.stderr
    assert f"{path}:3: 'filtered_resps' holds 2 replies" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_list_form_written_before_lmms_eval_0_7_imports_alike(tmp_path):
    """lmms-eval before 0.7 (its babyvision task's first release, a0648f26) kept `filtered_resps`
    as a list of one reply and `resps` beside it."""
    older = []
    for sample in jsonl(QWEN.read_text()):
        sample["filtered_resps"] = [sample["filtered_resps"]]
        sample["resps"] = [sample["filtered_resps"]]
        older.append(json.dumps(sample))
    path = tmp_path / "qwen2_5_vl" / "20260122_samples_babyvision.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(older) + "\n")
    result = bv_inproc(
        f"bv import {path} > {tmp_path}/older.jsonl && bv import {QWEN} > {tmp_path}/now.jsonl"
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "older.jsonl").read_text() == (tmp_path / "now.jsonl").read_text()


def test_the_report_says_the_imported_tools_verdicts_judged_not_bvs_rules(tmp_path):
    result = bv_inproc(f"bv import {QWEN} > {tmp_path}/qwen.jsonl && bv report {tmp_path}/qwen.jsonl")
    assert "judge the imported tool's verdicts" in result.stdout, result.stdout[-800:]
    assert "judge rules" not in result.stdout
    # its judge's failure is lmms-eval's to re-run, not bv judge's
    assert "qwen: 1 judge error(s) of the tool that made them" in result.stderr
    assert "re-run bv judge" not in result.stderr
