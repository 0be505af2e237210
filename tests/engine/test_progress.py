"""Progress on stderr: a live bar on a terminal, plain lines otherwise, nothing with --quiet."""

from __future__ import annotations

import subprocess

from support.commands import BIN, bv_inproc, jsonl, sh
from support.fakeopenai import Reply
from support.terminal import on_terminal


def test_bar_on_a_terminal(sample_dir, server, tmp_path):
    server.responder = lambda seen: Reply(content="\\boxed{A}", delay=0.3)
    prompts = tmp_path / "p.jsonl"
    bv_inproc(f"bv prompt {sample_dir}/meta_data.jsonl > {prompts}")
    status, text, out = on_terminal(
        [BIN / "bv", "rollout", "--base-url", server.base_url, "-m", "m", "-j", "2", "--no-cache", prompts],
        columns=160,
        stdin_terminal=False,
        stdin=subprocess.DEVNULL,
        stdout_terminal=False,
    )
    rows = jsonl(out.decode())
    assert status == 0 and len(rows) == 12, text  # what the terminal showed says why not
    assert "bv rollout" in text and "/12" in text and "req/s" in text  # the bar: done/total, rate
    assert "━" in text or "╸" in text
    assert "12 rows, 0 errors" in text  # and the summary line at the end


def test_quiet_means_nothing_on_stderr(sample_dir, server):
    server.responder = lambda seen: Reply(content="\\boxed{A}")
    result = sh(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --base-url {server.base_url} -m m -q"
        " | bv judge --mode rules -q"
    )
    assert result.returncode == 0 and result.stderr == "" and len(jsonl(result.stdout)) == 12


def test_plain_lines_when_not_a_terminal(sample_dir, server, tmp_path):
    server.responder = lambda seen: Reply(content="no box", delay=0.2)
    bv_inproc(f"bv prompt {sample_dir}/meta_data.jsonl > {tmp_path}/p.jsonl")
    result = bv_inproc(
        f"bv rollout --base-url {server.base_url} -m m -j 2 --no-cache {tmp_path}/p.jsonl",
        env={"BV_PROGRESS_EVERY_S": "0.2"},
    )
    lines = [line for line in result.stderr.splitlines() if line.startswith("bv rollout:")]
    # A file's rows are counted first, so the line says done of total; from stdin, just done.
    assert any("/12 done" in line and "req/s" in line and "0% boxed" in line for line in lines), lines
    assert "\x1b[" not in result.stderr  # no terminal codes in a log
