"""`bv report` comparing inputs per item, as users type it: repeats are not independent pairs,
incomplete runs and different item sets are labelled (an error with --strict), provenance is side
by side with a warning, three inputs against a baseline, and --power."""

from __future__ import annotations

import csv
import io
import json
import math
import statistics

import pytest
import scipy.stats as scipy_stats
from support.commands import bv_inproc

from bv.core.power import PowerPlan


def row(i: int, run: int, hard: int, **extra) -> dict:
    return {
        "id": str(i),
        "run": run,
        "hard": hard,
        "type": f"T{i % 2}",
        "subtype": f"S{i % 4}",
        "ans_type": "choice",
        "choices": [{"label": c, "text": c} for c in "ABCD"],
        "answer": ["A"],
        "decided_by": "rules",
        "error": None,
        "model": "m1",
        "endpoint": "http://127.0.0.1:9/v1",
        "skill": {"name": "s", "sha256": "a" * 64},
        **extra,
    }


def write(path, data):
    path.write_text("".join(json.dumps(r) + "\n" for r in data))
    return str(path)


def issue_example(tmp_path) -> tuple[str, str]:
    """Issue 20: 40 items, 3 repeats at temperature 0; per item 6 improved and 3 regressed."""
    before, after = [], []
    for i in range(40):
        a, b = (0, 1) if i < 6 else (1, 0) if i < 9 else (i % 2, i % 2)
        for run in range(3):
            before.append(row(i, run, a))
            after.append(row(i, run, b, skill={"name": "s", "sha256": "b" * 64}))
    return write(tmp_path / "v1.jsonl", before), write(tmp_path / "v2.jsonl", after)


def test_the_issue_example_is_tested_per_item(tmp_path):
    v1, v2 = issue_example(tmp_path)
    result = bv_inproc(f"bv report v1={v1} v2={v2}")
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("v2 vs v1"))
    # the t test on 40 per-item differences (6 at +1, 3 at -1): p = 0.323, not 0.122 over 120 rows
    assert "no significant difference, +7.5 points" in line and "two-sided p = 0.323" in line, line
    assert "on 40 items: 6 improved, 3 regressed, 31 unchanged (t interval over per-item" in line
    data = json.loads(bv_inproc(f"bv report --format json v1={v1} v2={v2}").stdout)
    pair = data["comparison"]["paired"]
    diffs = [1.0] * 6 + [-1.0] * 3 + [0.0] * 31
    assert (
        pair["p_value"] == pytest.approx(scipy_stats.ttest_1samp(diffs, 0).pvalue) and pair["n_items"] == 40
    )
    half = scipy_stats.t.ppf(0.975, 39) * statistics.stdev(diffs) / math.sqrt(40)
    assert pair["ci95"] == pytest.approx([0.075 - half, 0.075 + half], abs=1e-5)
    assert data["comparison"]["differs"] == {"skill": ["s@aaaaaaaa", "s@bbbbbbbb"]}
    assert "differ in more" not in result.stderr  # the skill is the one thing compared


def test_repeats_of_identical_rows_do_not_narrow_the_report_interval(tmp_path):
    once = [row(i, 0, int(i % 3 == 0)) for i in range(30)]
    thrice = [dict(r, run=run) for r in once for run in range(3)]
    one = json.loads(bv_inproc(f"bv report --format json {write(tmp_path / 'a.jsonl', once)}").stdout)
    three = json.loads(bv_inproc(f"bv report --format json {write(tmp_path / 'b.jsonl', thrice)}").stdout)
    low1, high1 = one["inputs"][0]["overall"]["ci95"]
    low3, high3 = three["inputs"][0]["overall"]["ci95"]
    assert low3 <= low1 and high3 >= high1
    assert three["inputs"][0]["overall"]["std"] == 0.0  # no run-to-run spread, and still the width


def test_incomplete_runs_are_labelled_in_every_format_and_strict_fails(tmp_path):
    data = [row(i, run, 1) for run in range(3) for i in range(11) if not (run == 2 and i == 10)]
    path = write(tmp_path / "r.jsonl", data)
    table = bv_inproc(f"bv report {path}")
    assert table.returncode == 0
    assert (
        "incomplete: its runs cover different items (run 0 11, run 1 11, run 2 10, of 11 items)"
        in table.stderr
    )
    assert "incomplete" in table.stdout
    summary = json.loads(bv_inproc(f"bv report --format json {path}").stdout)["inputs"][0]
    assert summary["complete"] is False and summary["items_per_run"] == {"0": 11, "1": 11, "2": 10}
    assert "incomplete" in bv_inproc(f"bv report --format markdown {path}").stdout
    first = next(csv.DictReader(io.StringIO(bv_inproc(f"bv report --format csv {path}").stdout)))
    assert first["complete"] == "False" and first["items_per_run"] == "0:11 1:11 2:10"
    html = tmp_path / "r.html"
    bv_inproc(f"bv report {path} --html {html}")
    assert "incomplete: its runs cover different items" in html.read_text()
    strict = bv_inproc(f"bv report --strict {path}")
    assert strict.returncode == 1 and "error: r: incomplete" in strict.stderr


