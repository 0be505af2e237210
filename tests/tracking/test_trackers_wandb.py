"""`--track wandb` in offline mode (WANDB_MODE=offline), the run read back from the file W&B
writes (tests/support/wandbfile.py): the same figures `bv eval` logs to MLflow, every `bv optimize` step
at its step number, no key in any file W&B writes, and no prompt for a W&B key. Skipped where wandb
is not installed (`make test-trackers`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("wandb", reason="needs wandb: pip install 'babyvision-bv[wandb]' (make test-trackers)")

from support.commands import BIN, sh
from support.evaluating import SECRET as API_KEY
from support.evaluating import eval_command, respond
from support.optimizing import Models, command
from support.terminal import on_terminal
from support.trackerserver import SECRET, eval_line, history
from support.wandbfile import read_run

PARAM_KEY = "sk-test-PLANTEDPARAMKEY-77aa88bb"  # given as -p api_key=…


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


def test_no_key_given_to_bv_reaches_a_file_wandb_writes(tmp_path, sample_dir, server):
    """W&B records the command line of the process it runs in: bv's holds --api-key and the rest."""
    server.responder = respond
    out = tmp_path / "run"
    line = eval_command(
        sample_dir, server, out, f"--judge-api-key {SECRET} -p api_key={PARAM_KEY} --track wandb"
    )
    result = sh(line, env=offline(tmp_path), timeout=300)
    assert result.returncode == 0, result.stderr
    files = [p for p in (tmp_path / "wandb").rglob("*") if p.is_file()]
    assert any(p.suffix == ".wandb" for p in files), files
    for key in (API_KEY, SECRET, PARAM_KEY):
        assert key not in result.stdout + result.stderr
        holding = [str(p.relative_to(tmp_path)) for p in files if key.encode() in p.read_bytes()]
        assert not holding, f"{key} in {holding}"


def test_without_a_wandb_key_on_a_terminal_the_run_is_written_offline_never_prompted(
    tmp_path, sample_dir, monkeypatch
):
    """No WANDB_MODE, no key anywhere W&B looks, a terminal on stdin that gives end-of-file: W&B
    asked "Enter your choice:" and the run ended as if by Ctrl-C."""
    for name in ("WANDB_MODE", "WANDB_API_KEY", "NETRC", "WANDB_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "run"
    env = {"HOME": str(tmp_path), "WANDB_DIR": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    argv = [BIN / "bv", "eval", sample_dir / "meta_data.jsonl", "--backend", "chance", "--mode", "rules",
            "-o", out, "--no-cache", "--track", "wandb"]  # fmt: skip
    status, shown, _ = on_terminal(argv, 200, input_bytes=b"", env=env, timeout=120)
    assert status == 0, shown
    assert "Enter your choice" not in shown
    assert "no W&B key (`wandb login`, or WANDB_API_KEY): the run is written offline" in shown
    state = json.loads((out / "tracker.json").read_text())["wandb"]
    assert state["where"] == "bv (offline)"
    assert the_run(tmp_path, state["run_id"])["exit"] == 0
