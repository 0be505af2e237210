"""Progress that reads right (issue 35): the ETA of a resumed run goes by the rows that needed a
request, not the cache's instant ones; batch mode's line fits 80 columns with its name and counts
whole and shows no request rate (its requests go out together); a Ctrl-C during a batch says
that the batch goes on and how to collect it; a line said while the bar shows is written whole
(the terminal wraps it; bv eval's logs/*.log keep it as one line)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support.commands import BIN, bv_inproc, jsonl
from support.fakebatch import FakeBatch, batch_server, quick_batch_polls  # noqa: F401 (fixtures)
from support.fakeopenai import Reply
from support.terminal import on_terminal


@pytest.fixture
def prompts(sample_dir: Path, tmp_path: Path) -> Path:
    out = tmp_path / "prompts.jsonl"
    assert bv_inproc(f"bv prompt {sample_dir / 'meta_data.jsonl'} > {out}").returncode == 0
    return out


def test_the_eta_of_a_resumed_run_leaves_out_the_cache_hits(server, prompts, tmp_path):
    """Six of twelve rows come from the cache at once; the rest take 0.6 s each, one at a time:
    with one of them done, about 5 x 0.6 s are left (counting the cache hits said well under 1 s)."""
    cache = tmp_path / "c.sqlite"
    half = tmp_path / "half.jsonl"
    half.write_text("".join(prompts.read_text().splitlines(keepends=True)[:6]))
    first = bv_inproc(f"bv rollout -m m --base-url {server.base_url} --cache {cache} -q {half}")
    assert first.returncode == 0, first.stderr
    server.responder = lambda seen: Reply(delay=0.6)
    again = bv_inproc(
        f"bv rollout -m m --base-url {server.base_url} --cache {cache} -j 1 {prompts}",
        env={"BV_PROGRESS_EVERY_S": "0.1"},
    )
    assert again.returncode == 0, again.stderr
    etas = [
        int(m.group(1))
        for m in re.finditer(r"^bv rollout: (?:7|8)/12 done, ETA (\d+) s, .*6 cached", again.stderr, re.M)
    ]
    assert etas, again.stderr
    assert etas[0] >= 2, etas  # at 7/12 about 3 s are left; counting the cache hits said 0 s


def _batch_argv(batches: FakeBatch, prompts: Path, cache: Path, out: Path) -> list[str]:
    command = (
        f"{BIN / 'bv'} rollout --batch -m gpt-4o --base-url {batches.base_url} --api-key sk-test"
        f" --cache {cache} {prompts} > {out}"
    )
    return ["bash", "-c", command]  # the rows to a file: a pipe the test does not read would fill


def test_batch_progress_fits_80_columns_and_shows_no_request_rate(batches, prompts, tmp_path, monkeypatch):
    monkeypatch.setenv("BV_BATCH_POLL_S", "0.2")
    batches.hold.set()
    import threading

    threading.Timer(1.5, batches.hold.clear).start()
    out = tmp_path / "rows.jsonl"
    status, shown, _ = on_terminal(
        _batch_argv(batches, prompts, tmp_path / "c.sqlite", out), columns=80, stdin_terminal=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert status == 0 and len(jsonl(out.read_text())) == 12, shown
    frames = [f for f in re.split(r"[\r\n]", shown) if f.startswith("bv rollout ")]
    assert any("batch in_progress" in f for f in frames), frames  # the batch's state first
    assert all(len(f) <= 80 and f.split()[1] == "rollout" and "/12" in f for f in frames), frames
    assert not any("req/s" in f for f in frames)  # a batch sends its requests at once: no rate
    said = [line for line in re.split(r"[\r\n]", shown) if "submitted: 12 requests" in line]
    assert said and "the same command resumes it (" in said[0]  # one line, the terminal wraps it
    summary = shown.strip().splitlines()[-1]
    assert "12 rows" in summary and "req/s" not in summary


def test_ctrl_c_during_a_batch_says_the_batch_goes_on(batches, prompts, tmp_path):
    batches.hold.set()
    cache, out = tmp_path / "c.sqlite", tmp_path / "rows.jsonl"
    env = {**os.environ, "BV_BATCH_POLL_S": "0.02"}
    argv = _batch_argv(batches, prompts, cache, out)
    process = subprocess.Popen(["bash", "-c", "exec " + argv[2]], stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while batches.retrievals < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "interrupted by Ctrl-C; no new batch is sent, and the rows still waiting" in err
    goes_on = r"batch batch_\d+ \(in_progress.*\) goes on on the server; run the same command again"
    assert re.search(goes_on, err)
    assert "finishing requests in flight" not in err
    batches.hold.clear()
    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 0 and len(jsonl(out.read_text())) == 12, again.stderr
    assert batches.creations == 1  # collected, not sent again


def test_eval_logs_keep_a_line_said_under_the_bar_whole(batches, sample_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("BV_BATCH_POLL_S", "0.05")
    run = tmp_path / "run"
    status, shown, _ = on_terminal(
        [BIN / "bv", "eval", sample_dir / "meta_data.jsonl", "-m", "gpt-4o", "--base-url", batches.base_url,
         "--api-key", "sk-test", "--mode", "rules", "--batch", "--cache", tmp_path / "c.sqlite", "-o", run],
        columns=60, stdin_terminal=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert status == 0, shown
    log = (run / "logs" / "rollout.log").read_text()
    [said] = [line for line in log.splitlines() if "submitted: 12 requests" in line]
    assert len(said) > 60 and said.rstrip().endswith(".json)")  # whole, not cut at the 60 columns


def test_a_silent_server_shows_no_request_rate_and_is_named_by_its_option(prompts):
    """A server that accepts and never answers: the line said "1.6 req/s" (tries sent) with 0 rows
    done, and its warning named the setting `timeout`, not the option a user types."""
    from support.fakeopenai import FakeOpenAI

    hung = FakeOpenAI(lambda seen: Reply(hang=True))
    hung.start()
    try:
        done = bv_inproc(
            f"bv rollout -m m --base-url {hung.base_url} --no-cache --retries 0 --timeout 2.5"
            f" --stall-notice 1 -j 4 {prompts}",
            env={"BV_PROGRESS_EVERY_S": "0.2"},
        )
    finally:
        hung.stop()
    lines = [line for line in done.stderr.splitlines() if " done, " in line]
    assert lines and all("0.0 req/s" in line for line in lines), done.stderr
    warning = [line for line in done.stderr.splitlines() if "no reply yet" in line]
    assert len(warning) == 1 and "for a reply (--timeout)" in warning[0], done.stderr
