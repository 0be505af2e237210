"""Report figures against hand-computed ones, and the report's CLI options."""

from __future__ import annotations

import json
import math

import pytest
import scipy.stats as scipy_stats
from support.commands import bv_inproc, jsonl

from bv.core.stats import estimate_over_items, pstdev, wilson
from bv.reporting.report import build_report, summarize


@pytest.mark.parametrize(
    "k,n,low,high",
    [(8, 10, 0.4902, 0.9433), (0, 10, 0.0, 0.2775), (10, 10, 0.7225, 1.0), (50, 100, 0.4038, 0.5962)],
)
def test_wilson_bounds(k, n, low, high):
    got = wilson(k, n)
    assert got[0] == pytest.approx(low, abs=1e-4) and got[1] == pytest.approx(high, abs=1e-4)


def rows(run: int, hards: list[int | None], **extra) -> list[dict]:
    return [
        {
            "id": str(i),
            "run": run,
            "hard": h,
            "type": "T" if i % 2 else "U",
            "subtype": f"S{i % 2}",
            "ans_type": "choice",
            "choices": [{"label": c, "text": c} for c in "ABCD"],
            "answer": ["A"],
            "decided_by": "rules" if h is not None else "error",
            "error": None,
            **extra,
        }
        for i, h in enumerate(hards)
    ]


def test_avg_at_k_is_the_mean_of_run_accuracies_with_population_std():
    data = rows(0, [1, 1, 0, 0]) + rows(1, [1, 1, 1, 0]) + rows(2, [1, 1, 1, 1])
    overall = summarize(data)["overall"]
    assert overall["per_run"] == [0.5, 0.75, 1.0]
    assert overall["accuracy"] == pytest.approx(0.75) and overall["std"] == pytest.approx(
        pstdev([0.5, 0.75, 1.0])
    )
    assert overall["std"] == pytest.approx(math.sqrt(1 / 24))
    # the interval is over items, each item's score its mean over the runs: 1, 1, 2/3, 1/3
    expected = estimate_over_items([1, 1, 2 / 3, 1 / 3], one_run=False)
    assert overall["ci95"] == [round(v, 6) for v in expected.ci95] and overall["se"] == round(expected.se, 6)
    assert overall["chance"] == 0.25 and (overall["n"], overall["rows"], overall["correct"]) == (4, 12, 9)


def test_errors_judge_errors_and_undecided_have_their_own_columns():
    data = rows(0, [1, None, 0, 0])
    data[2]["error"] = "HTTP 500 (gave up after 6 tries)"
    data[3]["undecided"] = True
    overall = summarize(data)["overall"]
    assert (overall["errors"], overall["judge_errors"], overall["undecided"]) == (1, 1, 1)
    assert overall["accuracy"] == pytest.approx(1 / 4)  # every failed row counts wrong, as officially
    exact = scipy_stats.binomtest(1, 4).proportion_ci(0.95, method="exact")  # one run: Clopper-Pearson
    assert overall["ci95"] == pytest.approx([exact.low, exact.high], abs=1e-6)
    finished = summarize(data, exclude_failed=True)
    assert finished["overall"]["accuracy"] == pytest.approx(1 / 1) and finished["overall"]["denominator"] == 1
    assert finished["accuracy_over"] == "finished rows (--exclude-failed)"


def test_paired_comparison_and_intersection():
    a = rows(0, [1, 1, 0, 0, 1])
    b = rows(0, [1, 0, 1, 1, 1, 0])  # one more item than a
    report, kept = build_report([("a", a), ("b", b)], keep_rows=True)
    pair = report["comparison"]["paired"]
    assert (pair["n_items"], pair["improved"], pair["regressed"], pair["unchanged"]) == (5, 2, 1, 2)
    assert (
        pair["p_value"] > 0.05
        and pair["ci95"][0] < 0 < pair["ci95"][1]
        and pair["improved_ids"] == ["2", "3"]
    )
    assert pair["diff"] == pytest.approx(1 / 5) and pair["method"].startswith(
        "Newcombe's paired score interval"
    )
    assert report["comparison"]["left_out"] == {"a": 0, "b": 1} and [len(list(k)) for k in kept] == [5, 5]
    assert report["inputs"][1]["overall"]["n"] == 5  # compared on the common items only