def test_inputs_with_different_items_and_other_differences_are_warned(tmp_path):
    a = write(tmp_path / "a.jsonl", [row(i, 0, 1) for i in range(10)])
    b = write(
        tmp_path / "b.jsonl",
        [
            row(i, 0, 0, endpoint="http://127.0.0.1:8/v1", skill={"name": "s", "sha256": "c" * 64})
            for i in range(8)
        ],
    )
    result = bv_inproc(f"bv report {a} {b}")
    assert "the inputs cover different rows (items: a 10, b 8); compared on the 8 items" in result.stderr
    assert "differ in more than the one thing compared (endpoint:" in result.stderr
    assert "skill: s@aaaaaaaa vs s@cccccccc" in result.stderr
    assert "endpoint http://127.0.0.1:8/v1" in result.stdout  # the footer, side by side
    assert bv_inproc(f"bv report --strict {a} {b}").returncode == 1


def test_three_inputs_each_against_the_baseline_adjusted(tmp_path):
    paths = [
        write(tmp_path / f"{name}.jsonl", [row(i, 0, int(i < right)) for i in range(20)])
        for name, right in (("base", 5), ("v2", 15), ("v3", 6))
    ]
    data = json.loads(bv_inproc(f"bv report --format json --baseline v2 {' '.join(paths)}").stdout)
    comparison = data["comparison"]
    assert comparison["baseline"] == "v2" and [(p["a"], p["b"]) for p in comparison["pairs"]] == [
        ("v2", "base"),
        ("v2", "v3"),
    ]
    assert "over the 2 comparisons" in comparison["adjustment"]
    raw = [p["p_value"] for p in comparison["pairs"]]
    assert [p["p_adjusted"] for p in comparison["pairs"]] == pytest.approx(_holm(raw))
    table = bv_inproc(f"bv report --baseline v2 --adjust bh {' '.join(paths)}").stdout
    assert "base is worse than v2 by 50.0 points" in table and "Benjamini-Hochberg-adjusted" in table
    missing = bv_inproc(f"bv report --baseline nope {' '.join(paths)}")
    assert missing.returncode == 1 and "--baseline nope: no input of that name" in missing.stderr


def _holm(p: list[float]) -> list[float]:
    """Holm for two p-values, by hand: the smaller times 2, the larger at least that."""
    low, high = sorted(p)
    adjusted = {low: min(1, 2 * low), high: max(min(1, 2 * low), min(1, high))}
    return [adjusted[x] for x in p]


def test_power_from_the_data(tmp_path):
    v1, v2 = issue_example(tmp_path)
    data = json.loads(bv_inproc(f"bv report --format json --power v1={v1} v2={v2}").stdout)
    (plan,) = data["power"]
    diffs = [1.0] * 6 + [-1.0] * 3 + [0.0] * 31
    z = statistics.NormalDist().inv_cdf(0.975) + statistics.NormalDist().inv_cdf(0.8)
    assert plan["var_diff"] == pytest.approx(statistics.variance(diffs), abs=1e-6)
    assert plan["mde"] == pytest.approx(z * math.sqrt(statistics.variance(diffs) / 40), abs=1e-6)
    assert plan["items_needed"]["5"] == math.ceil(z**2 * statistics.variance(diffs) / 0.05**2)
    assert plan["runs_needed"]["5"] is None  # identical repeats: more of them cannot help
    expected = PowerPlan(40, 3, statistics.variance(diffs), 0.0)
    assert plan["items_needed"]["3"] == expected.items_for(0.03)
    table = bv_inproc(f"bv report --power v1={v1} v2={v2}").stdout
    assert f"detect a difference of {100 * plan['mde']:.1f} points" in table


def test_clustered_interval_and_difference_columns_in_csv(tmp_path):
    v1, v2 = issue_example(tmp_path)
    data = json.loads(bv_inproc(f"bv report --format json --cluster subtype {v1}").stdout)
    assert "clustered by subtype" in data["inputs"][0]["interval"]
    lines = list(csv.DictReader(io.StringIO(bv_inproc(f"bv report --format csv v1={v1} v2={v2}").stdout)))
    overall = next(x for x in lines if x["input"] == "v2" and x["level"] == "overall")
    assert overall["vs"] == "v1" and float(overall["diff"]) == pytest.approx(0.075)
    assert float(overall["diff_low"]) < 0 < float(overall["diff_high"]) and overall["improved"] == "6"
    assert next(x for x in lines if x["input"] == "v1")["diff"] == ""


