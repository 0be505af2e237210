"""A panel of LLM judges: two loopback judges (each its own server and key) that disagree on a
known set of rows; the row keeps each verdict, the rule makes `hard`, and bv report gives the
panel's Cohen's κ as computed here independently, with the rows they disagree on."""

from __future__ import annotations

import json
import re

import pytest
from support.commands import sh
from support.fakeopenai import FakeOpenAI, Reply

from bv.reporting.report_types import PanelSummary

N = 30
UNSURE = 7  # judge B's reply on this row is no verdict: the panel's row is a judge error


def says_a(i: int) -> bool:
    return i % 2 == 0


def says_b(i: int) -> bool:
    return i % 3 == 0


def judge(says, name: str):
    def reply(seen) -> Reply:
        i = int(re.search(r"Question (\d+)", seen.body["messages"][0]["content"]).group(1))
        if name == "b" and i == UNSURE:
            return Reply(content="Perhaps", usage=(100, 1))
        return Reply(content="True" if says(i) else "False", usage=(100 + i, 1))

    return reply


@pytest.fixture
def judges():
    a, b = FakeOpenAI(judge(says_a, "a")), FakeOpenAI(judge(says_b, "b"))
    a.start(), b.start()
    yield a, b
    a.stop(), b.stop()


@pytest.fixture
def rows(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    lines = []
    for i in range(N):  # blank items the rules cannot decide ("dog" against "cat")
        lines.append(
            {"id": f"q{i}", "run": 0, "question": f"Question {i}: what animal?", "ans_type": "blank",
             "choices": [], "answer": ["cat"], "type": "T", "subtype": "S", "model": "m",
             "response": "It is \\boxed{dog}", "error": None}
        )  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def cohen_closed_form(a: list[int], b: list[int]) -> float:
    """κ from the 2×2 table alone: 2(ad − bc) / ((a+b)(b+d) + (a+c)(c+d)) (an independent form)."""
    both = sum(x and y for x, y in zip(a, b, strict=True))
    only_a = sum(x and not y for x, y in zip(a, b, strict=True))
    only_b = sum(y and not x for x, y in zip(a, b, strict=True))
    neither = len(a) - both - only_a - only_b
    num = 2 * (both * neither - only_a * only_b)
    return num / ((both + only_a) * (only_a + neither) + (both + only_b) * (only_b + neither))


@pytest.mark.parametrize("rule", ["majority", "any"])
def test_two_judges_disagreeing_on_known_rows_give_the_kappa_computed_independently(
    tmp_path, judges, rows, rule
):
    a, b = judges
    out = tmp_path / "judged.jsonl"
    result = sh(
        f"bv judge --judge-model judge-a --judge-base-url {a.base_url} --judge-api-key sk-test-aaaa"
        f" --judge-model judge-b --judge-base-url {b.base_url} --judge-api-key sk-test-bbbb"
        f" --panel {rule} --no-cache {rows} > {out}"
    )
    assert result.returncode == 1, result.stderr  # the one row judge B could not judge
    judged = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(judged) == N
    assert {s.headers.get("authorization") for s in a.seen} == {"Bearer sk-test-aaaa"}
    assert {s.headers.get("authorization") for s in b.seen} == {"Bearer sk-test-bbbb"}
    for i, row in enumerate(judged):
        panel = row["judge_panel"]
        assert [v["model"] for v in panel] == ["judge-a", "judge-b"] and row["judge_panel_rule"] == rule
        assert panel[0]["hard"] == says_a(i)
        if i == UNSURE:
            assert row["hard"] is None and row["decided_by"] == "error" and panel[1]["hard"] is None
            assert row["judge_error"].startswith("judge-b: ")
            continue
        assert panel[1]["hard"] == says_b(i)
        both = [says_a(i), says_b(i)]
        assert row["hard"] == (all(both) if rule == "majority" else any(both)), i
        assert row["judge_usage"]["prompt_tokens"] == 2 * (100 + i)
    data = json.loads(sh(f"bv report {out} --format json").stdout)
    report = data["inputs"][0]["judge_panel"]
    assert set(report) == set(PanelSummary.__annotations__)  # its typed (and documented) keys
    kept = [i for i in range(N) if i != UNSURE]
    va, vb = [int(says_a(i)) for i in kept], [int(says_b(i)) for i in kept]
    expected = cohen_closed_form(va, vb)
    print(f"{rule}: kappa {report['kappa']} (independent {expected:.6f}), {report['disagreements']} apart")
    assert report["method"] == "Cohen's kappa" and report["rows"] == N - 1 and report["judge_errors"] == 1
    assert report["kappa"] == pytest.approx(expected, abs=1e-6)
    disagree = [f"q{i}#0" for i in kept if says_a(i) != says_b(i)]
    assert report["disagreeing_rows"] == disagree and report["disagreements"] == len(disagree)
    assert report["right_share"] == pytest.approx([sum(va) / len(kept), sum(vb) / len(kept)], abs=1e-6)
    shown = sh(f"bv report {out} --format markdown").stdout
    assert f"judge panel ({rule} of judge-a, judge-b): Cohen's kappa {expected:.3f} over 29 rows" in shown
    assert f"the judges disagree on {len(disagree)} rows (id#run): {', '.join(disagree)}" in shown


def test_a_panel_needs_one_url_and_key_per_judge_or_one_for_all(tmp_path, rows):
    result = sh(
        f"bv judge --judge-model a --judge-model b --judge-model c --judge-base-url http://127.0.0.1:9/v1"
        f" --judge-base-url http://127.0.0.1:9/v1 --judge-api-key k {rows}"
    )
    assert result.returncode == 2 and "3 --judge-model and 2 --judge-base-url" in result.stderr


def test_a_judge_that_fails_every_row_leaves_kappa_undefined_for_that_reason(tmp_path, judges, rows):
    """Judge B gives no verdict on any row: no row counts, and the report said "Fleiss' kappa
    undefined (every judge said the same of every row) over 0 rows" of a two-judge panel."""
    a, b = judges
    b.responder = lambda seen: Reply(content="Perhaps", usage=(100, 1))
    out = tmp_path / "judged.jsonl"
    sh(
        f"bv judge --judge-model judge-a --judge-base-url {a.base_url} --judge-model judge-b"
        f" --judge-base-url {b.base_url} --judge-api-key sk-test --no-cache -q {rows} > {out}"
    )
    shown = sh(f"bv report {out}").stdout
    assert (
        "judge panel (majority of judge-a, judge-b): Cohen's kappa undefined (no row has a verdict"
        " from every judge) over 0 rows" in shown
    ), shown
    assert f"left out of the agreement: {N} rows some judge could not judge" in shown
