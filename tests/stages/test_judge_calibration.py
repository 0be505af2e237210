"""`--calibrate`: a loopback LLM judge with known errors (lenient on some wrong rows, harsh on
some right ones) also judges rows the rules decided; bv report gives its sensitivity and
specificity as counted here, and the LLM-judged rows' accuracy corrected (Rogan–Gladen) beside
the uncorrected one, its interval wider. The sample is fixed by each row's id and run."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from support.commands import sh
from support.fakeopenai import FakeOpenAI, Reply

CHOICE, BLANK = 80, 40  # rows the rules decide (half right), rows they cannot


def right(i: int) -> bool:  # a choice row's truth, as the rules find it
    return i % 2 == 0


def judge_says(i: int) -> bool:
    if i >= CHOICE:  # an undecided blank row: the judge's call is all there is
        return i % 3 != 0
    if right(i):
        return i % 10 != 0  # misses one right row in five
    return i % 6 == 1  # lets one wrong row in three pass


def reply(seen) -> Reply:
    i = int(re.search(r"Question (\d+)", seen.body["messages"][0]["content"]).group(1))
    return Reply(content="True" if judge_says(i) else "False", usage=(50, 1))


@pytest.fixture
def judge():
    server = FakeOpenAI(reply)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def rows(tmp_path):
    lines = []
    for i in range(CHOICE + BLANK):
        row = {"id": f"q{i}", "run": 0, "question": f"Question {i}: which one?", "type": "T", "subtype": "S",
               "model": "m", "error": None}  # fmt: skip
        if i < CHOICE:
            row |= {
                "ans_type": "choice",
                "choices": [{"label": "A", "text": "red"}, {"label": "B", "text": "blue"}],
                "answer": ["A"],
            }
            row["response"] = "\\boxed{A}" if right(i) else "\\boxed{B}"
        else:
            row |= {"ans_type": "blank", "choices": [], "answer": ["cat"], "response": "\\boxed{dog}"}
        lines.append(json.dumps(row) + "\n")
    path = tmp_path / "rollouts.jsonl"
    path.write_text("".join(lines))
    return path


def test_the_judge_measured_on_rule_decided_rows_corrects_its_own_rows(tmp_path, judge, rows):
    out = tmp_path / "judged.jsonl"
    result = sh(
        f"bv judge --judge-model j --judge-base-url {judge.base_url} --judge-api-key k --calibrate 1"
        f" --no-cache {rows} > {out}"
    )
    assert result.returncode == 0, result.stderr
    judged = [json.loads(line) for line in out.read_text().splitlines()]
    for i, row in enumerate(judged[:CHOICE]):
        assert row["decided_by"] == "rules" and row["hard"] == right(i)  # the rules' verdict stays
        assert row["judge_calibration"]["hard"] == judge_says(i)
    assert all(row["decided_by"] == "llm" and "judge_calibration" not in row for row in judged[CHOICE:])
    c = json.loads(sh(f"bv report {out} --format json").stdout)["inputs"][0]["judge_calibration"]
    tp = sum(right(i) and judge_says(i) for i in range(CHOICE))
    tn = sum(not right(i) and not judge_says(i) for i in range(CHOICE))
    sens, spec = tp / (CHOICE / 2), tn / (CHOICE / 2)
    said = sum(judge_says(i) for i in range(CHOICE, CHOICE + BLANK)) / BLANK
    corrected = (said + spec - 1) / (sens + spec - 1)  # Rogan–Gladen, computed here
    print(f"sensitivity {c['sensitivity']} specificity {c['specificity']}; judged {c['judged_accuracy']}"
          f" {c['judged_ci95']}, corrected {c['corrected_accuracy']} {c['corrected_ci95']}")  # fmt: skip
    assert (c["rows"], c["positives"], c["negatives"]) == (CHOICE, CHOICE // 2, CHOICE // 2)
    assert c["sensitivity"] == pytest.approx(sens) and c["specificity"] == pytest.approx(spec)
    assert c["sensitivity_ci95"][0] < sens < c["sensitivity_ci95"][1]
    assert c["judged_rows"] == BLANK and c["judged_accuracy"] == pytest.approx(said)
    assert c["corrected_accuracy"] == pytest.approx(min(1.0, corrected), abs=1e-6)
    lo, hi = c["corrected_ci95"]
    assert hi - lo > c["judged_ci95"][1] - c["judged_ci95"][0]  # the calibration's uncertainty widens it
    assert c["answer_types"] == {"calibration": {"choice": CHOICE}, "judged": {"blank": BLANK}}
    shown = sh(f"bv report {out} --format markdown").stdout
    assert "LLM judge j checked on 80 rows the rules decided: sensitivity" in shown
    assert "answer types: calibration choice 80; judged blank 40" in shown


def test_the_sample_is_fixed_by_id_and_run(tmp_path, judge, rows):
    share = 0.3
    runs = []
    for attempt in range(2):
        out = tmp_path / f"judged{attempt}.jsonl"
        result = sh(
            f"bv judge --judge-model j --judge-base-url {judge.base_url} --calibrate {share} {rows} > {out}"
        )
        assert result.returncode == 0, result.stderr
        runs.append(
            {r["id"] for r in map(json.loads, out.read_text().splitlines()) if "judge_calibration" in r}
        )
    expected = {
        f"q{i}"
        for i in range(CHOICE)
        if int.from_bytes(hashlib.sha256(f"q{i}\0{0}".encode()).digest()[:8], "big") < share * 2**64
    }
    assert runs[0] == runs[1] == expected and 10 < len(expected) < 40


def test_calibrate_needs_auto_mode_and_one_judge(rows):
    result = sh(
        f"bv judge --mode llm --judge-model j --judge-base-url http://127.0.0.1:9/v1 --calibrate 0.2 {rows}"
    )
    assert result.returncode == 2 and "--calibrate" in result.stderr


def test_a_calibration_that_checked_nothing_says_why(tmp_path, judge, rows):
    """No row the rules decided: --calibrate checked nothing and nothing at all was said. And a
    judge that fails on every calibration row read "checked on 0 rows … answer types: ", with
    no word of the rows it failed on."""
    blanks = tmp_path / "blanks.jsonl"
    blanks.write_text("".join(rows.read_text().splitlines(keepends=True)[CHOICE:]))
    none = sh(
        f"bv judge --judge-model j --judge-base-url {judge.base_url} --calibrate 1 --no-cache -q {blanks}"
    )
    assert none.returncode == 0, none.stderr
    assert (
        "bv judge: warning: --calibrate 1 checked no row: the rules decided none of the 40 rows"
        in none.stderr
    ), none.stderr

    judge.responder = lambda seen: Reply(content="Perhaps", usage=(50, 1))
    choices = tmp_path / "choices.jsonl"
    choices.write_text("".join(rows.read_text().splitlines(keepends=True)[:CHOICE]))
    out = tmp_path / "judged.jsonl"
    line = f"bv judge --judge-model j --judge-base-url {judge.base_url} --calibrate 1 --no-cache"
    failed = sh(f"{line} {choices} > {out}")
    assert failed.returncode == 0, failed.stderr
    shown = sh(f"bv report {out}").stdout
    assert "LLM judge j could not be checked: it failed on all 80 calibration rows" in shown, shown
    assert "checked on 0 rows" not in shown and "answer types" not in shown


def tally(rows: list[tuple[str, int]]):
    """bv report's judge tally of LLM-judged rows (item, verdict), beside 20 calibration rows."""
    from bv.reporting.judges import JudgeTally

    judges = JudgeTally()
    for i in range(20):
        checked = {"model": "j", "hard": int(i % 4 != 0)}
        judges.add(
            {"decided_by": "rules", "hard": int(i % 2 == 0), "judge_calibration": checked}.get, f"c{i}", 0
        )
    for item, hard in rows:
        judges.add({"decided_by": "llm", "hard": hard, "ans_type": "blank"}.get, item, 0)
    return judges.calibration()


