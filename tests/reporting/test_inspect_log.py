"""`bv export --format inspect` (bv/reporting/inspect_log.py): a `bv eval` run as an inspect_ai eval
log, read back by inspect's own `read_eval_log` and served by `inspect view` to headless Chromium.

inspect-ai is heavy: `make test-interop` installs it into .venv-interop and runs this file; under
`make test` the tests that need it skip and say so."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import pytest
from support.browser import Browser, find_chromium
from support.commands import BIN, sh
from support.paths import ROOT


@pytest.fixture(scope="module")
def run(sample_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `bv eval` run folder, offline: the chance backend, 2 repeats, judged by the rules."""
    out = tmp_path_factory.mktemp("inspect") / "run"
    result = sh(f"bv eval {sample_dir}/meta_data.jsonl --backend chance --repeats 2 --mode rules -o {out}")
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def exported(run: Path, inspect_log) -> Path:
    out = run.parent / "logs" / "run.eval"
    result = sh(f"bv export {run} --format inspect -o {out}")
    assert result.returncode == 0, result.stderr
    assert f"wrote {out} (24 samples)" in result.stderr
    return out


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


def test_every_row_is_a_sample_inspect_reads_back_with_its_score(run, exported, inspect_log):
    log = inspect_log.read_eval_log(str(exported), resolve_attachments=True)  # the image: an attachment
    rows = {(row["id"], row["run"]): row for row in _rows(run)}
    samples = {(sample.id, sample.epoch - 1): sample for sample in log.samples}
    assert samples.keys() == rows.keys() and len(log.samples) == 24  # epoch = run + 1
    for key, row in rows.items():
        sample = samples[key]
        score = sample.scores["bv_judge"]
        assert score.value == ("C" if row["hard"] == 1 else "I")
        assert score.answer == row["extracted"]
        assert score.explanation == (row["judge_reply"] or row["judge_reason"])
        assert sample.output.completion == row["response"]
        assert sample.target == row["answer"][0]
        if row["ans_type"] == "choice":
            assert sample.choices == [c["text"] for c in row["choices"]]
        images = [
            part.image
            for m in sample.input
            if not isinstance(m.content, str)
            for part in m.content
            if part.type == "image"
        ]
        assert len(images) == 1 and images[0].startswith("data:image/")
    assert log.eval.task == "babyvision" and log.eval.model == "chance"
    assert log.eval.config.epochs == 2
    assert log.eval.task_args == {"skill": "no skill"}
    assert log.eval.packages["babyvision-bv"] and log.eval.metadata["mapping"] == 1


def test_the_log_holds_the_accuracy_bv_reports(run, exported, inspect_log):
    report = json.loads(sh(f"bv report {run} --format json").stdout)["inputs"][0]["overall"]
    metrics = inspect_log.read_eval_log(str(exported), header_only=True).results.scores[0].metrics
    assert metrics["accuracy"].value == pytest.approx(report["accuracy"], abs=1e-6)
    assert metrics["stderr"].value == pytest.approx(report["se"], abs=1e-6)
    dumped = json.loads(sh(f"{BIN}/inspect log dump --header-only {exported}").stdout)
    assert dumped["results"]["scores"][0]["metrics"]["accuracy"]["value"] == pytest.approx(
        report["accuracy"], abs=1e-6
    )


def test_rows_of_two_models_are_refused(run, tmp_path, inspect_log):
    rows = _rows(run)
    rows[0]["model"] = "other"
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = sh(f"bv export {mixed} --format inspect -o {tmp_path}/x.eval")
    assert result.returncode == 1 and "rows of 2 models (chance, other)" in result.stderr
    assert not (tmp_path / "x.eval").exists()


def test_without_inspect_ai_the_message_names_the_extra(run, tmp_path, without_inspect):
    result = sh(f"bv export {run} --format inspect -o {tmp_path}/x.eval", env=without_inspect)
    assert result.returncode == 2, result.stderr
    assert "pip install 'babyvision-bv[inspect]'" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "x.eval").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_inspect_view_shows_the_samples(run, exported, inspect_log):
    if find_chromium() is None:
        pytest.skip("no Chromium (make test-interop installs it as root on Debian)")
    port = _free_port()
    view = subprocess.Popen(
        [
            f"{BIN}/inspect",
            "view",
            "start",
            "--log-dir",
            str(exported.parent),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert view.poll() is None and time.monotonic() < deadline, view.stderr and view.stderr.read()
                time.sleep(0.2)
        with Browser(timeout=60) as browser:
            browser.open(f"http://127.0.0.1:{port}/#/tasks/{exported.name}/samples", width=1400, height=2400)
            links = "Array.from(document.querySelectorAll('a[href*=\"/samples/sample/\"]')).map(a => a.href)"
            expected = {f"/samples/sample/{row['id']}/{row['run'] + 1}/" for row in _rows(run)}
            shown: set[str] = set()
            while time.monotonic() < deadline + 30:
                shown = {href[href.index("/samples/sample/") :] for href in browser.evaluate(links) or []}
                if expected <= shown:
                    break
                time.sleep(0.5)
            text = browser.evaluate("document.body.innerText")
            screenshot = ROOT / "build" / "inspect-view.png"
            browser.screenshot(screenshot)
            print(f"inspect view screenshot: {screenshot}")
        assert expected <= shown, f"samples not shown: {sorted(expected - shown)[:5]}"
        assert "babyvision" in text and "chance" in text and "24 Samples" in text
    finally:
        view.terminate()
        view.wait(timeout=20)
