"""The LLM judge against a loopback server: strict verdicts, judge errors apart, cache, modes."""

from __future__ import annotations

import json

import pytest
from support.commands import bv_inproc, jsonl
from support.fakeopenai import Reply
from support.judging import judge_cmd, rollout_rows

from bv.stages.judge import parse_verdict


@pytest.mark.parametrize(
    "reply,verdict",
    [
        ("True", 1),
        ("False", 0),
        ("true.", 1),
        ("**False**", 0),
        (" TRUE \n", 1),
        ("Reasoning first.\nTrue", 1),
        ("<think>hmm, False?</think>True", 1),
        ("\\boxed{False}", 0),
        ("untrue", None),
        ("True or False", None),
        ("It is not true", None),
        ("", None),
        ("Yes", None),
        ("True\nFalse", 0),  # the last line is the verdict
    ],
)
def test_parse_verdict_is_strict(reply, verdict):
    assert parse_verdict(reply) == verdict


def test_auto_sends_only_what_rules_cannot_decide(server, tmp_path):
    # (2,3) right by rules; (4,4) wrong by rules; the two phrases need the judge.
    path = rollout_rows(tmp_path, ["(2,3)", "(4,4)", "row 2 column 3", "second row, third column"])
    server.responder = lambda seen: Reply(content="True")
    result = bv_inproc(judge_cmd(server, path))
    assert result.returncode == 0, result.stderr
    rows = {r["id"]: r for r in jsonl(result.stdout)}
    assert [r["id"] for r in jsonl(result.stdout)] == ["0", "1", "2", "3", "c"]  # input order kept
    assert len(server.seen) == 2
    assert rows["0"]["decided_by"] == "rules" and rows["0"]["hard"] == 1 and rows["0"]["judge_model"] is None
    assert rows["1"]["decided_by"] == "rules" and rows["1"]["hard"] == 0
    assert (
        rows["2"]["decided_by"] == "llm" and rows["2"]["hard"] == 1 and rows["2"]["judge_model"] == "judge-m"
    )
    assert rows["2"]["judge_reply"] == "True" and rows["c"]["decided_by"] == "rules"
    prompt = next(
        s.body["messages"][0]["content"] for s in server.seen if "row 2 column 3" in json.dumps(s.body)
    )
    assert (
        "## Ground Truth\n\n```\n(2,3)\n```" in prompt
        and "## Extracted Answer\n\n```\nrow 2 column 3\n```" in prompt
    )
    assert server.seen[0].headers["authorization"] == "Bearer jk" and server.seen[0].body["temperature"] == 0


def test_llm_mode_sends_every_item_with_choices_and_none(server, tmp_path):
    path = rollout_rows(tmp_path, ["(2,3)", None])
    server.responder = lambda seen: Reply(content="False")
    rows = jsonl(bv_inproc(judge_cmd(server, path, mode="llm")).stdout)
    assert len(server.seen) == 3 and all(r["decided_by"] == "llm" and r["hard"] == 0 for r in rows)
    prompts = [s.body["messages"][0]["content"] for s in server.seen]
    assert any("## Extracted Answer\n\n```\nNone\n```" in p for p in prompts)
    choice = next(p for p in prompts if "Which colour?" in p)
    assert "A. red\nB. blue" in choice and "## Ground Truth\n\n```\nB\n```" in choice


def test_unparseable_and_failed_judgements_are_judge_errors(server, tmp_path):
    path = rollout_rows(tmp_path, ["near (2,3)", "maybe (2,3)", "(2,3)?!"])
    replies = iter(
        [
            Reply(content="untrue"),
            Reply(status=500),
            Reply(status=500),
            Reply(content="True"),
            Reply(content="True"),
        ]
    )
    server.responder = lambda seen: next(replies)
    result = bv_inproc(
        judge_cmd(server, path, mode="llm") + " --retries 1 -j 1", env={"BV_RETRY_BASE_S": "0.01"}
    )
    assert result.returncode == 1, result.stderr  # judge errors fail the stage; every row is written
    assert "bv judge: 2 of 4 rows got a judge error" in result.stderr
    rows = jsonl(result.stdout)
    assert [r["decided_by"] for r in rows] == ["error", "error", "llm", "llm"]
    errors = [r for r in rows if r["decided_by"] == "error"]
    assert len(errors) == 2 and all(r["hard"] is None and r["judge_error"] for r in errors)
    assert any("neither True nor False" in r["judge_error"] for r in errors)
    assert any("judge request failed" in r["judge_error"] for r in errors)
    (tmp_path / "judged.jsonl").write_text(result.stdout)
    result = bv_inproc(f"bv report --format json {tmp_path}/judged.jsonl")
    # Judge errors are counted apart and count wrong (an outage never raises the score); exit 1.
    report = json.loads(result.stdout)["inputs"][0]
    assert report["overall"]["judge_errors"] == 2 and report["overall"]["accuracy"] == 0.5
    assert result.returncode == 1 and "2 judge error(s): re-run bv judge" in result.stderr
    finished = json.loads(
        bv_inproc(f"bv report --format json --exclude-failed {tmp_path}/judged.jsonl").stdout
    )["inputs"][0]
    assert finished["overall"]["accuracy"] == 1.0  # both judged rows are right