def test_the_accuracy_as_judged_has_an_exact_interval():
    """Its interval was Wald's (85-92.6% coverage at 40-200 rows): now Clopper-Pearson's, from
    scipy's beta quantiles here; with repeats, at the effective sample size p(1-p)/SE², SE
    clustered by item (computed here with numpy)."""
    import numpy as np
    from scipy.stats import beta

    single = tally([(f"q{i}", int(i % 5 != 0)) for i in range(40)])  # 32 of 40 right
    assert single is not None
    assert single["judged_ci95"] == pytest.approx([beta.ppf(0.025, 32, 9), beta.ppf(0.975, 33, 8)], abs=1e-6)

    def said(i: int, run: int) -> int:  # an item's runs mostly agree: n_eff (47) below the 90 rows
        return int(i % 5 != 0) if run < 2 or i % 3 else int(i % 5 == 0)

    verdicts = [(f"q{i}", said(i, run)) for i in range(30) for run in range(3)]
    repeated = tally(verdicts)
    assert repeated is not None
    hard = np.array([h for _, h in verdicts], dtype=float)
    p = hard.mean()
    sums = np.array([sum(h - p for item, h in verdicts if item == f"q{i}") for i in range(30)])
    se = np.sqrt(30 / 29 * (sums**2).sum()) / len(hard)
    n_eff = p * (1 - p) / se**2
    assert 40 < n_eff < len(hard)
    x = p * n_eff
    expected = [beta.ppf(0.025, x, n_eff - x + 1), beta.ppf(0.975, x + 1, n_eff - x)]
    assert repeated["judged_ci95"] == pytest.approx(expected, abs=1e-6)
