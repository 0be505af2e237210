"""bv export: official result files the official scorer reads (round trip through bv import),
and CSV for spreadsheets."""

from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from pathlib import Path

import pytest
from support.commands import bv_inproc, jsonl, sh
from support.official import OFFICIAL_RESULTS, needs_official_results

OFFICIAL = OFFICIAL_RESULTS
KEYS = ["Id", "Question", "ModelReasoning", "ModelResult", "GroundTruth", "ExtractedAnswer", "LLMJudgeResult"]
KEYS += ["Type", "Subtype"]


def official_scores(folder: Path) -> dict:
    """What compute_score.py computes, re-derived from the files alone: per run (file), the share of
    LLMJudgeResult true, overall, per Type and per Subtype; then mean and population std over runs."""
    per_run: dict[tuple[str, str], list[float]] = defaultdict(list)
    for path in sorted(folder.glob("model_results_run_*.json")):
        groups: dict[tuple[str, str], list[bool]] = defaultdict(list)
        for record in json.loads(path.read_text()):
            verdict = record["LLMJudgeResult"] is True
            groups[("overall", "")].append(verdict)
            groups[("type", record["Type"])].append(verdict)
            groups[("subtype", record["Subtype"])].append(verdict)
        for key, verdicts in groups.items():
            per_run[key].append(sum(verdicts) / len(verdicts))
    scores = {}
    for key, values in per_run.items():
        mean = sum(values) / len(values)
        scores[key] = (
            round(mean, 6),
            round(math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)), 6),
        )
    return scores


def report_scores(report: dict) -> dict:
    report = report["inputs"][0]  # bv report --format json: one summary per input
    scores = {("overall", ""): (report["overall"]["accuracy"], report["overall"]["std"])}
    for level, group in (("type", "by_type"), ("subtype", "by_subtype")):
        for name, cell in report[group].items():
            scores[(level, name)] = (cell["accuracy"], cell["std"])
    return scores


FIGURES = ("n", "rows", "runs", "correct", "accuracy", "std", "per_run", "ci95", "chance")


def figures(report: dict) -> dict:
    report = report["inputs"][0]
    out = {"overall": {k: report["overall"][k] for k in FIGURES}}
    for group in ("by_type", "by_subtype", "by_ans_type"):
        out[group] = {name: {k: cell[k] for k in FIGURES} for name, cell in report[group].items()}
    return out


@pytest.fixture(scope="module")
def judged(judged_run) -> Path:
    return judged_run


@needs_official_results
def test_official_export_has_the_official_schema_and_scores_as_bv_report(judged, tmp_path):
    result = bv_inproc(f"bv export {judged} --format official --out {tmp_path / 'off'}")
    assert result.returncode == 0, result.stderr
    files = sorted(p.name for p in (tmp_path / "off").iterdir())
    assert files == ["model_results_run_1.json", "model_results_run_2.json", "model_results_run_3.json"]
    reference = json.loads((OFFICIAL / "model_results_run_1.json").read_text())[0]
    for name in files:
        records = json.loads((tmp_path / "off" / name).read_text())
        assert len(records) == 12
        for record in records:
            assert list(record) == KEYS
            for key in KEYS:
                if record[key] is not None and reference[key] is not None:
                    assert type(record[key]) is type(reference[key]), key
    report = json.loads(bv_inproc(f"bv report {judged} --format json").stdout)
    scores = official_scores(tmp_path / "off")
    assert scores == report_scores(report)
    assert 0 < scores[("overall", "")][0] < 1 and scores[("overall", "")][1] > 0  # a real test of std


def test_export_import_round_trip_gives_the_same_report(judged, sample_dir, tmp_path):
    assert bv_inproc(f"bv export {judged} --format official --out {tmp_path}").returncode == 0
    before = json.loads(bv_inproc(f"bv report {judged} --format json").stdout)
    items = sample_dir / "meta_data.jsonl"
    after = bv_inproc(
        f"bv import {tmp_path}/model_results_run_*.json --items {items} | bv report --format json"
    )
    assert after.returncode == 0, after.stderr
    assert figures(json.loads(after.stdout)) == figures(before)
    # Without the items file the answer types are unknown, but what compute_score.py prints is kept.
    bare = json.loads(
        bv_inproc(f"bv import {tmp_path}/model_results_run_*.json | bv report --format json").stdout
    )
    assert report_scores(bare) == report_scores(before)


