"""`bv rollout --batch` and `bv judge --batch` end to end, as users type them, against the
loopback files/batches server (tests/support/fakebatch.py, which also answers chat completions online):
the same rows and cache as an online run, refinement turns as a second batch, failures inside a
batch as error rows, and a `kill -9` while polling followed by a re-run that resumes the same
batch (exactly one created)."""

from __future__ import annotations

import json
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
from support.paths import FIXTURES
from support.rows import comparable

from bv.engine.batch_state import BatchState, folder_for


def rollout(batches: FakeBatch, prompts: Path, cache: Path, *extra: str) -> tuple[int, list[dict], str]:
    command = (
        f"bv rollout -m gpt-4o --base-url {batches.base_url} --api-key sk-test --cache {cache}"
        f" {' '.join(extra)} {prompts}"
    )
    result = bv_inproc(command)
    return result.returncode, jsonl(result.stdout), result.stderr


def test_a_batch_run_writes_the_rows_of_an_online_run(batches, prompts, tmp_path):
    status, online, _ = rollout(batches, prompts, tmp_path / "online.sqlite", "--ordered")
    assert status == 0 and batches.chats == 12 and batches.creations == 0
    status, batched, err = rollout(batches, prompts, tmp_path / "batch.sqlite", "--batch", "--ordered")
    assert status == 0, err
    assert batches.creations == 1 and batches.chats == 12  # no chat request went out online
    assert [comparable(r) for r in batched] == [comparable(r) for r in online]
    assert all(not t["cached"] for r in batched for t in r["turns"])
    assert all(t["batch"] is True for r in batched for t in r["turns"])  # the basis it was paid at
    assert all("batch" not in t for r in online for t in r["turns"])
    assert "batch batch_" in err and "submitted: 12 requests" in err


def test_the_cache_is_shared_both_ways(batches, prompts, tmp_path):
    cache = tmp_path / "cache.sqlite"
    rollout(batches, prompts, cache, "--batch")
    status, rows, _ = rollout(batches, prompts, cache)  # online after batch: all cache hits
    assert status == 0 and batches.chats == 0 and all(t["cached"] for r in rows for t in r["turns"])
    other = tmp_path / "other.sqlite"
    rollout(batches, prompts, other)
    created = batches.creations
    status, rows, _ = rollout(batches, prompts, other, "--batch")  # batch after online: nothing sent
    assert status == 0 and batches.creations == created and len(rows) == 12


def test_refinement_turns_go_as_a_second_batch(batches, prompts, tmp_path):
    batches.responder = lambda line: Reply(
        content="thinking..." if len(line["body"]["messages"]) <= 2 else "so \\boxed{A}"
    )
    status, rows, _ = rollout(batches, prompts, tmp_path / "c.sqlite", "--batch", "--max-turns", "2")
    assert status == 0 and batches.creations == 2
    assert all(len(r["turns"]) == 2 and r["response"] == "so \\boxed{A}" for r in rows)


def test_failures_inside_a_batch_are_error_rows_and_the_rerun_retries_them(batches, prompts, tmp_path):
    first = {}

    def respond(line: dict) -> Reply | None:
        text = json.dumps(line["body"]["messages"])
        if not first:
            first["text"] = text
        return Reply(status=500) if text == first["text"] else Reply()

    batches.responder = respond
    cache = tmp_path / "c.sqlite"
    status, rows, _ = rollout(batches, prompts, cache, "--batch")
    failed = [r for r in rows if r["error"]]
    assert status == 1 and len(rows) == 12 and len(failed) == 1
    assert failed[0]["error"].startswith("HTTP 500") and failed[0]["response"] is None
    batches.responder = lambda line: Reply()
    status, rows, _ = rollout(batches, prompts, cache, "--batch")
    assert status == 0 and batches.creations == 2
    assert len(batches.jobs[max(batches.jobs)].lines) == 1  # only the failed request went again


def test_an_expired_batch_fails_its_rows(batches, prompts, tmp_path):
    batches.outcome = "expired"
    status, rows, _ = rollout(batches, prompts, tmp_path / "c.sqlite", "--batch")
    assert status == 1 and len(rows) == 12
    assert all("expired" in r["error"] and "batch_expired" in r["error"] for r in rows)


def test_kill_9_while_polling_then_the_rerun_resumes_the_same_batch(batches, prompts, tmp_path):
    cache = tmp_path / "c.sqlite"
    state = BatchState(folder_for(cache))
    batches.hold.set()
    command = [
        str(BIN / "bv"),
        "rollout",
        "-m",
        "gpt-4o",
        "--base-url",
        batches.base_url,
        "--api-key",
        "sk-test",
        "--cache",
        str(cache),
        "--batch",
        str(prompts),
    ]
    env = {**os.environ, "BV_BATCH_POLL_S": "0.02"}
    out = tmp_path / "first.jsonl"
    with out.open("w") as stdout:
        process = subprocess.Popen(command, stdout=stdout, stderr=subprocess.PIPE, env=env)
        deadline = time.monotonic() + 60
        while batches.retrievals < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert batches.retrievals >= 3, process.stderr.read() if process.poll() is not None else "no polls"
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
    assert out.read_text() == ""  # nothing written: every row waited for its batch
    [record] = state.records(batches.base_url, "gpt-4o")
    assert record.batch_id in batches.jobs and len(record.keys) == 12
    batches.hold.clear()
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(jsonl(result.stdout)) == 12 and f"resuming batch {record.batch_id}" in result.stderr
    assert batches.creations == 1 and not state.records(batches.base_url, "gpt-4o")


