"""`--track wandb` in offline mode (WANDB_MODE=offline), the run read back from the file W&B
writes (tests/support/wandbfile.py): the same figures `bv eval` logs to MLflow, every `bv optimize` step
at its step number, and no key. Skipped where wandb is not installed (`make test-trackers`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("wandb", reason="needs wandb: pip install 'babyvision-bv[wandb]' (make test-trackers)")

from support.commands import sh
from support.optimizing import Models, command
from support.trackerserver import SECRET, eval_line, history
from support.wandbfile import read_run


def offline(folder: Path) -> dict[str, str]:
    return {"WANDB_MODE": "offline", "WANDB_DIR": str(folder), "WANDB_SILENT": "true"}


def the_run(folder: Path, run_id: str) -> dict:
    files = sorted(folder.glob(f"wandb/offline-run-*-{run_id}/run-{run_id}.wandb"))
    assert files, f"no offline run {run_id} under {folder}"
    return read_run(files[-1])


def test_bv_eval_offline_run_holds_the_reports_figures(tmp_path, sample_dir):
    out = tmp_path / "run"
    result = sh(eval_line(sample_dir, out, "wandb", "eval-test"), env=offline(tmp_path), timeout=300)
    assert result.returncode == 0, result.stderr
    state = json.loads((out / "tracker.json").read_text())["wandb"]
    assert state["where"] == "eval-test (offline)"
    run = the_run(tmp_path, state["run_id"])
    report = json.loads(sh(f"bv report {out} --format json").stdout)["inputs"][0]
    print("wandb run", run["id"], "exit", run["exit"], len(run["summary"]), "summary figures")
    assert run["id"] == state["run_id"] and run["exit"] == 0
    summary = run["summary"]
    assert summary["accuracy"] == pytest.approx(report["overall"]["accuracy"], rel=1e-5)
    for name, figures in report["by_type"].items():
        assert summary[f"type/{name}/accuracy"] == pytest.approx(figures["accuracy"], rel=1e-5), name
        assert summary[f"type/{name}/accuracy_ci95_high"] == pytest.approx(figures["ci95"][1], rel=1e-5)
    assert run["config"]["backend"] == "chance" and run["config"]["repeats"] == "2"
    assert sorted(f for a in run["artifacts"] for f in a["files"]) == [
        "config.json",
        "report.html",
        "report.md",
        "summary.json",
    ]
    assert SECRET not in json.dumps(run) and "wandb:" not in result.stdout
    again = sh(eval_line(sample_dir, out, "wandb", "eval-test"), env=offline(tmp_path), timeout=300)
    assert again.returncode == 0, again.stderr  # the same folder: the same W&B run id, resumed
    assert f"run {state['run_id']} continued" in again.stderr
    assert json.loads((out / "tracker.json").read_text())["wandb"]["run_id"] == state["run_id"]


def test_bv_optimize_offline_run_has_every_step(tmp_path, data_dir):
    data = data_dir
    out = tmp_path / "opt"
    models = Models(data)
    try:
        result = sh(f"bv {command(data, models, out, '--track wandb')}", env=offline(tmp_path), timeout=600)
    finally:
        models.stop()
    assert result.returncode == 0, result.stderr
    rows = history(out)
    run = the_run(tmp_path, json.loads((out / "tracker.json").read_text())["wandb"]["run_id"])
    logged = [h for h in run["history"] if "best_accuracy" in h]
    print("wandb steps:", [h["_step"] for h in logged])
    assert [h["_step"] for h in logged] == [row["step"] for row in rows]
    for h, row in zip(logged, rows, strict=True):
        assert h["best_accuracy"] == pytest.approx(row["best"]["accuracy"], rel=1e-5)
        if row.get("gate"):
            assert h["gate_p_value"] == pytest.approx(row["gate"]["p_value"], rel=1e-5, abs=1e-9)
    skills = sorted(f for a in run["artifacts"] if a["type"] == "skills" for f in a["files"])
    assert skills == sorted(p.name for p in (out / "skills").iterdir())
    assert run["exit"] == 0
