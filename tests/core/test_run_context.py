"""Per-run state (bv/core/run_context.py): two runs in one process, on two threads at once, keep
their own secrets, their own say-once notes and their own limits, through the library as users
call it (bv.api against the loopback server) and through the pieces that read the state."""

from __future__ import annotations

import io
import threading
from pathlib import Path

from support.commands import read_items
from support.fakeopenai import Reply

from bv import api
from bv.core import redaction
from bv.core.jsonl import Problems, read_json_lines
from bv.core.run_context import Limits, RunContext, current, running
from bv.engine.retry import wait_seconds

KEY_A = "sk-run-a-0123456789abcdefghij"
KEY_B = "sk-run-b-zyxwvutsrqponmlkjihg"


def _together(*targets):
    """Run each target on its own thread, all started at once (a barrier); re-raise a failure."""
    barrier = threading.Barrier(len(targets))
    failures: list[BaseException] = []

    def go(target):
        barrier.wait()
        try:
            target()
        except BaseException as exc:  # handed to the test
            failures.append(exc)

    threads = [threading.Thread(target=go, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def test_two_concurrent_api_rollouts_redact_only_their_own_key(sample_dir, server):
    """The server echoes both keys in every reply: each run's rows hide its own key, and the
    other run's key, which this run was never given, is not in its registry."""
    server.latency = 0.05
    server.responder = lambda seen: Reply(content=f"{KEY_A} and {KEY_B} \\boxed{{A}}")
    items = read_items(sample_dir)[:4]
    prompts = list(api.prompt(items, image_root=sample_dir))
    results: dict[str, list] = {}

    def run(name: str, key: str) -> None:
        results[name] = api.rollout(
            prompts, model="m", base_url=server.base_url, api_key=key, cache=None, jobs=2, repeats=3
        )

    _together(lambda: run("a", KEY_A), lambda: run("b", KEY_B))
    for name, own, other in (("a", KEY_A, KEY_B), ("b", KEY_B, KEY_A)):
        assert len(results[name]) == 12
        for row in results[name]:
            assert own not in row["response"] and other in row["response"], row["response"]


def test_secrets_and_notes_stay_in_their_run():
    seen: dict[str, tuple[str, bool, bool]] = {}
    both_registered = threading.Barrier(2)

    def run(name: str, key: str, other: str) -> None:
        with running(RunContext(stage=name)):
            redaction.register(key)
            first = current().first_time("note")
            both_registered.wait()
            seen[name] = (redaction.redact(f"{key} {other}"), first, current().first_time("note"))

    _together(lambda: run("a", KEY_A, KEY_B), lambda: run("b", KEY_B, KEY_A))
    assert seen["a"] == (f"*** {KEY_B}", True, False)
    assert seen["b"] == (f"*** {KEY_A}", True, False)


def test_limits_are_each_runs_own(tmp_path: Path):
    """One run reads with a small line limit and a short wait cap, the other with the defaults,
    at the same time: the line and the wait each run allows are its own."""
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": "1"}\n{"id": "' + "x" * 5000 + '"}\n')
    got: dict[str, tuple[int, int, float | None]] = {}
    reading = threading.Barrier(2)

    def run(name: str, limits: Limits) -> None:
        with running(RunContext(limits=limits)):
            problems = Problems(stream=io.StringIO())
            reading.wait()
            rows = list(read_json_lines([str(path)], problems))
            got[name] = (len(rows), problems.count, wait_seconds({"retry-after": "100"}))

    _together(
        lambda: run("small", Limits(max_line_bytes=1024, max_wait_s=5.0)),
        lambda: run("default", Limits()),
    )
    assert got["small"][:2] == (1, 1) and 5.0 <= got["small"][2] < 6  # type: ignore[operator]
    assert got["default"] == (2, 0, 100.0)


def test_limits_are_read_when_a_run_starts(monkeypatch):
    monkeypatch.setenv("BV_MAX_LINE_BYTES", "2048")
    monkeypatch.setenv("BV_HTML_MAX_ITEMS", "7")
    assert RunContext().limits.max_line_bytes == 2048 and RunContext().limits.html_max_items == 7
    monkeypatch.delenv("BV_MAX_LINE_BYTES")
    assert RunContext().limits.max_line_bytes == Limits().max_line_bytes
