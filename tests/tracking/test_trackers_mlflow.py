"""`--track mlflow` against a real MLflow tracking server the test starts (SQLite backend, on
loopback), read back through MLflow's own client: what `bv eval` and `bv optimize` logged, a
resumed run continuing its tracker run, a URI's password in none of it, the default local store,
and a server that is down or hostile (tests/support/trackerserver.py) costing only a warning and
seconds. Skipped where mlflow is not installed (`make test-trackers` installs it into .venv-trackers)."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("mlflow", reason="needs mlflow: pip install 'babyvision-bv[mlflow]' (make test-trackers)")

from support.commands import BIN, sh
from support.optimizing import Models, command
from support.trackerserver import QUIET, SECRET, HostileTracker, MlflowServer, eval_line, free_port, history

PASSWORD = "Pa55-URIPASSWORD-5e6f"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = MlflowServer(tmp_path_factory.mktemp("mlflow-server"))
    running.start()
    yield running
    running.stop()


@pytest.fixture
def client(server):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=server.url)


def run_id(folder: Path) -> str:
    return json.loads((folder / "tracker.json").read_text())["mlflow"]["run_id"]


def test_two_evals_of_one_skill_file_name_with_different_texts_are_told_apart_by_the_skill_hash(
    tmp_path, sample_dir, server, client
):
    from bv import __version__

    runs = {}
    for n, text in enumerate(("Count the objects twice.", "Check whether the figure is symmetric.")):
        where = tmp_path / f"edit{n}"
        where.mkdir()
        (where / "hint1.md").write_text(text + "\n")
        out = tmp_path / f"run{n}"
        line = eval_line(sample_dir, out, f"mlflow:{server.url}", "skill-hash-test") + " --skill hint1.md"
        done = sh(line, cwd=where, env=QUIET, timeout=300)
        assert done.returncode == 0, done.stderr
        config = json.loads((out / "config.json").read_text())
        runs[config["skill_sha256"]] = (run_id(out), text, config["items_sha256"])
    assert len(runs) == 2
    experiment = client.get_experiment_by_name("skill-hash-test")
    for sha, (rid, text, items_sha) in runs.items():
        found = client.search_runs([experiment.experiment_id], filter_string=f"params.skill_sha256 = '{sha}'")
        assert [run.info.run_id for run in found] == [rid]
        params, tags = found[0].data.params, found[0].data.tags
        assert params["skill"] == "hint1.md" and params["items_sha256"] == items_sha
        assert params["model"] == "null" and params["mode"] == "rules"  # the chance backend: no model named
        assert tags["bv.version"] == __version__ and tags["bv.command"] == "eval"
        logged = Path(client.download_artifacts(rid, "skill/hint1.md", str(tmp_path / rid)))
        assert logged.read_text().strip() == text


def test_bv_eval_logs_its_config_figures_and_reports_and_a_rerun_continues_the_run(
    tmp_path, sample_dir, server, client
):
    out = tmp_path / "run"
    line = eval_line(sample_dir, out, f"mlflow:{server.url}", "eval-test")
    first = sh(line, env=QUIET, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "View run" not in first.stdout, "a tracker's words in bv's stdout"
    rid = run_id(out)
    assert f"tracker mlflow: run {rid} started ({server.url})" in first.stderr
    run = client.get_run(rid)
    report = json.loads(sh(f"bv report {out} --format json").stdout)["inputs"][0]
    print(
        "mlflow run", rid, run.info.status, len(run.data.params), "params", len(run.data.metrics), "metrics"
    )
    assert run.info.status == "FINISHED"
    params, metrics = run.data.params, run.data.metrics
    assert params["backend"] == "chance" and params["repeats"] == "2" and params["mode"] == "rules"
    assert params["judge_api_key_given"] == "true" and "jobs" not in params  # how it runs: not a param
    overall = report["overall"]
    assert metrics["accuracy"] == pytest.approx(overall["accuracy"])
    assert metrics["accuracy_ci95_low"] == pytest.approx(overall["ci95"][0])
    assert metrics["accuracy_ci95_high"] == pytest.approx(overall["ci95"][1])
    assert metrics["rows"] == 24 and metrics["prompt_tokens"] == report["usage"]["prompt_tokens"]
    for name, figures in report["by_type"].items():
        assert metrics[f"type/{name}/accuracy"] == pytest.approx(figures["accuracy"]), name
        assert metrics[f"type/{name}/accuracy_ci95_low"] == pytest.approx(figures["ci95"][0]), name
    artifacts = {a.path for a in client.list_artifacts(rid)}
    assert artifacts == {"report.md", "report.html", "config.json", "summary.json"}
    fetched = Path(client.download_artifacts(rid, "report.md", str(tmp_path)))
    assert fetched.read_bytes() == (out / "report.md").read_bytes()
    config = Path(client.download_artifacts(rid, "config.json", str(tmp_path))).read_text()
    assert (
        SECRET not in config and SECRET not in json.dumps(params) and SECRET not in json.dumps(run.data.tags)
    )

    again = sh(line, env=QUIET, timeout=300)  # the same folder: the same tracker run
    assert again.returncode == 0, again.stderr
    assert run_id(out) == rid and f"run {rid} continued" in again.stderr
    experiment = client.get_experiment_by_name("eval-test")
    assert [r.info.run_id for r in client.search_runs([experiment.experiment_id])] == [rid]
    assert client.get_run(rid).info.status == "FINISHED"


def test_a_server_that_is_down_costs_a_warning_never_the_evaluation(tmp_path, sample_dir):
    out = tmp_path / "run"
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = sh(eval_line(sample_dir, out, f"mlflow:{url}", "down"), env=QUIET, timeout=300)
    print(result.stderr.splitlines()[0][:200])
    assert result.returncode == 0, result.stderr
    assert f"warning: tracker mlflow ({url}) failed to start a run" in result.stderr
    assert "the run goes on without it" in result.stderr and "Traceback" not in result.stderr
    assert (out / "results.jsonl").exists() and (out / "report.md").exists()
    assert not (out / "tracker.json").exists()


def test_bv_optimize_logs_every_step_and_skill_and_a_resumed_run_continues_it(
    tmp_path, data_dir, server, client
):
    out = tmp_path / "opt"
    models = Models(data_dir)
    try:
        track = f"--track mlflow:{server.url} --track-project optimize-test"
        line = f"bv {command(data_dir, models, out, track)}"
        # stopped by SIGTERM after its first step (a finished run is not extended: its test split
        # has answered), then resumed to the end
        env = {**os.environ, **QUIET, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
        first = subprocess.Popen(["bash", "-c", f"exec {line}"], stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and first.poll() is None:
            if (out / "history.jsonl").exists() and len(history(out)) >= 2:
                break
            time.sleep(0.02)
        first.send_signal(signal.SIGTERM)
        stderr = first.communicate(timeout=120)[1]
        assert first.returncode == 143, stderr
        rid = run_id(out)  # the steps its tracker logged before the signal: checked below, with the rest
        rest = sh(line, env=QUIET, timeout=600)  # resumed: to the end
        assert rest.returncode == 0, rest.stderr
    finally:
        models.stop()
    assert run_id(out) == rid and f"run {rid} continued" in rest.stderr
    rows = history(out)
    steps = [row["step"] for row in rows]
    assert steps == list(range(len(rows))) and len(rows) > 2
    selection = client.get_metric_history(rid, "selection_accuracy")
    print("optimize steps logged:", [(m.step, round(m.value, 3)) for m in selection])
    assert [m.step for m in selection] == steps, "each step once, in order, across the two runs"
    best = {m.step: m.value for m in client.get_metric_history(rid, "best_accuracy")}
    assert best == {row["step"]: pytest.approx(row["best"]["accuracy"]) for row in rows}
    gated = [row for row in rows if row.get("gate")]
    p_values = {m.step: m.value for m in client.get_metric_history(rid, "gate_p_value")}
    assert p_values == {row["step"]: pytest.approx(row["gate"]["p_value"]) for row in gated}
    accepted = {m.step: m.value for m in client.get_metric_history(rid, "gate_accepted")}
    assert accepted == {row["step"]: float(row["gate"]["accepted"]) for row in gated}
    tokens = {m.step: m.value for m in client.get_metric_history(rid, "target/prompt_tokens")}
    assert tokens == {row["step"]: row["tokens"]["target"]["prompt_tokens"] for row in rows}
    skills = {a.path for a in client.list_artifacts(rid, "skills")}
    assert skills == {f"skills/{p.name}" for p in (out / "skills").iterdir()}
    top = {a.path for a in client.list_artifacts(rid)}
    assert {"best.md", "report.md", "report.html", "test.json"} <= top
    run = client.get_run(rid)
    test = json.loads((out / "test.json").read_text())
    assert run.data.metrics["test_best_accuracy"] == pytest.approx(test["best"]["accuracy"])
    assert run.info.status == "FINISHED" and run.data.params["target.model"]
    identity = json.loads((out / "run.json").read_text())  # one parameter per setting, and the split's hash
    assert run.data.params["options.alpha"] == json.dumps(identity["options"]["alpha"])
    assert len(run.data.params["split_sha256"]) == 64 and run.data.tags["bv.version"]
    assert "sk-test-target" not in json.dumps(run.data.params)


@pytest.mark.parametrize("given", ["track", "environment"])
def test_a_uri_password_is_in_no_file_artifact_or_output(tmp_path, sample_dir, server, client, given):
    """Given in `--track mlflow:URI` (a password too short to redact: it must never be given to
    MLflow in the URI) or MLFLOW_TRACKING_URI; MLflow itself prints "View run … at: URI"."""
    out = tmp_path / "run"
    password, uri = ("bob:pw@", server.url.replace("//", "//bob:pw@"))
    if given == "environment":
        password, uri = (PASSWORD, server.url.replace("//", f"//bob:{PASSWORD}@"))
    track, env = (
        (f"mlflow:{uri}", QUIET) if given == "track" else ("mlflow", {**QUIET, "MLFLOW_TRACKING_URI": uri})
    )
    result = sh(eval_line(sample_dir, out, track, "password-test"), env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "View run" in result.stderr and f"({server.url})" in result.stderr  # said, without the password
    rid = json.loads((out / "tracker.json").read_text())["mlflow"]["run_id"]
    assert client.get_run(rid).info.status == "FINISHED"
    artifact = Path(client.download_artifacts(rid, "config.json", str(tmp_path / "artifact"))).read_bytes()
    assert json.loads(artifact)["options"]["track"] == [
        f"mlflow:{server.url}" if given == "track" else "mlflow"
    ]
    assert password not in result.stdout + result.stderr
    written = [
        p for folder in (out, tmp_path / "artifact", server.folder) for p in folder.rglob("*") if p.is_file()
    ]
    holding = [str(p) for p in written if password.encode() in p.read_bytes()]
    assert not holding, f"the password in {holding}"


def test_the_default_store_is_the_local_sqlite_one_the_installed_mlflow_takes(tmp_path, sample_dir):
    """MLflow 3 refuses the file store ./mlruns ("maintenance mode"): `--track mlflow` logged nothing."""
    from mlflow.tracking import MlflowClient

    result = sh(eval_line(sample_dir, tmp_path / "run", "mlflow", "default-test"), cwd=tmp_path, env=QUIET)
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr, result.stderr
    store = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = store.search_runs([store.get_experiment_by_name("default-test").experiment_id])
    assert [r.info.status for r in runs] == ["FINISHED"] and runs[0].data.metrics["rows"] == 24
    assert {a.path for a in store.list_artifacts(runs[0].info.run_id)} == {
        "report.md",
        "report.html",
        "config.json",
        "summary.json",
    }


@pytest.mark.parametrize(
    ("spoil", "on", "said"),
    [
        ("huge", "get-by-name", "failed to start a run"),  # 2 GiB of body
        ("empty-id", "runs/create", "failed to start a run: it gave no valid run id ('')"),
        ("hang", "get-by-name", "failed to start a run: did not answer in 3 s"),
    ],
)
def test_a_hostile_tracker_costs_a_warning_and_seconds_never_the_run(tmp_path, sample_dir, spoil, on, said):
    tracker = HostileTracker(spoil, on)
    out = tmp_path / "run"
    began = time.monotonic()
    try:
        result = sh(
            eval_line(sample_dir, out, f"mlflow:{tracker.url}", "hostile"),
            env={**QUIET, "BV_TRACKER_WAIT_S": "3"},
        )
    finally:
        tracker.stop()
    took = time.monotonic() - began
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # bv's or its tracker's
    print(f"{spoil}: {took:.1f} s, peak {peak_mb:.0f} MB; {result.stderr.splitlines()[0][:200]}")
    assert result.returncode == 0, result.stderr
    assert tracker.hit.is_set() and f"tracker mlflow ({tracker.url}) {said}" in result.stderr
    assert "the run goes on without it" in result.stderr and "Traceback" not in result.stderr
    assert (out / "report.md").exists() and not (out / "tracker.json").exists()
    assert took < 40 and peak_mb < 1000


def test_sigterm_while_a_tracker_hangs_ends_the_run_in_seconds(tmp_path, sample_dir):
    """The results written, the tracker hangs on their metrics: SIGTERM waited 93 s while bv told
    the hung server the run was killed."""
    tracker = HostileTracker("hang", "accuracy_ci95_low")
    line = eval_line(sample_dir, tmp_path / "run", f"mlflow:{tracker.url}", "signal").split()
    env = {**os.environ, **QUIET, "BV_TRACKER_WAIT_S": "60", "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    bv = subprocess.Popen(line, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert tracker.hit.wait(120), "bv never logged the metrics"
        time.sleep(0.5)
        sent = time.monotonic()
        bv.send_signal(signal.SIGTERM)
        stderr = bv.communicate(timeout=60)[1]
        took = time.monotonic() - sent
    finally:
        bv.kill()
        tracker.stop()
    print(f"SIGTERM to exit: {took:.1f} s")
    assert bv.returncode == 143, stderr
    assert (tmp_path / "run" / "results.jsonl").exists()
    assert "failed to end the run: did not answer in 5 s" in stderr and took < 10


def test_a_step_logged_before_a_stop_could_record_it_is_not_logged_again(tmp_path, server, client):
    """A stop between the tracker taking a step and tracker.json saying so (the window CI once hit):
    the re-run asks the store which steps it holds instead of logging that step a second time."""
    from bv.tracking.options import TrackOptions
    from bv.tracking.tracker import STATE, open_tracking

    rows = [{"step": n, "accuracy": n / 10} for n in range(4)]

    def figures(rows):
        return [{"selection_accuracy": row["accuracy"]} for row in rows]

    options = TrackOptions(track=(f"mlflow:{server.url}",), track_project="window-test")
    first = open_tracking(tmp_path, options)
    first.start("window", {})
    first.steps(rows[:3], figures)
    first.finish("KILLED")
    state = json.loads((tmp_path / STATE).read_text())
    assert state["mlflow"]["steps"] == 2
    state["mlflow"]["steps"] = 0  # steps 1 and 2 were logged; the stop came before they were recorded
    (tmp_path / STATE).write_text(json.dumps(state))
    again = open_tracking(tmp_path, options)
    again.start("window", {})
    again.steps(rows, figures)
    again.finish("FINISHED")
    rid = state["mlflow"]["run_id"]
    logged = client.get_metric_history(rid, "selection_accuracy")
    assert sorted(m.step for m in logged) == [0, 1, 2, 3]
    assert json.loads((tmp_path / STATE).read_text())["mlflow"]["steps"] == 3
