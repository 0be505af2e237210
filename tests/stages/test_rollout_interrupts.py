"""Crashes and Ctrl-C: a finished row is never lost or duplicated, and re-running resumes."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
import time

import pytest
from support.commands import BIN, jsonl, sh
from support.fakeopenai import Reply
from support.waiting import request_key, wait_for


def start_pipeline(sample_dir, base_url: str, out, cache, jobs: int = 4):
    """bv prompt | bv rollout | bv judge > out, as three processes; returns them."""
    env = {**os.environ, "BV_RETRY_BASE_S": "0.05"}
    prompt = subprocess.Popen(
        [BIN / "bv", "prompt", sample_dir / "meta_data.jsonl"], stdout=subprocess.PIPE, env=env
    )
    rollout = subprocess.Popen(
        [
            BIN / "bv",
            "rollout",
            "--base-url",
            base_url,
            "-m",
            "m",
            "-j",
            str(jobs),
            "--cache",
            cache,
            "--quiet",
        ],
        stdin=prompt.stdout,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    prompt.stdout.close()
    judge = subprocess.Popen(
        [BIN / "bv", "judge", "--mode", "rules"],
        stdin=rollout.stdout,
        stdout=open(out, "w"),
        stderr=subprocess.PIPE,
        env=env,
    )
    rollout.stdout.close()
    return prompt, rollout, judge


def test_sigkill_midway_then_rerun_sends_only_the_unfinished(sample_dir, server, tmp_path):
    n_items = len((sample_dir / "meta_data.jsonl").read_text().splitlines())
    answer_first = 5
    release = threading.Event()
    lock = threading.Lock()
    answered = []

    def respond(seen):
        with lock:
            if len(answered) < answer_first or release.is_set():
                answered.append(seen)
                return Reply(content="\\boxed{A}")
        return Reply(hang=True)  # the rest hang until the process is killed

    server.responder = respond
    out, cache = tmp_path / "results.jsonl", tmp_path / "cache.sqlite"
    prompt, rollout, judge = start_pipeline(sample_dir, server.base_url, out, cache)
    wait_for(lambda: len(server.finished()) == answer_first and server.in_flight == 4)
    wait_for(lambda: len(out.read_text().splitlines()) == answer_first)  # written means cached
    rollout.send_signal(signal.SIGKILL)
    rollout.wait(10), judge.wait(10), prompt.wait(10)
    assert len(jsonl(out.read_text())) == answer_first  # the judge kept every finished row
    finished_before = collections.Counter(request_key(s) for s in server.finished())

    release.set()
    result = sh(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --base-url {server.base_url} -m m -j 4"
        f" --cache {cache} | bv judge --mode rules > {out}"
    )
    assert result.returncode == 0, result.stderr
    ids = [r["id"] for r in jsonl(out.read_text())]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == n_items
    finished = collections.Counter(request_key(s) for s in server.finished())
    assert max(finished.values()) == 1, "a finished request was sent again"
    assert set(finished_before) <= set(finished) and len(finished) == n_items
    assert f"{answer_first} cache hits" in result.stderr


@pytest.mark.parametrize(
    ("signum", "name", "status"), [(signal.SIGINT, "Ctrl-C", 130), (signal.SIGTERM, "SIGTERM", 143)]
)
def test_first_ctrl_c_or_sigterm_finishes_in_flight(sample_dir, server, tmp_path, signum, name, status):
    """SIGTERM (a scheduler, `timeout`) is the first Ctrl-C: rows in flight are written, then 143.
    The replies in flight come only once rollout has said it is interrupted, however loaded the
    machine: they finish within the grace period, and nothing after them starts."""
    state = {"n": 0}
    lock = threading.Lock()
    stopped = threading.Event()

    def respond(seen):
        with lock:
            state["n"] += 1
            first = state["n"] <= 3
        return Reply(content="\\boxed{B}", release=None if first else stopped)

    server.responder = respond
    out, cache = tmp_path / "results.jsonl", tmp_path / "cache.sqlite"
    prompt, rollout, judge = start_pipeline(sample_dir, server.base_url, out, cache, jobs=2)
    err_lines: list[str] = []

    def read_stderr() -> None:
        for line in rollout.stderr:
            err_lines.append(line.decode())
            if b"interrupted by" in line:
                stopped.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    wait_for(lambda: len(server.finished()) >= 3 and server.in_flight == 2)
    # The judge has started and written what it got (a signal before its handlers are installed
    # would end it the default way: a race of the test, not of bv, on a loaded machine).
    wait_for(lambda: out.exists() and out.read_bytes().count(b"\n") >= 3)
    in_flight = server.in_flight
    for process in (prompt, rollout, judge):  # the signal reaches the whole pipeline
        process.send_signal(signum)
    assert rollout.wait(15) == status
    judge.wait(15)
    reader.join(5)
    err = "".join(err_lines)
    assert f"bv rollout: interrupted by {name}; finishing requests in flight" in err
    # The closing summary, on a line of its own, says how to resume.
    assert f"\nbv rollout: interrupted by {name} after {3 + in_flight} rows;" in err
    assert err.endswith(f"re-run the same command to finish: {3 + in_flight} rows are cached\n")
    rows = jsonl(out.read_text())
    # Everything the server finished reached the results, the in-flight ones included, once each.
    assert len(rows) == len(server.finished()) == 3 + in_flight
    assert len({r["id"] for r in rows}) == len(rows)


def test_second_ctrl_c_exits_at_once(sample_dir, server, tmp_path):
    server.responder = lambda seen: Reply(hang=True)
    out, cache = tmp_path / "results.jsonl", tmp_path / "cache.sqlite"
    prompt, rollout, judge = start_pipeline(sample_dir, server.base_url, out, cache, jobs=2)
    wait_for(lambda: server.in_flight == 2)
    rollout.send_signal(signal.SIGINT)
    time.sleep(0.5)
    started = time.monotonic()
    rollout.send_signal(signal.SIGINT)
    assert rollout.wait(5) == 130 and time.monotonic() - started < 2
    assert "quitting now" in rollout.stderr.read().decode()
    prompt.kill(), judge.wait(5)
