"""`--track` in the base install (no tracker package): the run goes on with one warning saying
what to install, a target that names no tracker is a usage error, and a run without `--track`
imports no tracker code at all. The real trackers: test_trackers_mlflow.py and test_trackers_wandb.py."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from support.commands import sh

from bv.core.errors import BadConfig
from bv.tracking.options import targets


@pytest.mark.skipif(importlib.util.find_spec("mlflow") is not None, reason="mlflow is installed here")
def test_a_tracker_not_installed_is_a_warning_saying_what_to_install(tmp_path, sample_dir):
    out = tmp_path / "run"
    result = sh(f"bv eval {sample_dir}/meta_data.jsonl --backend chance -o {out} --mode rules --track mlflow")
    assert result.returncode == 0, result.stderr
    assert "warning: --track mlflow needs mlflow: pip install 'babyvision-bv[mlflow]'" in result.stderr
    assert (out / "results.jsonl").exists() and not (out / "tracker.json").exists()


@pytest.mark.parametrize("given", ["neptune", "wandb:http://x", "mlflow:", "mlflow,wandb"])
def test_a_target_that_names_no_tracker_is_a_usage_error(tmp_path, sample_dir, given):
    out = tmp_path / "r"
    result = sh(f"bv eval {sample_dir}/meta_data.jsonl --backend chance -o {out} --track '{given}'")
    assert result.returncode == 2 and "--track" in result.stderr and "is not mlflow" in result.stderr
    assert not out.exists()
    with pytest.raises(BadConfig):
        targets([given])


def test_the_same_tracker_twice_is_refused():
    with pytest.raises(BadConfig, match="named twice"):
        targets(["mlflow", "mlflow:http://127.0.0.1:5000"])
    assert targets("wandb") == ("wandb",)


def test_a_run_without_track_imports_no_tracker(tmp_path, sample_dir):
    """`bv eval` in a fresh interpreter, the modules it loaded written out at its end."""
    out = tmp_path / "modules.txt"
    code = (
        "import sys, atexit\n"
        f"atexit.register(lambda: open({str(out)!r}, 'w').write(' '.join(sorted(sys.modules))))\n"
        "from bv.cli.app import main\n"
        "sys.argv = ['bv', *sys.argv[1:]]\n"
        "main()\n"
    )
    args = ["eval", f"{sample_dir}/meta_data.jsonl", "--backend", "chance", "-o", str(tmp_path / "r"), "-q"]
    subprocess.run([sys.executable, "-c", code, *args], capture_output=True, timeout=120, check=False)
    loaded = set(out.read_text().split())
    assert "bv.evaluation.evaluate" in loaded, "the probe ran no evaluation"
    assert not {m for m in loaded if m.split(".")[0] in ("mlflow", "wandb")}
    assert not loaded & {"bv.tracking.mlflow_backend", "bv.tracking.wandb_backend"}


def test_a_panels_agreement_and_a_judges_calibration_are_metrics_too():
    from bv.tracking.figures import eval_metrics

    overall = {"accuracy": 0.5, "ci95": [0.4, 0.6], "n": 10, "rows": 20}
    summary = {
        "overall": overall,
        "by_type": {},
        "judge_panel": {"kappa": 0.61, "disagreements": 3},
        "judge_calibration": {"sensitivity": 0.9, "corrected_accuracy": 0.55, "corrected_ci95": [0.4, 0.7]},
    }
    metrics = eval_metrics(summary)
    assert metrics["judge_panel/kappa"] == 0.61 and metrics["judge_calibration/sensitivity"] == 0.9
    assert metrics["judge_calibration/corrected_ci95_high"] == 0.7


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, "{" * 50, "\xff", "x" * (1024 * 1024 + 1)])
def test_a_tracker_json_that_is_not_bvs_is_a_warning_and_new_runs(tmp_path, capsys, text):
    """tracker.json is a file anyone may have edited: nested past the recursion limit, cut, not
    UTF-8 or huge, it costs a warning saying why, never the run."""
    from bv.tracking.tracker import STATE, Tracking

    (tmp_path / STATE).write_bytes(text.encode("latin-1"))
    assert Tracking(tmp_path, []).state == {}
    said = capsys.readouterr().err
    assert f"warning: {tmp_path / STATE} cannot be read (" in said and "new tracker runs are opened" in said