def test_power_at_one_run_says_the_noise_cannot_be_estimated(tmp_path):
    """Issue 33: at one run --power said "no number of runs on these items" (26 runs suffice for
    Bernoulli items); the noise is unknown from one run, and it says so."""
    a = write(tmp_path / "a.jsonl", [row(i, 0, i % 2) for i in range(40)])
    b = write(tmp_path / "b.jsonl", [row(i, 0, int(i % 3 == 0)) for i in range(40)])
    result = bv_inproc(f"bv report --power v1={a} v2={b}")
    line = next(x for x in (result.stdout + result.stderr).splitlines() if x.startswith("Power,"))
    assert "run-to-run noise cannot be estimated from one run per item" in line, line
    assert "no number of runs" not in line


def test_cluster_applies_to_the_difference_too(tmp_path):
    """Issue 33: `--cluster subtype` clustered each accuracy's standard error but the paired
    difference stayed unclustered, silently. Now the difference is clustered too, by the items'
    subtypes (4 here: t at 3 degrees of freedom), overall and in each type spanning several."""
    v1, v2 = issue_example(tmp_path)
    plain = json.loads(bv_inproc(f"bv report --format json v1={v1} v2={v2}").stdout)["comparison"]["paired"]
    result = bv_inproc(f"bv report --cluster subtype --format json v1={v1} v2={v2}")
    paired = json.loads(result.stdout)["comparison"]["paired"]
    assert "standard error clustered over 4 clusters" in paired["method"] and "df 3" in paired["method"]
    diffs = [1.0] * 6 + [-1.0] * 3 + [0.0] * 31
    clusters = [f"S{i % 4}" for i in range(40)]
    sums = {c: 0.0 for c in set(clusters)}
    for d, c in zip(diffs, clusters, strict=True):
        sums[c] += d - statistics.mean(diffs)
    se = math.sqrt(4 / 3 * sum(s * s for s in sums.values())) / 40  # Miller eq. 4, by hand
    half = scipy_stats.t.ppf(0.975, 3) * se
    assert paired["ci95"] == pytest.approx([0.075 - half, 0.075 + half], abs=1e-5)
    assert paired["ci95"] != plain["ci95"]
    # each type (T0, T1) holds two subtypes: clustered over 2, so t at 1 degree of freedom
    by_type = paired["by_type"]["T0"]
    assert by_type["ci95"] is not None
    text = bv_inproc(f"bv report --cluster subtype v1={v1} v2={v2}").stdout
    assert "clustered over 4 clusters" in text


def test_avg_at_k_outside_its_interval_is_explained(tmp_path):
    """Issue 33: runs over different items (run 0: 8 items, 1 right; run 1: 2 other items, both
    right) printed Avg@k 56.2% beside an interval of the item-level accuracy, 30%, unexplained."""
    data = [row(i, 0, int(i == 0)) for i in range(8)] + [row(i, 1, 1) for i in (8, 9)]
    path = write(tmp_path / "r.jsonl", data)
    overall = json.loads(bv_inproc(f"bv report --format json {path}").stdout)["inputs"][0]["overall"]
    assert overall["accuracy"] == pytest.approx((1 / 8 + 1) / 2) and overall["item_accuracy"] == 0.3
    low, high = overall["ci95"]
    assert low < 0.3 < high  # the interval is the item-level accuracy's
    table = bv_inproc(f"bv report {path}")
    assert "(Avg@k 56.2%, the item-level accuracy the interval is of 30.0%)" in table.stdout


def test_a_verdict_prints_enough_digits_to_agree_with_itself(tmp_path):
    """66 items, b alone right on 15, a alone on 6: p = 0.049990 and the interval's lower end
    +0.0006 points. Rounded, the verdict read "better … (two-sided 95% CI +0.0 to +26.8;
    two-sided p = 0.05)": a boundary result to the eye. Text, Markdown and HTML now agree with it."""
    before = [row(i, 0, int(i < 6)) for i in range(66)]
    after = [row(i, 0, int(6 <= i < 21), skill={"name": "s", "sha256": "b" * 64}) for i in range(66)]
    v1, v2 = write(tmp_path / "v1.jsonl", before), write(tmp_path / "v2.jsonl", after)
    text = bv_inproc(f"bv report v1={v1} v2={v2}").stdout
    assert (
        "v2 is better than v1 by 13.6 points (two-sided 95% CI +0.001 to +26.8; two-sided p = 0.04999)"
        in text
    )
    markdown = bv_inproc(f"bv report v1={v1} v2={v2} --format markdown").stdout
    assert (
        "| **Overall** | 66 | 9.1 [3.4–18.7] | 22.7 [13.3–34.7] | +13.6 [+0.001, +26.8] | 0.04999 |"
        in markdown
    )
    page = tmp_path / "r.html"
    assert bv_inproc(f"bv report v1={v1} v2={v2} --html {page}").returncode == 0
    assert "+13.6 [+0.001, +26.8] p=0.04999" in page.read_text()