def test_judge_batch(batches, prompts, tmp_path):
    cache = tmp_path / "c.sqlite"
    _, rows, _ = rollout(batches, prompts, cache, "--batch")
    rolled = tmp_path / "rows.jsonl"
    rolled.write_text("".join(json.dumps(r) + "\n" for r in rows))
    batches.responder = lambda line: Reply(content="True")
    judge = (
        f"bv judge --mode llm --judge-model judge-m --judge-base-url {batches.base_url} --judge-api-key sk-j"
        f" --cache {cache} {rolled}"
    )
    created = batches.creations
    result = bv_inproc(judge + " --batch")
    assert result.returncode == 0, result.stderr
    judged = jsonl(result.stdout)
    assert batches.creations == created + 1 and [r["id"] for r in judged] == [r["id"] for r in rows]
    assert all(r["decided_by"] == "llm" and r["hard"] == 1 for r in judged)
    chats = batches.chats
    again = bv_inproc(judge)  # online now: every verdict from the cache
    assert again.returncode == 0 and batches.chats == chats
    assert [r["hard"] for r in jsonl(again.stdout)] == [1] * 12


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (
            "bv rollout --backend chance --batch {prompts}",
            "--batch needs the openai or azure backend, not chance",
        ),
        (
            "bv rollout -m gpt-4o --base-url {url} --batch --no-cache {prompts}",
            "--batch needs the reply cache",
        ),
        (
            "bv judge --mode rules --batch {prompts}",
            "--batch sends the LLM judge's requests: give --judge-model",
        ),
    ],
)
def test_batch_mode_refuses_what_cannot_work(batches, prompts, command, said):
    result = bv_inproc(command.format(prompts=prompts, url=batches.base_url))
    assert result.returncode == 2 and said in result.stderr and not batches.seen


def test_help_says_what_batch_does():
    for stage in ("rollout", "judge"):
        shown = " ".join(bv_inproc(f"bv {stage} --help").stdout.split())
        assert "--batch Send the requests as batch jobs" in shown and "docs/batch.md" in shown


def test_an_endpoint_without_the_batch_api_says_so(batches, prompts, tmp_path):
    url = batches.base_url.replace("/v1", "/chat-only")
    result = bv_inproc(
        f"bv rollout -m gpt-4o --base-url {url} --cache {tmp_path / 'c.sqlite'} --batch {prompts}"
    )
    assert result.returncode == 1 and batches.creations == 0
    assert "has no Batch API (uploading the batch input file: HTTP 404" in result.stderr


def test_the_progress_line_says_how_the_batch_stands(batches, prompts, tmp_path):
    import threading

    batches.hold.set()
    threading.Timer(1.0, batches.hold.clear).start()
    result = bv_inproc(
        f"bv rollout -m gpt-4o --base-url {batches.base_url} --cache {tmp_path / 'c.sqlite'}"
        f" --batch {prompts}",
        env={"BV_PROGRESS_EVERY_S": "0.2"},
    )
    assert result.returncode == 0
    assert re.search(
        r"bv rollout: 0/12 done, .*batch batch_\d+ in_progress, 0/12 requests done", result.stderr
    )
    assert "bv rollout: 12 rows, 0 errors, 0 cache hits, 12 requests" in result.stderr


def test_azure_batch_end_to_end(batches, prompts, tmp_path):
    env = {
        "AZURE_OPENAI_ENDPOINT": batches.azure_endpoint,
        "AZURE_OPENAI_API_KEY": "azure-key-0123",
        "AZURE_OPENAI_API_VERSION": "2024-10-21",
    }
    command = f"bv rollout --backend azure -m gpt-4o-batch --cache {tmp_path / 'c.sqlite'} --batch {prompts}"
    result = bv_inproc(command, env=env)
    assert result.returncode == 0, result.stderr
    rows = jsonl(result.stdout)
    assert len(rows) == 12 and all(r["backend"] == "azure" and r["response"] == "\\boxed{A}" for r in rows)
    paths = {(c.method, c.path) for c in batches.seen}
    assert {("POST", "/openai/files"), ("POST", "/openai/batches")} <= paths
    assert all(c.query.get("api-version") == "2024-10-21" for c in batches.seen)


def test_a_content_filter_refusal_inside_a_batch_is_named(batches, prompts, tmp_path):
    """Azure's HTTP 400 policy body (tests/fixtures/replies/azure_content_filter_error.json) as
    a result line's response: the row's error and content_filter, as online."""
    refused = json.loads((FIXTURES / "replies/azure_content_filter_error.json").read_text())
    body = json.dumps(refused["body"]).encode()
    batches.responder = lambda line: Reply(status=400, body=body)
    status, rows, _ = rollout(batches, prompts, tmp_path / "c.sqlite", "--batch")
    assert status == 1 and all(r["content_filter"] and "content filter refused" in r["error"] for r in rows)
