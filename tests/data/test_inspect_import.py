"""`bv import` of inspect_ai eval logs (bv/data/inspect_import.py): the logs of a real inspect eval
(tests/support/inspect_task.py: inspect's multiple-choice task over bv synth's choice items, its
mockllm model) become judged rows whose accuracy is the one inspect recorded, and two of them get
bv's paired verdict; what cannot be mapped costs its sample alone, named.

inspect-ai is heavy: `make test-interop` installs it into .venv-interop and runs this file; under
`make test` the tests that need it skip and say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.commands import BIN, sh
from support.paths import SUPPORT


@pytest.fixture(scope="module")
def logs(sample_dir: Path, tmp_path_factory: pytest.TempPathFactory, inspect_log) -> dict[str, Path]:
    """Two real inspect evals of the same task, 2 epochs each: model a answers A, B, C, D in turn,
    model b always A."""
    out = tmp_path_factory.mktemp("inspect-logs")
    found = {}
    for name, answers in (("a", "ABCD"), ("b", "A")):
        result = sh(
            f"{BIN}/python {SUPPORT}/inspect_task.py {sample_dir} {out / name} {answers} 2", timeout=180
        )
        assert result.returncode == 0, result.stderr
        found[name] = Path(result.stdout.strip().splitlines()[-1])
    return found


def _imported(path: Path, *more: str) -> list[dict]:
    result = sh(f"bv import {path} {' '.join(more)}")
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_an_inspect_log_reports_the_accuracy_inspect_recorded(logs, tmp_path, inspect_log):
    log = inspect_log.read_eval_log(str(logs["a"]))
    rows = _imported(logs["a"])
    assert len(rows) == len(log.samples) == 2 * len({s.id for s in log.samples})
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    report = json.loads(sh(f"bv report {tmp_path}/a.jsonl --format json").stdout)["inputs"][0]["overall"]
    recorded = log.results.scores[0].metrics["accuracy"].value
    assert report["accuracy"] == pytest.approx(recorded, abs=1e-6)
    assert report["runs"] == 2 and report["judge_errors"] == 0


def test_each_sample_becomes_a_judged_row_with_inspects_verdict(logs, sample_dir, inspect_log):
    log = inspect_log.read_eval_log(str(logs["a"]))
    rows = {
        (row["id"], row["run"]): row
        for row in _imported(logs["a"], "--items", f"{sample_dir}/meta_data.jsonl")
    }
    for sample in log.samples:
        row = rows[(sample.id, sample.epoch - 1)]
        score = sample.scores["choice"]
        assert row["hard"] == (score.value == "C") and row["decided_by"] == "imported"
        assert row["extracted"] == score.answer and row["judge_reply"] == score.explanation
        assert row["answer"] == [sample.target] and row["ans_type"] == "choice"
        assert [c["text"] for c in row["choices"]] == sample.choices
        assert row["response"] == sample.output.completion and row["model"] == "mockllm/model"
        assert row["type"] == sample.metadata["type"] and row["images"]  # from --items
        assert row["imported"]["format"] == "inspect_ai eval log" and row["imported"]["mapping"] == 1
        assert row["question"] in str(sample.input)


def test_two_inspect_runs_get_bvs_paired_verdict(logs, tmp_path):
    for name in ("a", "b"):
        (tmp_path / f"{name}.jsonl").write_text(sh(f"bv import {logs[name]}").stdout)
    result = sh(f"bv report a={tmp_path}/a.jsonl b={tmp_path}/b.jsonl --format json")
    assert result.returncode == 0, result.stderr
    (pair,) = json.loads(result.stdout)["comparison"]["pairs"]
    assert pair["n_items"] == 8 and pair["verdict"].startswith("b vs a: ")
    direct = sh(f"bv report {logs['a']} b={logs['b']} --format json")  # the logs themselves
    assert direct.returncode == 0, direct.stderr
    report = json.loads(direct.stdout)
    assert [i["name"] for i in report["inputs"]] == [logs["a"].stem, "b"]
    (again,) = report["comparison"]["pairs"]
    assert {k: again[k] for k in ("n_items", "diff", "improved_ids", "regressed_ids")} == {
        k: pair[k] for k in ("n_items", "diff", "improved_ids", "regressed_ids")
    }


def test_a_json_log_imports_as_the_eval_log_does(logs, tmp_path, inspect_log):
    log = inspect_log.read_eval_log(str(logs["a"]))
    inspect_log.write_eval_log(log, str(tmp_path / "a.json"), format="json")
    assert _imported(tmp_path / "a.json") == _imported(logs["a"])


def test_what_cannot_be_mapped_costs_its_sample_alone(logs, tmp_path, inspect_log):
    from inspect_ai.scorer import Score

    log = inspect_log.read_eval_log(str(logs["a"]))
    first, second, third = log.samples[:3]
    first.scores = {**first.scores, "other": Score(value="C")}
    second.scores = {"choice": Score(value="P")}
    third.scores = None
    edited = tmp_path / "edited.eval"
    inspect_log.write_eval_log(log, str(edited))
    result = sh(f"bv import {edited}")
    assert result.returncode == 1
    assert len(result.stdout.splitlines()) == len(log.samples) - 3
    chooses = "scores of 2 scorers (choice, other): choose one with --scorer"
    assert f"sample {first.id} epoch {first.epoch}: {chooses}" in result.stderr
    assert f"sample {second.id} epoch {second.epoch}: score value 'P' is not one verdict" in result.stderr
    assert f"sample {third.id} epoch {third.epoch}: no score" in result.stderr
    chosen = sh(f"bv import {edited} --scorer other --skip-bad")
    assert chosen.returncode == 0 and len(chosen.stdout.splitlines()) == 1  # only the first has `other`


def test_a_file_that_is_no_eval_log_is_named(tmp_path, inspect_log):
    bad = tmp_path / "broken.eval"
    bad.write_bytes(b"not a zip")
    result = sh(f"bv import {bad}")
    assert result.returncode == 1 and f"{bad}: not an eval log inspect_ai can read" in result.stderr
    assert "Traceback" not in result.stderr
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    report = sh(f"TMPDIR={temporary} bv report {bad}")  # named by the user's file, not bv's own
    assert not any(temporary.iterdir())  # bv's temporary import, removed
    assert report.returncode == 1 and f"{bad}: not an eval log inspect_ai can read" in report.stderr
    assert f"error: {bad}: no sample of this eval log could be read" in report.stderr
    assert "bv-report-" not in report.stderr and "Traceback" not in report.stderr


def test_without_inspect_ai_the_message_names_the_extra(tmp_path, without_inspect):
    (tmp_path / "a.eval").write_bytes(b"PK")
    result = sh(f"bv import {tmp_path}/a.eval", env=without_inspect)
    assert result.returncode == 2, result.stderr
    assert "pip install 'babyvision-bv[inspect]'" in result.stderr and "Traceback" not in result.stderr


def test_a_sample_that_failed_in_inspect_is_a_failed_row_in_the_denominator(logs, tmp_path, inspect_log):
    """inspect's accuracy leaves a failed sample out; bv counts it wrong, in its errors column."""
    log = inspect_log.read_eval_log(str(logs["a"]))
    failed = log.samples[0]
    gone = "the model's server went away"
    failed.error = inspect_log.EvalError(message=gone, traceback="", traceback_ansi="")
    failed.scores = None
    edited = tmp_path / "failed.eval"
    inspect_log.write_eval_log(log, str(edited))
    rows = _imported(edited)
    assert len(rows) == len(log.samples)
    [row] = [r for r in rows if r["id"] == str(failed.id) and r["run"] == failed.epoch - 1]
    assert row["hard"] == 0 and row["decided_by"] == "rollout_error" and "went away" in row["error"]
    result = sh(f"bv report {edited} --format json")
    assert result.returncode == 1, result.stderr  # rows failed: never a clean result
    assert "1 failed sample(s): re-run them in the tool that made them" in result.stderr
    overall = json.loads(result.stdout)["inputs"][0]["overall"]
    assert overall["errors"] == 1 and overall["n"] == len({s.id for s in log.samples})
