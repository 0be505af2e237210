"""bv export --format hf-eval-results: the Hub's .eval_results/*.yaml (huggingface.co/docs/hub/
eval-results), read back with PyYAML as the Hub reads them: its required keys, one file per
protocol variant, and hostile names that stay one string."""

from __future__ import annotations

import json

import yaml
from hypothesis import given
from hypothesis import strategies as st
from support.commands import bv_inproc, jsonl
from support.rows import HOSTILE, results

from bv.reporting.hf_eval_results import yaml_string

EVIL_MODEL = 'evil/"model": x\n- y\x1b[2J\x7f\x85\u2028\ufeff#\\ {a: [b]} \U0001f600'
SKILL = {"name": "skill\x00\r\nname: 'x'\t", "sha256": "ab" * 32}


def results_files(folder) -> dict[str, list]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted((folder / ".eval_results").iterdir())}


def test_one_file_with_the_keys_the_hub_requires_and_bv_reports_accuracy(judged_run, tmp_path):
    result = bv_inproc(f"bv export {judged_run} --format hf-eval-results --out {tmp_path / 'hub'}")
    assert result.returncode == 0, result.stderr
    [(name, entries)] = results_files(tmp_path / "hub").items()
    assert name.startswith("babyvision_chance_bv_") and name.endswith(".yaml")
    [entry] = entries
    assert set(entry) == {"dataset", "value", "date", "notes"}
    assert entry["dataset"] == {"id": "UnipatAI/BabyVision", "task_id": "default"}
    report = json.loads(bv_inproc(f"bv report {judged_run} --format json").stdout)["inputs"][0]
    assert entry["value"] == round(report["overall"]["accuracy"] * 100, 2)
    assert entry["date"] == report["provenance"]["started_at"]["first"]
    low, high = report["overall"]["ci95"]
    assert f"3 runs of 12 items; 95% CI over items {low * 100:.1f}-{high * 100:.1f}" in entry["notes"]


def test_each_protocol_variant_has_its_own_file(judged_run, tmp_path):
    rows = jsonl(judged_run.read_text())
    official = [{**r, "style": "official"} for r in rows]
    skilled = [{**r, "skill": SKILL} for r in rows]
    hostile = [{**r, "model": EVIL_MODEL} for r in rows]
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows + official + skilled + hostile))
    result = bv_inproc(f"bv export {source} --format hf-eval-results --out {tmp_path / 'hub'}")
    assert result.returncode == 0, result.stderr
    files = results_files(tmp_path / "hub")
    assert len(files) == 4 and all(len(entries) == 1 for entries in files.values())
    notes = [entries[0]["notes"] for entries in files.values()]
    assert sum("style official" in n for n in notes) == 1
    assert sum(f"skill {SKILL['name']} (sha256 abababababab)" in n for n in notes) == 1
    assert sum(f"model {EVIL_MODEL};" in n for n in notes) == 1  # the hostile name, whole, as data
    assert all(name.isascii() and "/" not in name for name in files)


def test_failed_rows_are_counted_wrong_and_said(tmp_path):
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps({**r, "model": "m"}) + "\n" for r in results()))
    result = bv_inproc(f"bv export {source} --format hf-eval-results --out {tmp_path / 'hub'}")
    assert result.returncode == 1 and "2 rows without a verdict (judge errors)" in result.stderr
    [entries] = results_files(tmp_path / "hub").values()
    assert entries[0]["value"] == 50.0
    assert (
        "2 failed rows counted wrong (1 rollout errors, 1 judge errors, 0 undecided)" in entries[0]["notes"]
    )


@given(st.text())
def test_any_string_reads_back_as_itself(text):
    assert yaml.safe_load(f"key: {yaml_string(text)}\n") == {"key": text}


def test_hostile_strings_read_back_as_themselves():
    for text in (EVIL_MODEL, SKILL["name"], HOSTILE, "", "null", "- x", "\ud800", "a\x00b\x7f\x9f"):
        assert yaml.safe_load(f"- {yaml_string(text)}") == [text]
