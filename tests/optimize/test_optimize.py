"""`bv optimize` end to end against loopback models (tests/support/skillserver.py): the loop lifts test
accuracy from chance to the ceiling, the gate refuses the harmful edit, a malformed reply and an
operation on absent text are named in the history, and a kill -9 between steps resumes with no
paid request sent twice."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.commands import bv_inproc
from support.fakeopenai import FakeOpenAI, Reply
from support.optimizing import SEED_SKILL, SUBTYPES, Models, command, finished_steps, start_bv
from support.paths import SUPPORT
from support.skillserver import hint

from bv.core.stats import dollars


@pytest.fixture
def models(data_dir):
    running = Models(data_dir)
    yield running
    running.stop()


def history(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]


def test_the_loop_lifts_test_accuracy_and_gates_out_the_harmful_edit(data_dir, models, tmp_path):
    out = tmp_path / "run"
    done = bv_inproc("bv " + command(data_dir, models, out))
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "test.json").read_text())
    assert result["seed"]["accuracy"] < 0.35  # chance: a quarter of the choice items, few blanks
    assert result["best"]["accuracy"] >= 0.9
    assert result["comparison"]["diff"] > 0.5 and result["comparison"]["p_value"] < 0.001
    assert "test split" in done.stdout and "difference +" in done.stdout
    assert "confirmed: best.md is the best skill; its gain +" in done.stdout
    assert result["handed_back"]["skill"] == "best" and result["guard"]["test"].startswith("exact sign-flip")

    rows = history(out)
    assert rows[0]["kind"] == "seed" and [r["step"] for r in rows] == list(range(len(rows)))
    # the first reply was malformed: named, and the loop went on
    assert rows[1]["reflections"][0]["status"] == "malformed_reply" and rows[1]["gate"] is None
    # the second carried an operation on text the skill does not have
    assert any(e["status"] == "absent" for e in rows[2]["edits"])
    harmful = [
        r
        for r in rows
        if any(e.get("op") == "delete" and e["status"] == "applied" for e in r.get("edits", []))
    ]
    assert harmful and models.optimizer_model.harmful >= 1
    assert all(r["accepted"] is False and r["gate"]["diff"] < 0 for r in harmful)
    best = (out / "best.md").read_text()
    assert all(hint(s) in best for s in SUBTYPES)
    # every version is in skills/, named by step and SHA
    for row in rows:
        ref = row.get("candidate") or row.get("skill")
        assert (out / ref["file"]).exists() and ref["sha256"][:12] in ref["file"]
    # tokens by role per step; the test split was never shown to the optimizer
    assert rows[2]["tokens"]["optimizer"]["prompt_tokens"] == 900
    assert rows[2]["tokens"]["target"]["requests"] > 0
    split = json.loads((out / "split.json").read_text())
    test_questions = {
        json.loads(line)["taskId"] for line in (data_dir / "meta_data.jsonl").read_text().splitlines()
    }
    assert set(map(int, split["test"])) <= test_questions
    for seen in models.optimizer.finished():
        prompt = seen.body["messages"][0]["content"]
        assert prompt.count("### Attempt") <= 8
    report = (out / "report.md").read_text()
    assert "## Headline" in report and "malformed_reply" in report and "absent" in report
    page = (out / "report.html").read_text()
    # report.md rendered as HTML (not a <pre> of Markdown), before the chart, whose step axis is labelled
    assert "<h2>Headline</h2>" in page and "## Headline" not in page
    assert page.index('<section class="report">') < page.index("<svg")
    assert '<text class="step"' in page and ">0</text>" in page
    assert "sk-test" not in "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    # the folder is an input of bv report, export and merge: the handed-back skill's judged test rows
    handed_back = result["handed_back"]["skill"]
    folder = bv_inproc(f"bv report {out} --format json")
    assert folder.returncode == 0, folder.stderr
    [best] = json.loads(folder.stdout)["inputs"]
    assert best["name"] == "run"
    assert best["overall"]["accuracy"] == pytest.approx(result[handed_back]["accuracy"])
    both = bv_inproc(f"bv report seed={out / 'test-seed.jsonl'} best={out} --baseline seed --format json")
    [pair] = json.loads(both.stdout)["comparison"]["pairs"]
    assert pair["diff"] == pytest.approx(result["comparison"]["diff"])  # test.json's figure
    assert bv_inproc(f"bv export {out} --format csv").returncode == 0
    assert bv_inproc(f"bv merge {out}").stdout == (out / f"test-{handed_back}.jsonl").read_text()


def test_a_second_run_of_the_same_command_sends_nothing(data_dir, models, tmp_path):
    out = tmp_path / "run"
    args = command(data_dir, models, out, "--steps 3")
    assert bv_inproc("bv " + args).returncode == 0
    before = models.answered()
    again = bv_inproc("bv " + args)
    assert again.returncode == 0, again.stderr
    assert models.answered() == before
    other = bv_inproc("bv " + args.replace("--edits 2", "--edits 3"))
    assert other.returncode == 2 and "other settings" in other.stderr and "options" in other.stderr


def test_an_llm_judge_s_tokens_are_counted_per_step_and_its_options_pass_through(data_dir, models, tmp_path):
    """--mode llm: every row goes to the judge, whose tokens each history row counts; --judge-param
    and the waits of bv rollout and bv judge reach the requests (an unknown one is refused)."""
    judge = FakeOpenAI(lambda seen: Reply(content="True", usage=(300, 2)))
    judge.start()
    try:
        out = tmp_path / "run"
        extra = (
            f"--steps 1 --judge-model j --judge-base-url {judge.base_url} --judge-api-key sk-test-judge"
            " --judge-param reasoning_effort=minimal --connect-timeout 5 --rate-limit-patience 60"
            " --stall-notice 20"
        )
        rates = {"target": (1.0, 2.0), "writer": (3.0, 4.0), "j": (5.0, 6.0)}  # USD per million
        prices = tmp_path / "prices.json"
        prices.write_text(json.dumps({m: {"input": i, "output": o} for m, (i, o) in rates.items()}))
        extra += f" --prices {prices}"
        done = bv_inproc("bv " + command(data_dir, models, out, extra).replace("--mode rules", "--mode llm"))
        assert done.returncode == 0, done.stderr
        rows = history(out)
        for row in rows:
            judged = row["tokens"]["judge"]
            assert judged["requests"] > 0 and judged["prompt_tokens"] == 300 * judged["requests"]
            assert judged["completion_tokens"] == 2 * judged["requests"] and "cached" not in judged
            # each role's cost: its tokens at its model's rates, computed here apart from bv's prices
            for role, model in (("target", "target"), ("judge", "j"), ("optimizer", "writer")):
                t = row["tokens"][role]
                if not t["requests"]:
                    continue
                rate_in, rate_out = rates[model]
                expected = (t["prompt_tokens"] * rate_in + t["completion_tokens"] * rate_out) / 1e6
                assert t["cost_usd"] == pytest.approx(expected) and t["cost_unknown"] == 0, role
        assert rows[1]["tokens"]["judge"]["requests"] == 8 + (36 * 2 if rows[1]["gate"] else 0)
        test = json.loads((out / "test.json").read_text())
        # every judged row's verdict, once: those of identical requests (an item's repeats) the cache gave
        verdicts = (
            sum(row["tokens"]["judge"]["requests"] for row in rows) + test["tokens"]["judge"]["requests"]
        )
        assert verdicts == 72 + 8 + 72 and len(judge.finished()) <= verdicts
        assert all(seen.body["reasoning_effort"] == "minimal" for seen in judge.finished())
        report = (out / "report.md").read_text()
        assert (
            "## Tokens by step" in report
            and "| cost |" in report
            and "n/a when the run was not priced" in report
        )
        judge_cost = sum(row["tokens"]["judge"]["cost_usd"] for row in [*rows, test])
        assert (
            judge_cost > 0
            and f"| judge | {verdicts} | n/a | " in report
            and f"{dollars(judge_cost)} |" in report
        )
        assert "| judge | " in report and " n/a " in report  # its cache hits are not recorded
        bad = bv_inproc("bv " + command(data_dir, models, tmp_path / "other", "--connect-timeout 0"))
        assert bad.returncode == 2 and "--connect-timeout" in bad.stderr
    finally:
        judge.stop()


def test_dry_run_estimates_and_sends_nothing(data_dir, models, tmp_path):
    out = tmp_path / "run"
    done = bv_inproc("bv " + command(data_dir, models, out, "--dry-run"))
    assert done.returncode == 0, done.stderr
    assert "24 train, 36 selection, 36 test items" in done.stderr and "steps: 9 " in done.stderr
    # 9 steps of 8 train rows and a candidate's 36 x 2 selection rows; at most 2 re-scores of the
    # current skill (one per 4 rejections, --refresh); the seed's selection rows; the seed and the
    # best on test; one optimizer request a step (8 attempts fit one minibatch)
    assert "target: at most 1080 requests" in done.stderr and "optimizer: at most 9 requests" in done.stderr
    assert "detects: the test split (36 items x 2 runs) confirms a +5-point gain with" in done.stderr
    tiny = bv_inproc("bv " + command(data_dir, models, out, "--dry-run").replace("--epochs 3", "--budget 50"))
    assert tiny.returncode == 0 and "steps: 0 " in tiny.stderr
    assert "a --budget of 50 target rollouts leaves no step" in tiny.stderr
    assert models.answered() == 0 and not out.exists()


def test_a_dry_run_prints_dollars_by_role_as_the_rollout_estimates_them(data_dir, models, tmp_path):
    """The target's cost is bv rollout --dry-run's estimate of one request per item (the seed
    skill's prompts), times the requests the plan counts; the optimizer's is priced too."""
    import re

    prices = tmp_path / "prices.json"
    rates = {"target": {"input": 100, "output": 0}, "writer": {"input": 1, "output": 2}}
    prices.write_text(json.dumps(rates))
    out = tmp_path / "run"
    done = bv_inproc("bv " + command(data_dir, models, out, f"--dry-run --prices {prices} --max-tokens 100"))
    assert done.returncode == 0, done.stderr
    target = re.search(r"target cost:\n.*\n +cost: +\$([\d,.]+) to \$([\d,.]+) \(\S*prices.json", done.stderr)
    assert target, done.stderr
    assert re.search(r"optimizer cost:\n.*\n +cost: +at least \$[\d.]+ \(\S*prices.json", done.stderr)
    assert "judge cost" not in done.stderr  # --mode rules asks no LLM
    prompts = bv_inproc(f"bv prompt {data_dir / 'meta_data.jsonl'} --skill {data_dir / 'seed.md'}").stdout
    alone = bv_inproc(
        f"bv rollout --dry-run -m target --base-url {models.target.base_url} --max-tokens 100"
        f" --prices {prices} --no-cache",
        input=prompts,
    )
    each = float(re.search(r"cost: +\$([\d.]+) to", alone.stderr).group(1))  # 96 items, one request each
    assert float(target.group(1).replace(",", "")) == pytest.approx(1080 / 96 * each, rel=0.01)
    assert models.answered() == 0 and not out.exists()
    unpriced = bv_inproc("bv " + command(data_dir, models, out, "--dry-run"))
    assert "cost: not estimated: give --prices" in unpriced.stderr


def test_kill_9_between_steps_then_the_same_command_resumes_with_no_repeated_request(data_dir, tmp_path):
    # An uninterrupted run, for what the resumed one must match.
    whole = Models(data_dir)
    try:
        out = tmp_path / "whole" / "run"
        finished = start_bv(command(data_dir, whole, out, "--steps 5"))
        assert finished.wait(120) == 0, finished.stderr.read()  # type: ignore[union-attr]
        expected, paid = history(out), whole.answered()
    finally:
        whole.stop()

    out = tmp_path / "killed" / "run"
    frozen = {"on": True}
    models = Models(data_dir, hold=lambda: frozen["on"] and finished_steps(out) >= 3)
    try:
        first = start_bv(command(data_dir, models, out, "--steps 5"))
        deadline = time.monotonic() + 60
        while not (finished_steps(out) >= 3 and len(models.target.seen) > len(models.target.finished())):
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()  # type: ignore[union-attr]
            time.sleep(0.02)
        first.send_signal(signal.SIGKILL)  # step 3 has begun: its requests hang unanswered
        first.wait(10)
        frozen["on"] = False
        second = start_bv(command(data_dir, models, out, "--steps 5"))
        assert second.wait(120) == 0, second.stderr.read()  # type: ignore[union-attr]
        resumed = history(out)
        assert "2 already finished" in second.stderr.read()  # type: ignore[union-attr]
        assert models.answered() == paid  # every request answered once, as in the whole run
        assert [r.get("candidate") for r in resumed] == [r.get("candidate") for r in expected]
        assert [r["accepted"] for r in resumed[1:]] == [r["accepted"] for r in expected[1:]]
    finally:
        models.stop()


def test_the_demo_command_of_docs_optimize_md_runs(data_dir, tmp_path):
    """`make optimize-demo` runs this script: both loopback models, then bv optimize against them."""
    script = SUPPORT / "skillserver.py"
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, str(script), str(data_dir), str(run), "--ratio", "2:3:3", "--batch", "8",
         "--edits", "2", "--repeats", "2", "--steps", "2"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "test split" in done.stdout and (run / "report.html").exists()
    assert "step 2/2" in done.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_a_seed_skill_with_windows_line_endings_runs_and_resumes(data_dir, models, tmp_path):
    """Issue 34: a CRLF seed stopped every run at step 1 ("changed since the run wrote it"): the
    skill read back with newline translation did not hash to what was written. Read as bytes."""
    crlf = tmp_path / "seed-crlf.md"
    crlf.write_bytes(SEED_SKILL.replace("\n", "\r\n").encode() + b"\r\n")
    out = tmp_path / "run"
    args = command(data_dir, models, out, "--steps 2").replace(str(data_dir / "seed.md"), str(crlf))
    done = bv_inproc("bv " + args)
    assert done.returncode == 0, done.stderr
    assert "changed since" not in done.stderr and len(history(out)) == 3
    seed = history(out)[0]["skill"]
    assert b"\r\n" in (out / seed["file"]).read_bytes()  # kept as written, and hashed as such
    again = bv_inproc("bv " + args)
    assert again.returncode == 0 and "changed since" not in again.stderr, again.stderr