def test_rerun_after_judge_errors_asks_again_only_for_them(server, tmp_path):
    """The judge endpoint failing, or answering neither True nor False: exit 1, every row written;
    the same command run again asks the judge only about those rows."""
    path = rollout_rows(tmp_path, ["near (2,3)", "maybe (2,3)", "(2,3)?!"])
    cache = tmp_path / "cache.sqlite"

    def outage(seen):
        text = seen.body["messages"][0]["content"]
        if "near" in text:
            return Reply(content="untrue")
        return Reply(status=503) if "maybe" in text else Reply(content="True")

    server.responder = outage
    command = judge_cmd(server, path, mode="llm", cache=cache) + " --retries 0"
    first = bv_inproc(command)
    assert first.returncode == 1 and len(jsonl(first.stdout)) == 4, first.stderr
    assert "2 of 4 rows got a judge error" in first.stderr and "2 rows are cached" in first.stderr
    server.responder = lambda seen: Reply(content="True")
    asked_before = len(server.seen)
    second = bv_inproc(command)
    assert second.returncode == 0, second.stderr
    assert len(server.seen) - asked_before == 2  # only the two judge errors were asked again
    assert [r["decided_by"] for r in jsonl(second.stdout)] == ["llm"] * 4


def test_rejudging_is_served_from_the_cache(server, tmp_path):
    path = rollout_rows(tmp_path, ["row 2 column 3", "the middle one"])
    server.responder = lambda seen: Reply(content="True")
    cache = tmp_path / "cache.sqlite"
    first = bv_inproc(judge_cmd(server, path, cache=cache))
    assert len(server.seen) == 2
    second = bv_inproc(judge_cmd(server, path, cache=cache))
    assert len(server.seen) == 2, "a rerun of bv judge on the same rollouts made an LLM call"
    assert first.stdout == second.stdout and "2 cache hits" in second.stderr


def test_rejudging_replaces_only_judge_fields(server, tmp_path):
    path = rollout_rows(tmp_path, ["row 2 column 3"])
    server.responder = lambda seen: Reply(content="True")
    once = jsonl(bv_inproc(judge_cmd(server, path)).stdout)
    (tmp_path / "once.jsonl").write_text("".join(json.dumps(r) + "\n" for r in once))
    twice = jsonl(bv_inproc(f"bv judge --mode rules {tmp_path}/once.jsonl").stdout)
    assert once[0]["decided_by"] == "llm" and twice[0]["decided_by"] == "rules"
    for a, b in zip(once, twice, strict=True):
        keep = {
            k: v
            for k, v in a.items()
            if not k.startswith("judge") and k not in ("extracted", "hard", "decided_by", "undecided")
        }
        assert {k: b[k] for k in keep} == keep


def test_auto_without_a_judge_warns_once_and_uses_rules(tmp_path):
    path = rollout_rows(tmp_path, ["row 2 column 3", "somewhere"])
    result = bv_inproc(f"bv judge {path}")
    assert result.returncode == 0 and result.stderr.count("no LLM judge is configured") == 1
    assert "bv judge: 2 rows count wrong: the rules could not decide them" in result.stderr
    rows = jsonl(result.stdout)
    assert [r["undecided"] for r in rows] == [True, True, False] and rows[0]["hard"] == 0
    assert "needs a judge model" in bv_inproc(f"bv judge --mode llm {path}").stderr


def test_auto_without_a_judge_is_silent_when_the_rules_decide_every_row(tmp_path):
    """The notice is about this run: rows the rules decided need no judge, so none is asked for."""
    path = rollout_rows(tmp_path, ["(2,3)", "(1,1)"])
    result = bv_inproc(f"bv judge {path}")
    assert result.returncode == 0 and "bv judge: 3 rows, 3 by rules, 0 judge errors" in result.stderr
    assert "judge" not in result.stderr.replace("bv judge:", "").replace("judge errors", ""), result.stderr


