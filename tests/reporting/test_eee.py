"""bv export --format eee: Every Eval Ever records of a judged run, held to EEE's published JSON
schemas (tests/fixtures/eee/, version 0.3.0) with jsonschema, and to bv report's figures."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jsonschema
import pytest
from support.commands import bv_inproc, jsonl
from support.paths import FIXTURES
from support.rows import HOSTILE, results

from bv.reporting.eee import SCHEMA_VERSION

SCHEMAS = FIXTURES / "eee"
AGGREGATE = jsonschema.Draft7Validator(json.loads((SCHEMAS / "eval.schema.json").read_text()))
INSTANCE = jsonschema.Draft7Validator(json.loads((SCHEMAS / "instance_level_eval.schema.json").read_text()))
EVIL_MODEL = 'evil/"model": x\n- y\x1b[2J\x7f\u2028\ufeff../../data'


def exported(folder: Path) -> list[tuple[dict, list[dict], bytes]]:
    """Each aggregate in an export folder, validated, with its validated samples and their bytes."""
    out = []
    for path in sorted(folder.glob("data/*/*/*/*.json")):
        aggregate = json.loads(path.read_text())
        AGGREGATE.validate(aggregate)
        data = (folder / aggregate["detailed_evaluation_results"]["file_path"]).read_bytes()
        samples = [json.loads(line) for line in data.decode().split("\n") if line]  # U+2028 is no line end
        for sample in samples:
            INSTANCE.validate(sample)
        out.append((aggregate, samples, data))
    return out


def test_eee_export_of_a_judged_run_validates_and_holds_bv_reports_figures(judged_run, tmp_path):
    result = bv_inproc(f"bv export {judged_run} --format eee --out {tmp_path / 'eee'}")
    assert result.returncode == 0, result.stderr
    [(aggregate, samples, data)] = exported(tmp_path / "eee")
    assert SCHEMA_VERSION == json.loads((SCHEMAS / "eval.schema.json").read_text())["version"]
    details = aggregate["detailed_evaluation_results"]
    assert details["total_rows"] == len(samples) == 36  # one line per (id, run): 12 items, 3 runs
    assert details["checksum"] == hashlib.sha256(data).hexdigest()
    assert details["file_path"].startswith("data/babyvision/unknown/chance/")
    assert {s["evaluation_id"] for s in samples} == {aggregate["evaluation_id"]}
    assert {(s["sample_id"], s["metadata"]["run"]) for s in samples} == {
        (r["id"], str(r["run"])) for r in jsonl(judged_run.read_text())
    }
    report = json.loads(bv_inproc(f"bv report {judged_run} --format json").stdout)["inputs"][0]
    overall = aggregate["evaluation_results"][0]
    assert overall["evaluation_result_id"] == "babyvision"
    assert overall["score_details"]["score"] == report["overall"]["accuracy"]
    uncertainty = overall["score_details"]["uncertainty"]
    ci = uncertainty["confidence_interval"]
    assert [ci["lower"], ci["upper"]] == report["overall"]["ci95"] and ci["method"] == report["interval"]
    assert uncertainty["num_samples"] == 12  # the interval is over items, not over the 36 rows
    assert overall["score_details"]["details"]["runs"] == "3"
    names = {r["evaluation_name"] for r in aggregate["evaluation_results"]}
    assert {f"babyvision/type/{t}" for t in report["by_type"]} <= names
    right = sum(s["evaluation"]["is_correct"] for s in samples)
    assert right == report["overall"]["correct"]
    assert aggregate["eval_library"] == {
        "name": "bv",
        "version": report["provenance"]["bv_versions"][0],
        "additional_details": {
            "style": "bv",
            "judge_version": jsonl(judged_run.read_text())[0]["judge_version"],
            "judge_models": "none (the rules decided)",
        },
    }


def test_rows_without_a_verdict_count_wrong_and_are_said(tmp_path):
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps({**r, "model": "m"}) + "\n" for r in results()))
    result = bv_inproc(f"bv export {source} --format eee --out {tmp_path / 'eee'}")
    assert result.returncode == 1
    assert "2 rows without a verdict (judge errors) written as false: 7#0, 10#0" in result.stderr
    [(aggregate, samples, _)] = exported(tmp_path / "eee")
    overall = aggregate["evaluation_results"][0]["score_details"]
    assert overall["score"] == 0.5  # 5 right of 10: the two failed rows count wrong
    assert (overall["details"]["rollout_errors"], overall["details"]["judge_errors"]) == ("1", "1")
    by_id = {s["sample_id"]: s for s in samples}
    assert by_id["10"]["evaluation"] == {"score": 0.0, "is_correct": False}
    assert by_id["10"]["error"] == "judge down"
    assert by_id["10"]["metadata"]["verdict"] == "none: counted wrong"
    assert by_id["7"]["error"].startswith("HTTP 503") and by_id["7"]["output"] == {"raw": []}
    assert by_id["8"]["metadata"]["subtype"] == HOSTILE  # control characters stay data


def test_a_hostile_model_and_skill_stay_data(judged_run, tmp_path):
    skill = {"name": 'skill\x00\r\nname: "x"', "sha256": "ab" * 32}
    rows = [{**r, "model": EVIL_MODEL, "skill": skill} for r in jsonl(judged_run.read_text())]
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert bv_inproc(f"bv export {source} --format eee --out {tmp_path / 'eee'}").returncode == 0
    [(aggregate, samples, _)] = exported(tmp_path / "eee")
    assert aggregate["model_info"]["id"] == EVIL_MODEL and {s["model_id"] for s in samples} == {EVIL_MODEL}
    assert aggregate["eval_library"]["additional_details"]["skill"] == skill["name"]
    folders = [p.relative_to(tmp_path / "eee") for p in (tmp_path / "eee").rglob("*") if p.is_dir()]
    assert max(len(p.parts) for p in folders) == 4  # data/babyvision/<developer>/<model>: nothing escaped
    assert all(part.isprintable() and "/" not in part for p in folders for part in p.parts)


def test_the_folder_is_replaced_whole_and_other_files_refused(judged_run, tmp_path):
    out = tmp_path / "eee"
    assert bv_inproc(f"bv export {judged_run} --format eee --out {out}").returncode == 0
    first = sorted(out.rglob("*.json*"))
    assert bv_inproc(f"bv export {judged_run} --format eee --out {out}").returncode == 0
    assert len(sorted(out.rglob("*.json*"))) == len(first) == 2
    (out / "notes.txt").write_text("mine")
    result = bv_inproc(f"bv export {judged_run} --format eee --out {out}")
    assert result.returncode == 1 and "notes.txt" in result.stderr and "empty folder" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eee"]  # no staging folder left


@pytest.mark.parametrize("fmt", ["eee", "hf-eval-results"])
def test_a_folder_format_needs_out(judged_run, fmt):
    result = bv_inproc(f"bv export {judged_run} --format {fmt}")
    assert result.returncode == 2 and f"--format {fmt} needs --out DIR" in result.stderr
