"""`bv eval`: one command from items to a run folder (results, configuration, logs, reports),
resumed by re-running it; against the loopback server, in process and as a killed process."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import threading

import pytest
from support.commands import BIN, bv_inproc, jsonl
from support.evaluating import SECRET, eval_command, respond
from support.fakeopenai import Reply
from support.waiting import request_key, wait_for


def test_eval_writes_the_run_folder_and_a_rerun_sends_nothing(sample_dir, server, tmp_path):
    server.responder = respond
    out = tmp_path / "run"
    result = bv_inproc(eval_command(sample_dir, server, out, "--repeats 2"))
    assert result.returncode == 0, result.stderr
    n_items = len((sample_dir / "meta_data.jsonl").read_text().splitlines())
    rows = jsonl((out / "results.jsonl").read_text())
    assert len(rows) == 2 * n_items and {r["run"] for r in rows} == {0, 1}
    assert all(r["model"] == "m" and "hard" in r for r in rows)
    assert any(r["judge_model"] == "judge-m" for r in rows)  # blank items went to the LLM judge
    config = json.loads((out / "config.json").read_text())
    assert config["options"]["repeats"] == 2 and config["options"]["judge_model"] == "judge-m"
    assert config["endpoint"] == server.base_url and config["bv_version"]
    assert config["options"]["api_key_given"] is True
    assert sorted(p.name for p in (out / "logs").iterdir()) == [
        "judge.log",
        "prompt.log",
        "report.log",
        "rollout.log",
    ]
    assert f"bv rollout: {2 * n_items} rows, 0 errors" in (out / "logs" / "rollout.log").read_text()
    assert "| **Overall** |" in (out / "report.md").read_text()
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")
    for path in out.rglob("*"):  # the key is in no file of the run
        assert not path.is_file() or SECRET not in path.read_text(errors="replace"), path
    assert SECRET not in result.stderr + result.stdout
    assert "Overall" in result.stdout  # the table, on stdout
    assert f"bv eval: {2 * n_items} rows, accuracy" in result.stderr

    sent = len(server.seen)
    again = bv_inproc(eval_command(sample_dir, server, out, "--repeats 2", "-j 3"))  # -j: how, not what
    assert again.returncode == 0, again.stderr
    assert len(server.seen) == sent, "the re-run sent requests again"
    assert f"{2 * n_items} cache hits" in again.stderr
    verdicts = lambda rows: [(r["id"], r["run"], r["response"], r["hard"]) for r in rows]  # noqa: E731
    assert verdicts(jsonl((out / "results.jsonl").read_text())) == verdicts(rows)


def test_eval_names_undecided_rows_only_when_there_are_some(sample_dir, server, tmp_path):
    """Without a judge model, bv eval says how many rows the rules left undecided, and says
    nothing of a judge when they decided every row (the chance baseline's guesses)."""
    decided = bv_inproc(f"bv eval {sample_dir}/meta_data.jsonl --backend chance --no-cache -o {tmp_path}/c")
    assert decided.returncode == 0, decided.stderr
    assert "LLM judge" not in decided.stderr and "count wrong" not in decided.stderr
    server.responder = lambda seen: Reply(content="\\boxed{somewhere}")
    items = sample_dir / "meta_data.jsonl"
    result = bv_inproc(f"bv eval {items} -m m --base-url {server.base_url} -o {tmp_path}/u")
    assert result.returncode == 0, result.stderr
    undecided = sum(r["undecided"] for r in jsonl((tmp_path / "u" / "results.jsonl").read_text()))
    assert undecided and result.stderr.count("no LLM judge is configured") == 1
    assert f"bv judge: {undecided} rows count wrong: the rules could not decide them" in result.stderr
    assert "--judge-model" in result.stderr


def test_eval_refuses_a_folder_holding_a_run_with_other_options(sample_dir, server, tmp_path):
    server.responder = respond
    out = tmp_path / "run"
    assert bv_inproc(eval_command(sample_dir, server, out, "--mode rules")).returncode == 0
    before = (out / "results.jsonl").read_bytes()
    result = bv_inproc(eval_command(sample_dir, server, out, "--mode rules --repeats 3"))
    assert result.returncode == 2
    assert "holds a run with other options (repeats: 1 → 3)" in result.stderr
    assert (out / "results.jsonl").read_bytes() == before


def test_eval_exit_statuses_are_the_stages(sample_dir, server, tmp_path):
    out = tmp_path / "run"
    missing = bv_inproc(f"bv eval {sample_dir}/meta_data.jsonl --base-url {server.base_url} -o {out}")
    assert missing.returncode == 2 and "no model given: use -m/--model" in missing.stderr
    assert not out.exists()  # nothing done before the options are checked

    server.responder = lambda seen: Reply(status=500, content=None)
    failed = bv_inproc(eval_command(sample_dir, server, out, "--mode rules"))
    assert failed.returncode == 1
    rows = jsonl((out / "results.jsonl").read_text())
    assert rows and all(r["error"] for r in rows)  # every row written, with its error
    assert "rows failed" in (out / "logs" / "rollout.log").read_text()


def test_eval_of_no_items_says_so(sample_dir, server, tmp_path):
    result = bv_inproc(eval_command(sample_dir, server, tmp_path / "run", "--type 'visual trackng'"))
    assert result.returncode == 1
    assert "--type: no item matches 'visual trackng'" in result.stderr
    assert "no items to evaluate" in result.stderr and not (tmp_path / "run" / "results.jsonl").exists()


def _cached(path) -> int:
    """Replies the cache holds, read as another process would (0 before bv has made its table)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            return db.execute("SELECT count(*) FROM replies").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_eval_killed_then_rerun_sends_no_request_twice(sample_dir, server, tmp_path, signum):
    n_items = len((sample_dir / "meta_data.jsonl").read_text().splitlines())
    answer_first, lock, answered = 5, threading.Lock(), []
    release = threading.Event()

    def halting(seen):
        with lock:
            if len(answered) < answer_first or release.is_set():
                answered.append(seen)
                return Reply(content="\\boxed{A}")
        # SIGKILL: the rest hang; SIGTERM: they are let go once bv says it is interrupted
        return Reply(hang=True) if signum == signal.SIGKILL else Reply(content="\\boxed{A}", release=release)

    server.responder = halting
    out, cache = tmp_path / "run", tmp_path / "cache.sqlite"
    command = eval_command(sample_dir, server, out, "--mode rules", "-j 4")
    process = subprocess.Popen(
        ["bash", "-c", f"exec {command}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"},
    )
    wait_for(lambda: _cached(cache) == answer_first and server.in_flight == 4)
    process.send_signal(signum)
    if signum == signal.SIGTERM:
        release.set()  # the requests in flight finish within the grace period, and are cached
    status = process.wait(30)
    err = process.stderr.read().decode()
    assert status == (-9 if signum == signal.SIGKILL else 143), err
    assert not (out / "results.jsonl").exists()  # an unfinished run leaves no results
    if signum == signal.SIGTERM:
        assert "interrupted during the rollout; re-run the same command to go on" in err
    finished_before = collections.Counter(request_key(s) for s in server.finished())

    release.set()
    server.responder = respond
    again = bv_inproc(command)
    assert again.returncode == 0, again.stderr
    rows = jsonl((out / "results.jsonl").read_text())
    assert sorted(r["id"] for r in rows) == sorted({r["id"] for r in rows}) and len(rows) == n_items
    finished = collections.Counter(request_key(s) for s in server.finished())
    assert max(finished.values()) == 1, "a finished request was sent again"
    assert set(finished_before) <= set(finished) and len(finished) == n_items
    assert f"{sum(finished_before.values())} cache hits" in again.stderr


def test_api_evaluate_is_the_command(sample_dir, server, tmp_path):
    from bv import api

    server.responder = respond
    out = tmp_path / "run"
    common = dict(model="m", base_url=server.base_url, cache=tmp_path / "c.sqlite", mode="rules")
    result = api.evaluate(sample_dir / "meta_data.jsonl", out, limit=4, **common)
    assert (result.status, result.row_count, result.folder) == (0, 4, out)
    assert result.accuracy == api.report(jsonl((out / "results.jsonl").read_text())).accuracy["results"]
    assert json.loads((out / "config.json").read_text())["options"]["limit"] == 4
    sent = len(server.seen)
    assert api.evaluate(sample_dir / "meta_data.jsonl", out, limit=4, **common).status == 0
    assert len(server.seen) == sent  # resumed from the cache
    with pytest.raises(ValueError, match="holds a run with other options"):
        api.evaluate(sample_dir / "meta_data.jsonl", out, limit=5, **common)


def test_the_stage_logs_keep_the_lines_not_the_progress_bar():
    """On a terminal the bar is drawn in place; the log gets what a reader of the terminal read."""
    import io

    from bv.evaluation.logs import Tee

    terminal, log = io.StringIO(), io.StringIO()
    tee = Tee(terminal, log)
    tee.write("\r\x1b[2Kbv rollout ━━━━ 1/8")  # a frame of the bar
    tee.write("\r\x1b[2Kbv rollout: warning: a message above the bar\n")
    tee.write("bv rollout ━━━━ 8/8\n\x1b[1A\x1b[2K")  # the last frame, erased as the bar goes
    tee.write("bv rollout: 8 rows, 0 errors\n")
    tee.write("bv rollout: interrupted")  # cut short
    tee.close_line()
    assert log.getvalue().splitlines() == [
        "bv rollout: warning: a message above the bar",
        "bv rollout: 8 rows, 0 errors",
        "bv rollout: interrupted",
    ]
    assert terminal.getvalue().count("━━━━") == 2  # the terminal got everything