@pytest.mark.parametrize(("signame", "status", "in_time"), [("SIGINT", 130, True), ("SIGTERM", 143, False)])
def test_ctrl_c_keeps_every_row_marking_unjudged_ones(server, tmp_path, signame, status, in_time):
    """After Ctrl-C or SIGTERM the judge still writes every row it read; those the LLM did not judge
    are judge errors. Requests in flight that answer within the grace period count (in_time); those
    that do not are given up after it (10 s) and marked too."""
    import signal
    import subprocess
    import threading
    import time

    from support.commands import BIN

    path = rollout_rows(tmp_path, [f"phrase {i}" for i in range(12)])
    stopped = threading.Event()  # the judge said it was interrupted: the replies in flight may come
    server.responder = lambda seen: Reply(content="True", release=stopped) if in_time else Reply(hang=True)
    judge = subprocess.Popen(
        [
            BIN / "bv",
            "judge",
            "--judge-model",
            "j",
            "--judge-base-url",
            server.base_url,
            "--no-cache",
            "-j",
            "2",
            path,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    err_lines: list[str] = []

    def read_stderr() -> None:
        for line in judge.stderr:
            err_lines.append(line)
            if "interrupted by" in line:
                stopped.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    deadline = time.monotonic() + 20
    while server.in_flight < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    judge.send_signal(getattr(signal, signame))
    out = judge.stdout.read()
    judge.wait(30)
    reader.join(5)
    err = "".join(err_lines)
    rows = jsonl(out)
    assert judge.returncode == status and len(rows) == 13, err
    assert "bv judge: interrupted by" in err.splitlines()[-1]
    interrupted = sum(r["decided_by"] == "error" and "interrupted" in r["judge_error"] for r in rows)
    assert interrupted == (10 if in_time else 12), rows
    assert sum(r["decided_by"] == "llm" and r["hard"] == 1 for r in rows) == (2 if in_time else 0)
    assert rows[-1]["decided_by"] == "rules"  # the choice row needed no LLM


def test_after_a_judge_outage_only_llm_verdicts_are_called_cached(server, tmp_path):
    """bv judge --mode auto with the judge endpoint failing: the closing summary counts as cached
    the rows the LLM judged, not those the rules decided (they are in no cache)."""
    answers = ["(2,3)", "(4,4)", "row 2 column 3", "maybe (2,3)", "second row, third column"]
    path = rollout_rows(tmp_path, answers)
    server.responder = lambda seen: (
        Reply(status=503) if "maybe" in seen.body["messages"][0]["content"] else Reply(content="True")
    )
    result = bv_inproc(judge_cmd(server, path, cache=tmp_path / "cache.sqlite", options="--retries 0"))
    decided = [r["decided_by"] for r in jsonl(result.stdout)]
    assert decided == ["rules", "rules", "llm", "error", "llm", "rules"], result.stderr
    assert result.returncode == 1 and "1 of 6 rows got a judge error" in result.stderr
    assert "2 rows are cached" in result.stderr, result.stderr


@pytest.mark.parametrize("mode", ["llm", "auto", "rules"])
def test_a_failed_rollout_row_never_reaches_the_judge(server, tmp_path, mode):
    """A judge that says True to anything would make a failed row right: it never sees one."""
    path = rollout_rows(tmp_path, ["row 2 column 3"])
    failed = {
        **json.loads(open(path).readline()),
        "id": "failed",
        "question": "Failed row?",
        "response": None,
    }
    failed["error"] = "HTTP 400: Unsupported parameter: 'max_tokens' is not supported with this model."
    with open(path, "a") as f:
        f.write(json.dumps(failed) + "\n")
    server.responder = lambda seen: Reply(content="True")
    result = bv_inproc(judge_cmd(server, path, mode=mode))
    assert result.returncode == 1  # the row came in failed
    assert "1 row came in with a rollout error" in result.stderr
    row = next(r for r in jsonl(result.stdout) if r["id"] == "failed")
    assert row["hard"] == 0 and row["decided_by"] == "rollout_error" and row["judge_model"] is None
    assert not any("Failed row?" in json.dumps(s.body) for s in server.seen)
    assert len(server.seen) == {"llm": 2, "auto": 1, "rules": 0}[mode]
    (tmp_path / "judged.jsonl").write_text(result.stdout)
    figures = json.loads(bv_inproc(f"bv report --format json {tmp_path}/judged.jsonl").stdout)
    overall = figures["inputs"][0]["overall"]
    assert (
        overall["errors"] == 1
        and overall["judge_errors"] == 0
        and overall["correct"] == 2 - (mode == "rules")
    )