@needs_official_results
def test_official_files_survive_import_then_export(tmp_path):
    result = bv_inproc(
        f"bv import {OFFICIAL}/model_results_run_*.json > {tmp_path / 'rows.jsonl'}"
        f" && bv export {tmp_path / 'rows.jsonl'} --format official --out {tmp_path / 'out'}"
    )
    assert result.returncode == 0, result.stderr
    for k in (1, 2, 3):
        original = json.loads((OFFICIAL / f"model_results_run_{k}.json").read_text())
        exported = json.loads((tmp_path / "out" / f"model_results_run_{k}.json").read_text())
        original.sort(key=lambda r: r["Id"])
        assert [{**r, "ModelReasoning": []} for r in original] == exported
    assert official_scores(tmp_path / "out") == official_scores(OFFICIAL)


def test_rows_without_a_verdict_are_written_false_and_named(judged, tmp_path):
    rows = jsonl(judged.read_text())
    rows[0].update(hard=None, decided_by="error", judge_error="judge down")
    rows.append(dict(rows[1]))  # a duplicate (id, run)
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = bv_inproc(f"bv export {source} --format official --out {tmp_path / 'off'}")
    assert result.returncode == 1
    assert (
        f"1 row without a verdict (judge errors) written as false: {rows[0]['id']}#{rows[0]['run']}"
        in result.stderr
    )
    assert f"{source}:{len(rows)}: a second row for id {rows[1]['id']} run {rows[1]['run']}" in result.stderr
    run = json.loads((tmp_path / "off" / f"model_results_run_{rows[0]['run'] + 1}.json").read_text())
    assert len(run) == 12 and not next(r for r in run if str(r["Id"]) == str(rows[0]["id"]))["LLMJudgeResult"]
    (tmp_path / "once.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:-1]))
    report = json.loads(bv_inproc(f"bv report {tmp_path / 'once.jsonl'} --format json").stdout)
    assert official_scores(tmp_path / "off") == report_scores(report)


def test_stale_run_files_are_refused(judged, tmp_path):
    (tmp_path / "model_results_run_4.json").write_text("[]")
    result = bv_inproc(f"bv export {judged} --format official --out {tmp_path}")
    assert result.returncode == 1
    assert "model_results_run_4.json" in result.stderr and "empty folder" in result.stderr
    assert not (tmp_path / "model_results_run_1.json").exists()


def test_csv_one_row_per_id_and_run_formulas_defused(judged, tmp_path):
    rows = jsonl(judged.read_text())
    rows[0]["extracted"] = '=HYPERLINK("http://x","y")'
    rows[1]["extracted"] = "-3"
    rows[2]["extracted"] = "-cmd"
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = bv_inproc(f"bv export {source} --format csv")
    assert result.returncode == 0, result.stderr
    table = list(csv.DictReader(io.StringIO(result.stdout)))
    assert list(table[0]) == [
        "id",
        "run",
        "type",
        "subtype",
        "gold",
        "extracted",
        "hard",
        "decided_by",
        "model",
    ]
    assert len(table) == len(rows) == 36
    assert {(r["id"], r["run"]) for r in table} == {(str(r["id"]), str(r["run"])) for r in rows}
    assert table[0]["extracted"] == "'" + rows[0]["extracted"]
    assert table[1]["extracted"] == "-3" and table[2]["extracted"] == "'-cmd"
    assert table[3]["hard"] == str(rows[3]["hard"]) and table[3]["model"] == "chance"
    to_file = bv_inproc(f"bv export {source} --format csv -o {tmp_path / 'r.csv'}")
    assert to_file.returncode == 0 and (tmp_path / "r.csv").read_text() == result.stdout
    assert sh(f"bv export {source} --format csv | head -1").returncode == 0