def write(path, data):
    path.write_text("".join(json.dumps(r) + "\n" for r in data))
    return path


def test_report_cli_side_by_side_with_paired_test(tmp_path):
    a = write(tmp_path / "a.jsonl", rows(0, [0] * 10 + [1] * 10))
    b = write(tmp_path / "b.jsonl", rows(0, [1] * 9 + [0] + [1] * 10 + [0]))
    table = bv_inproc(f"bv report v1={a} v2={b}")
    assert table.returncode == 0
    assert "v2 is better than v1 by 45.0 points (two-sided 95% CI +" in table.stdout
    assert (
        "on 20 items: 9 improved, 0 regressed, 11 unchanged (Newcombe's paired score interval" in table.stdout
    )
    assert "rows left out: v1 0, v2 1" in table.stdout
    report = json.loads(bv_inproc(f"bv report --format json v1={a} v2={b}").stdout)
    assert report["comparison"]["paired"]["p_value"] < 0.05
    markdown = bv_inproc(f"bv report --format markdown v1={a} v2={b}").stdout
    assert (
        "| **Overall** | 20 | 50.0 [27.2–72.8] | 95.0 [75.1–99.9] | +45.0 [+17.6, +65.5] | 0.0016 |"
        in markdown
    )
    assert "v2 is better than v1 by 45.0 points" in markdown


def test_fail_under_is_a_ci_gate(tmp_path):
    path = write(tmp_path / "r.jsonl", rows(0, [1, 0, 0, 0]))
    ok = bv_inproc(f"bv report --format json --fail-under 0.2 {path}")
    assert ok.returncode == 0
    low = bv_inproc(f"bv report --format json --fail-under 0.3 {path}")
    assert low.returncode == 1 and "overall accuracy 0.25 is below --fail-under 0.3" in low.stderr
    assert json.loads(low.stdout)["inputs"][0]["overall"]["accuracy"] == 0.25  # the report is still printed


@pytest.mark.parametrize("value", ["nan", "2", "30", "-0.1", "inf"])
def test_fail_under_outside_0_1_is_a_usage_error_before_any_work(tmp_path, value):
    missing = tmp_path / "not-there.jsonl"  # reading it would be an error of its own (exit 1)
    result = bv_inproc(f"bv report --fail-under {value} {missing}")
    assert result.returncode == 2 and "--fail-under" in result.stderr and "between 0 and 1" in result.stderr
    assert "not-there" not in result.stderr and result.stdout == ""


def test_table_notes_usage_per_input(tmp_path):
    data = rows(
        0,
        [1, 0],
        usage={"prompt_tokens": 1000, "completion_tokens": 50},
        latency_s=2.0,
        response="no box here",
        model="m1",
    )
    out = bv_inproc(f"bv report {write(tmp_path / 'r.jsonl', data)}").stdout
    assert "r: model m1; skill no skill; style bv; prompts bv's own; judge rules;" in out
    assert "; 2000 prompt + 100 completion tokens; mean latency 2.00 s per row; 2 replies without" in out


def test_html_option_writes_the_viewer(sample_dir, tmp_path):
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --backend chance | bv judge --mode rules"
        f" > {tmp_path}/r.jsonl && bv report {tmp_path}/r.jsonl --html {tmp_path}/out.html"
        f" --image-root {sample_dir}"
    )
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "out.html").read_text()
    assert page.count('class="card') >= len(jsonl((tmp_path / "r.jsonl").read_text()))
    assert "data:image/" in page and "wrote" in result.stderr


def test_made_by_of_reads_the_made_by_fields_in_order():
    """The read loop's made-by tuple, spelt out for speed, is the fields' values in their order."""
    from bv.reporting.report import _MADE_BY_FIELDS, made_by_of

    row = {name: f"v{i}" for i, name in enumerate(_MADE_BY_FIELDS)}
    assert made_by_of(row.get) == tuple(row[name] for name in _MADE_BY_FIELDS)
