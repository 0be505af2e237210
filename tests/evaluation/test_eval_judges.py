"""`bv eval` with a panel of two loopback judges and with `--calibrate`: the run folder's
config.json records the judges (never their keys), report.md gives the panel's agreement and
the judge's measured errors, as bv judge's rows do."""

from __future__ import annotations

import json

import pytest
from support.commands import sh
from support.fakeopenai import FakeOpenAI, Reply


@pytest.fixture
def judges():
    servers = [
        FakeOpenAI(lambda seen: Reply(content="True")),
        FakeOpenAI(lambda seen: Reply(content="False")),
    ]
    for server in servers:
        server.start()
    yield servers
    for server in servers:
        server.stop()


def test_a_panel_in_bv_eval(tmp_path, sample_dir, judges):
    a, b = judges
    out = tmp_path / "run"
    result = sh(
        f"bv eval {sample_dir}/meta_data.jsonl --backend chance -o {out} --mode llm --no-cache"
        f" --judge-model yes --judge-base-url {a.base_url} --judge-model no --judge-base-url {b.base_url}"
        " --judge-api-key sk-test-panel-0123456789 --panel any"
    )
    assert result.returncode == 0, result.stderr
    options = json.loads((out / "config.json").read_text())["options"]
    assert options["judge_model"] == ["yes", "no"] and options["panel"] == "any"
    assert "sk-test-panel" not in (out / "config.json").read_text()
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert all(row["hard"] == 1 and row["judge_model"] == "any of yes, no" for row in rows)  # any: yes wins
    report = (out / "report.md").read_text()
    # one judge always says right, the other never: no agreement, none beyond chance either
    assert (
        f"judge panel (any of yes, no): Cohen's kappa 0.000 over {len(rows)} rows (they agree on 0.0%)"
        in report
    )
    assert f"the judges disagree on {len(rows)} rows" in report


def test_calibrate_in_bv_eval(tmp_path, sample_dir, judges):
    a, _ = judges
    out = tmp_path / "run"
    result = sh(
        f"bv eval {sample_dir}/meta_data.jsonl --backend chance --repeats 2 -o {out} --no-cache"
        f" --judge-model yes --judge-base-url {a.base_url} --calibrate 1"
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    checked = [row for row in rows if "judge_calibration" in row]
    assert checked and all(row["decided_by"] == "rules" for row in checked)
    wrong = sum(row["hard"] == 0 for row in checked)
    report = (out / "report.md").read_text()
    assert "specificity 0.0% [0.0–" in report and f"({wrong} wrong rows)" in report  # it calls all right
