"""How stages end, seen from outside as a shell or CI sees it: exit statuses, the closing summary,
SIGTERM in a stage without requests, `make eval` failing with its stages, provenance in rows."""

from __future__ import annotations

import os
import pty
import re
import shutil
import signal
import socket
import subprocess
import time
from datetime import UTC, datetime

import pytest
from support.commands import BIN, bv_inproc, jsonl, sh
from support.fakeopenai import Reply
from support.paths import ROOT

import bv
from bv.cli.ending import exit_status, summary
from bv.core.outcome import Outcome

REPO = ROOT


def closed_port() -> int:
    """A loopback port with nothing listening (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("outcome", "skip_bad", "status", "line"),
    [
        (Outcome(rows=12), False, 0, None),
        (Outcome(rows=12, bad_lines=2), True, 0, "2 bad input lines skipped"),
        (Outcome(rows=12, bad_lines=1), False, 1, "1 bad input line"),
        (Outcome(rows=0, missing_files=1), True, 1, "1 input file could not be read"),
        (
            Outcome(rows=12, failed=3, cached=9),
            False,
            1,
            "3 of 12 rows failed; re-run the same command to retry only the failed rows: 9 rows are cached",
        ),
        (
            Outcome(rows=4, failed=1, failed_what="got a judge error", carried=2),
            False,
            1,
            "1 of 4 rows got a judge error; 2 rows came in with a rollout error (re-run bv rollout for"
            " them); re-run the same command to retry only the failed rows",
        ),
        (
            Outcome(rows=16, signal=signal.SIGTERM, cached=16),
            False,
            143,
            "interrupted by SIGTERM after 16 rows; re-run the same command to finish: 16 rows are cached",
        ),
        (
            Outcome(rows=1, signal=signal.SIGINT, failed=1),
            False,
            130,  # the signal decides the status; the failed row is still said
            "interrupted by Ctrl-C after 1 row; 1 of 1 row failed; re-run the same command to finish",
        ),
        (
            Outcome(rows=5, fatal="the server refused the API key", cached=5),
            False,
            1,
            "stopped after 5 rows; once the error above is fixed, re-run the same command: 5 rows are cached",
        ),
        (Outcome(fatal="no model given"), False, 1, None),
    ],
)
def test_the_exit_status_table(outcome, skip_bad, status, line):
    assert exit_status(outcome, skip_bad) == status and summary(outcome, skip_bad) == line


def test_a_reader_that_leaves_ends_quietly_with_0():
    assert exit_status(Outcome(rows=3, failed=3, stdout_closed=True)) == 0


def test_some_rows_failing_exits_1_with_every_row_written(sample_dir, server, tmp_path):
    # One request at a time, every third one refused: some rows fail, the others succeed.
    server.responder = lambda seen: Reply(status=503) if len(server.seen) % 3 == 0 else Reply()
    out = tmp_path / "out.jsonl"
    result = sh(  # the real entry point's exit status, through a real pipeline
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --base-url {server.base_url} -m m -j 1"
        f" --retries 0 --cache {tmp_path}/c.sqlite > {out}"
    )
    rows = jsonl(out.read_text())
    failed = sum(r["error"] is not None for r in rows)
    assert result.returncode == 1 and len(rows) == 12 and 0 < failed < 12, result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"bv rollout: {failed} of 12 rows failed; re-run the same command to retry only the failed rows:"
        f" {12 - failed} rows are cached"
    )
    # The judge passes every row on, and fails too: its output holds rows that are not results.
    judged = bv_inproc(f"bv judge --mode rules {out}")
    assert judged.returncode == 1 and len(jsonl(judged.stdout)) == 12
    assert f"bv judge: {failed} rows came in with a rollout error" in judged.stderr


def test_a_dead_judge_endpoint_fails_the_stage_with_every_row_written(tmp_path):
    from support.judging import rollout_rows

    path = rollout_rows(tmp_path, [f"phrase {i}" for i in range(9)] + ["(2,3)"])  # 9 undecided by rules
    port = closed_port()
    result = bv_inproc(
        f"bv judge --judge-model j --judge-base-url http://127.0.0.1:{port}/v1 --no-cache {path}",
        env={"BV_RETRY_BASE_S": "0.01"},
    )
    rows = jsonl(result.stdout)
    assert result.returncode == 1 and len(rows) == 11, result.stderr
    assert [r["decided_by"] for r in rows].count("error") == 9  # the rules still decided the rest
    assert result.stderr.count(f"127.0.0.1:{port}") <= 2 and "Traceback" not in result.stderr  # said once
    assert result.stderr.splitlines()[-1].startswith("bv judge: 9 of 11 rows got a judge error")


def test_all_rows_succeeding_exits_0_without_a_failure_line(sample_dir):
    result = sh(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --backend chance | bv judge --mode rules"
    )
    assert result.returncode == 0 and len(jsonl(result.stdout)) == 12
    assert "failed" not in result.stderr and "interrupted" not in result.stderr


def test_sigterm_in_a_stage_without_requests_exits_143(sample_dir):
    """bv prompt waiting on its input: SIGTERM ends it like Ctrl-C, with the rows so far whole."""
    prompt = subprocess.Popen(
        [BIN / "bv", "prompt", "--image-root", sample_dir],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = (sample_dir / "meta_data.jsonl").read_text().splitlines()[0]
    prompt.stdin.write(first + "\n")
    prompt.stdin.flush()
    assert prompt.stdout.readline().startswith("{")  # the first row is out: bv is running
    prompt.send_signal(signal.SIGTERM)
    assert prompt.wait(10) == 143
    err = prompt.stderr.read()
    assert "Traceback" not in err and err.splitlines()[-1].startswith("bv prompt: interrupted by SIGTERM")
    prompt.stdin.close()


def test_on_a_terminal_the_messages_start_on_a_fresh_line_below_the_bar(sample_dir, server, tmp_path):
    server.responder = lambda seen: Reply(delay=0.5)
    prompts = tmp_path / "p.jsonl"
    bv_inproc(f"bv prompt {sample_dir}/meta_data.jsonl > {prompts}")
    master, slave = pty.openpty()
    rollout = subprocess.Popen(
        [BIN / "bv", "rollout", "--base-url", server.base_url, "-m", "m", "-j", "2", "--no-cache", prompts],
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env={**os.environ, "COLUMNS": "120", "TERM": "xterm"},
    )
    os.close(slave)
    deadline = time.monotonic() + 30
    while len(server.finished()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    rollout.send_signal(signal.SIGTERM)
    seen = b""
    while chunk := _read(master):
        seen += chunk
    assert rollout.wait(30) == 143
    text = seen.decode("utf-8", errors="replace")
    assert "━" in text  # the bar was there
    messages = [m.start() for m in re.finditer("bv rollout: interrupted by SIGTERM", text)]
    assert len(messages) == 2, text[-2000:]
    # Each at the start of a line: after a newline, or after the bar's line was erased (ESC[2K).
    assert all(text[:at].endswith(("\n", "\x1b[2K")) for at in messages), text[-2000:]
    last = r"\nbv rollout: interrupted by SIGTERM after \d+ rows; re-run the same command to finish\r\n$"
    assert re.search(last, text)


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # the child closed the terminal
        return b""


@pytest.mark.parametrize(
    "args",
    [
        ["report", "--fail-under", "nan"],
        ["report", "--fail-under", "1.5"],
        ["rollout", "--backend", "chance", "--timeout", "nan"],
        ["rollout", "--backend", "chance", "--temperature", "inf"],
        ["cache", "clear", "--older-than", "nan"],
    ],
)
def test_a_bad_option_is_refused_before_reading_stdin(args):
    started = time.monotonic()
    # stdin stays open: a stage that started work would wait on it until the timeout.
    result = subprocess.run([BIN / "bv", *args], stdin=subprocess.PIPE, capture_output=True, timeout=30)
    assert result.returncode == 2 and args[-2].encode() in result.stderr and result.stdout == b""
    assert time.monotonic() - started < 10


def test_provenance_in_every_rollout_row_free_of_credentials(sample_dir, server, tmp_path):
    key = "sk-provenance-0123456789abcdef"
    before = datetime.now(UTC).replace(microsecond=0)
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --base-url {server.base_url} -m m"
        f" --api-key {key} --no-cache"
    )
    assert result.returncode == 0, result.stderr
    rows = jsonl(result.stdout)
    assert len(rows) == 12 and key not in result.stdout + result.stderr
    for row in rows:
        assert row["bv_version"] == bv.__version__ and row["endpoint"] == server.base_url
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", row["started_at"])
        started = datetime.strptime(row["started_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        assert before <= started <= datetime.now(UTC)
    chance = jsonl(bv_inproc(f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --backend chance").stdout)
    assert {r["endpoint"] for r in chance} == {"chance"}
    # Re-judging keeps the provenance; re-running the rollout replaces it.
    judged = jsonl(bv_inproc("bv judge --mode rules", input=result.stdout).stdout)
    assert [r["started_at"] for r in judged] == [r["started_at"] for r in rows]


# make eval with this interpreter's bv (BIN=...), never remaking .venv/.installed: its recipe would
# `pip install -e` the tree into BIN's venv, a venv the tests run in, made (or not) for another tree.
MAKE_EVAL = ["make", "-s", "-o", ".venv/.installed", "eval"]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_eval_fails_when_the_endpoint_is_dead(sample_dir, tmp_path):
    """make eval is bv eval: the rollout's failure fails make, and no results are made of it."""
    port = closed_port()
    env = {**os.environ, "BV_RETRY_BASE_S": "0.01", "XDG_CACHE_HOME": str(tmp_path)}
    model = f"dead-{port}/m"
    result = subprocess.run(
        [
            *MAKE_EVAL,
            f"MODEL={model}",
            f"BASE_URL=http://127.0.0.1:{port}/v1",
            f"ITEMS={sample_dir}/meta_data.jsonl",
            "JOBS=4",
            f"BIN={BIN}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    folder = REPO / "build" / "eval" / f"dead-{port}_m"
    try:
        assert result.returncode != 0, result.stdout + result.stderr
        assert "bv rollout:" in result.stderr and "Traceback" not in result.stderr
        assert (folder / "logs" / "rollout.log").exists()  # in a folder of its own
        assert not (folder / "results.jsonl").exists()  # no results of a stopped run
        assert not (folder / "report.html").exists()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    missing = subprocess.run(
        [*MAKE_EVAL, "MODEL=m", f"ITEMS={tmp_path}/none.jsonl", f"BIN={BIN}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode != 0 and f"no items file at {tmp_path}/none.jsonl" in missing.stderr
    assert not (tmp_path / "none.jsonl").exists()
