"""Batch mode's engine against the loopback files/batches server (tests/support/fakebatch.py): the
request lines and calls bv builds, held to the `openai` SDK's own types; the replies it reads, in
the documented shapes; results into the reply cache under the keys an online run uses; failures
inside a batch as row errors; the recorded batch resumed, never created twice."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from support.fakebatch import FakeBatch, batch_server, fixture, quick_batch_polls  # noqa: F401 (fixtures)
from support.fakeopenai import Reply
from support.sdk_types import check_request

from bv.core.errors import ItemFailure
from bv.core.run_context import RunContext, running
from bv.engine.backends import make_backend
from bv.engine.batch import BatchCaller, run_batch_stage
from bv.engine.batch_api import batch_info
from bv.engine.batch_lines import read_result
from bv.engine.batch_state import BatchState, folder_for
from bv.engine.cache import ImageHashes, ReplyCache, request_key
from bv.engine.caller import RunSettings
from bv.engine.endpoints import resolve
from bv.engine.progress import Stats

pydantic = pytest.importorskip("pydantic")
openai_types = pytest.importorskip("openai.types")
from openai.types import Batch, FileObject, batch_create_params, file_create_params  # noqa: E402

PARAMS = {"max_tokens": 64}


def messages(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"question {n}: answer in \\boxed{{}}"}]


def run(
    fake: FakeBatch, cache: Path, tasks: list[int], *, kind: str = "openai", turns: int = 1
) -> list[dict]:
    """A stage of `tasks` (one request each, up to `turns` turns while a reply has no box) in batch
    mode; the rows it wrote."""
    if kind == "azure":
        env = {
            "AZURE_OPENAI_ENDPOINT": fake.azure_endpoint,
            "AZURE_OPENAI_API_KEY": "azure-key-123",
            "AZURE_OPENAI_API_VERSION": "2024-10-21",
        }
        endpoint = resolve("azure", model="gpt-4o-batch", env=env)
    else:
        endpoint = resolve("openai", model="gpt-4o", base_url=[fake.base_url], api_key="sk-test", env={})
    backend = make_backend(kind, endpoint=endpoint)
    settings = RunSettings(cache_path=cache, quiet=True, ordered=True)
    stats = Stats(total=len(tasks))
    rows: list[dict] = []
    with running(RunContext(stage="rollout")):
        stopping = asyncio.Event()
        caller = BatchCaller.for_batches(backend, settings, stats, stopping, stage="rollout")

        async def work(n: int) -> dict:
            turn, conversation = 0, messages(n)
            while True:
                try:
                    reply, cached = await caller.call(conversation, PARAMS, run=0, turn=turn)
                except ItemFailure as exc:
                    return {"n": n, "error": str(exc), "turns": turn}
                if "\\boxed" in reply.content or turn + 1 == turns:
                    return {"n": n, "content": reply.content, "cached": cached, "turns": turn + 1}
                conversation = [
                    *conversation,
                    {"role": "assistant", "content": reply.content},
                    {"role": "user", "content": "again"},
                ]
                turn += 1

        outcome = run_batch_stage(
            tasks,
            work,
            rows.append,
            settings=settings,
            stats=stats,
            label="rollout",
            stopping=stopping,
            caller=caller,
            backend=backend,
        )
    assert outcome.fatal is None, outcome.fatal
    return rows


def test_a_batch_run_sends_sdk_shaped_requests_and_caches_under_online_keys(batches, tmp_path):
    cache = tmp_path / "cache.sqlite"
    rows = run(batches, cache, [0, 1, 2])
    assert [r["content"] for r in rows] == ["\\boxed{A}"] * 3 and not any(r["cached"] for r in rows)
    assert batches.creations == 1
    upload = next(c for c in batches.seen if c.method == "POST" and c.path == "/v1/files")
    assert upload.headers["authorization"] == "Bearer sk-test"
    # The upload's fields and the create body are what the SDK's own parameter types declare.
    assert set(upload.form) - {"filename"} <= set(file_create_params.FileCreateParams.__annotations__)
    assert upload.form["purpose"] == "batch"
    create = next(c for c in batches.seen if c.method == "POST" and c.path == "/v1/batches")
    pydantic.TypeAdapter(batch_create_params.BatchCreateParams).validate_python(create.json)
    assert set(create.json) <= set(batch_create_params.BatchCreateParams.__annotations__)
    assert create.json["endpoint"] == "/v1/chat/completions" and create.json["completion_window"] == "24h"
    # Each input line: the envelope, and a body the SDK's chat request type takes key for key.
    lines = [json.loads(line) for line in upload.form["file"].splitlines()]
    hashes = ImageHashes()
    keys = set()
    for line in lines:
        assert set(line) == {"custom_id", "method", "url", "body"}
        assert line["method"] == "POST" and line["url"] == "/v1/chat/completions"
        check_request(line["body"])
        keys.add(line["custom_id"])
    online = {
        request_key(
            backend="openai",
            model="gpt-4o",
            endpoint=None,
            messages=messages(n),
            params=PARAMS,
            run=0,
            turn=0,
            image_hash=hashes,
        )
        for n in range(3)
    }
    assert keys == online  # each custom_id is the key an online run uses ...
    stored = ReplyCache(cache)
    assert all(stored.get(key)["content"] == "\\boxed{A}" for key in online)  # ... and holds its reply
    assert not list(folder_for(cache).glob("*.json"))  # collected: nothing left to resume
    # The server's replies are the SDK's own types.
    for job in batches.jobs.values():
        Batch.model_validate(job.info)
    FileObject.model_validate(fixture("openai_file"))


def test_a_second_run_is_all_cache_hits(batches, tmp_path):
    cache = tmp_path / "cache.sqlite"
    run(batches, cache, [0, 1])
    rows = run(batches, cache, [0, 1])
    assert all(r["cached"] for r in rows) and batches.creations == 1


def test_refinement_turns_go_as_a_second_batch(batches, tmp_path):
    batches.responder = lambda line: Reply(
        content="no box" if len(line["body"]["messages"]) == 1 else "\\boxed{B}"
    )
    rows = run(batches, tmp_path / "cache.sqlite", [0, 1, 2], turns=2)
    assert [(r["turns"], r["content"]) for r in rows] == [(2, "\\boxed{B}")] * 3
    assert batches.creations == 2


def test_failures_inside_a_batch_are_row_errors(batches, tmp_path):
    refused = json.dumps(fixture("openai_error_status_line")["response"]["body"]).encode()
    batches.responder = lambda line: (
        Reply(status=400, body=refused) if "question 1" in json.dumps(line) else Reply()
    )
    cache = tmp_path / "cache.sqlite"
    rows = run(batches, cache, [0, 1])
    assert rows[0]["content"] == "\\boxed{A}"
    assert rows[1]["error"].startswith("HTTP 400: Unsupported parameter: 'max_tokens'")
    assert "in batch batch_" in rows[1]["error"]
    assert "gpt-4o wants max_completion_tokens" in rows[1]["error"]  # the hint an online 400 gets
    rows = run(batches, cache, [0, 1])  # the failed row only is sent again, in a new batch
    assert rows[0]["cached"] and batches.creations == 2


@pytest.mark.parametrize("outcome", ["expired", "cancelled", "failed"])
def test_an_ended_batch_fails_the_requests_it_did_not_run(batches, tmp_path, outcome):
    batches.outcome = outcome
    batches.errors = [
        {"code": "invalid_request", "message": "model gpt-4o is not a batch deployment", "line": None}
    ]
    rows = run(batches, tmp_path / "cache.sqlite", [0, 1])
    for row in rows:
        assert "batch batch_" in row["error"] and outcome in row["error"]
    if outcome == "expired":
        assert "batch_expired: This request could not be executed" in rows[0]["error"]
    if outcome == "failed":
        assert "not a batch deployment" in rows[0]["error"]


def test_a_run_stopped_while_polling_is_resumed_by_the_next_not_resubmitted(batches, tmp_path, capfd):
    """Ctrl-C while the batch runs: no row is written, the batch stays recorded (its id, its input
    file), and the next run polls that batch: one batch created in all."""
    import os
    import signal
    import threading
    import time

    cache = tmp_path / "cache.sqlite"
    state = BatchState(folder_for(cache))
    batches.hold.set()

    def interrupt_once_polling() -> None:
        while (
            not any(r.batch_id for r in state.records(batches.base_url, "gpt-4o")) or batches.retrievals < 2
        ):
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    helper = threading.Thread(target=interrupt_once_polling)
    helper.start()
    assert run(batches, cache, [0, 1]) == []
    helper.join()
    record = state.records(batches.base_url, "gpt-4o")[0]
    assert record.batch_id in batches.jobs and record.input_file_id in batches.files and len(record.keys) == 2
    assert "goes on on the server; run the same command again" in capfd.readouterr().err
    batches.hold.clear()
    rows = run(batches, cache, [0, 1])
    assert [r["content"] for r in rows] == ["\\boxed{A}"] * 2
    assert batches.creations == 1 and f"resuming batch {record.batch_id}" in capfd.readouterr().err
    assert not state.records(batches.base_url, "gpt-4o")


def test_a_batch_whose_id_was_not_recorded_is_found_by_its_input_file(batches, tmp_path):
    """A run killed between creating its batch and recording the batch's id left only the input
    file's id: the next run finds the batch in the endpoint's list of batches, creates none."""
    import os
    import signal
    import threading
    import time

    cache = tmp_path / "cache.sqlite"
    state = BatchState(folder_for(cache))
    batches.hold.set()
    for n in range(3):  # other batches on the server, listed before it on the first page
        batches.files[f"file-other{n}"] = b""
        batches._create({"input_file_id": f"file-other{n}", "endpoint": "/v1/chat/completions"})

    def interrupt() -> None:
        while not any(r.batch_id for r in state.records(batches.base_url, "gpt-4o")):
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    helper = threading.Thread(target=interrupt)
    helper.start()
    run(batches, cache, [0, 1])
    helper.join()
    record = state.records(batches.base_url, "gpt-4o")[0]
    record.batch_id = None
    state.save(record)
    for n in range(120):  # newer batches: the one sought is on the list's second page
        batches.files[f"file-newer{n}"] = b""
        batches._create({"input_file_id": f"file-newer{n}", "endpoint": "/v1/chat/completions"})
    created = batches.creations
    batches.hold.clear()
    rows = run(batches, cache, [0, 1])
    assert [r["content"] for r in rows] == ["\\boxed{A}"] * 2 and batches.creations == created
    pages = [c.query for c in batches.seen if c.path == "/v1/batches" and c.method == "GET"]
    assert pages[0] == {"limit": "100"} and pages[1]["after"]


def test_azure_paths_and_shapes(batches, tmp_path):
    rows = run(batches, tmp_path / "cache.sqlite", [0], kind="azure")
    assert rows[0]["content"] == "\\boxed{A}"
    upload = next(c for c in batches.seen if c.method == "POST" and c.path == "/openai/files")
    assert upload.query == {"api-version": "2024-10-21"} and upload.headers["api-key"] == "azure-key-123"
    assert "authorization" not in upload.headers
    create = next(c for c in batches.seen if c.method == "POST" and c.path == "/openai/batches")
    assert create.json["endpoint"] == "/chat/completions"
    line = json.loads(upload.form["file"])
    assert line["url"] == "/chat/completions" and line["body"]["model"] == "gpt-4o-batch"


def test_documented_reply_shapes_are_read():
    azure = batch_info(fixture("azure_batch_rest"))
    assert azure.status == "validating" and azure.total is None and not azure.done
    done = batch_info(fixture("azure_batch_completed"))
    assert done.done and done.error_file_id and (done.completed, done.total) == (3, 3)
    key, reply = read_result(json.dumps(fixture("azure_output_line")).encode(), "b")
    assert (
        key == "task-0"
        and reply.content.startswith("Microsoft was founded")
        and reply.usage["prompt_tokens"] == 27
    )
    key, reply = read_result(json.dumps(fixture("openai_output_line")).encode(), "b")
    assert reply.content == "2 + 2 equals 4." and reply.finish_reason == "stop"
    key, failure = read_result(json.dumps(fixture("openai_expired_line")).encode(), "batch_x")
    assert isinstance(failure, ItemFailure) and "batch_expired" in str(failure)
    assert read_result(b"not json", "b") is None and read_result(b'{"response": {}}', "b") is None
    Batch.model_validate(fixture("openai_batch"))


def test_requests_are_split_over_input_files_within_the_limits(batches, tmp_path, monkeypatch):
    monkeypatch.setenv("BV_BATCH_MAX_REQUESTS", "2")
    rows = run(batches, tmp_path / "cache.sqlite", [0, 1, 2, 3, 4])
    assert [r["content"] for r in rows] == ["\\boxed{A}"] * 5
    uploads = [c for c in batches.seen if c.path == "/v1/files"]
    assert sorted(len(c.form["file"].splitlines()) for c in uploads) == [1, 2, 2] and batches.creations == 3


def test_a_refused_key_stops_the_run_before_any_batch(batches, tmp_path):
    batches.api_key = "sk-right"
    with pytest.raises(AssertionError, match="refused the API key from `api_key`"):
        run(batches, tmp_path / "cache.sqlite", [0, 1])
    assert batches.creations == 0 and not list(folder_for(tmp_path / "cache.sqlite").glob("*.json"))


def test_urls_escape_what_they_carry():
    endpoint = resolve("openai", model="m", base_url=["http://h:1/v1/"], api_key="k", env={})
    from bv.engine.batch_api import BatchClient

    assert (
        BatchClient(endpoint).url("batches/b%201", {"after": "x&y"})
        == "http://h:1/v1/batches/b%201?after=x%26y"
    )


def test_a_completed_batch_with_an_error_file_leaves_no_record(batches, tmp_path):
    """Issue 34: Azure's completed batch names an error file even when nothing failed
    (tests/fixtures/batch/azure_batch_completed.json). The rows were answered from the output file
    and the stage ended while the error file was still being fetched, so the record stayed and
    every re-run "resumed" the old batch. The record goes once both files are read."""
    batches.always_error_file, batches.error_file_delay_s = True, 0.5
    cache = tmp_path / "cache.sqlite"
    rows = run(batches, cache, [0, 1, 2])
    assert [r["content"] for r in rows] == ["\\boxed{A}"] * 3
    error_file = next(iter(batches._error_files))
    assert any(c.path.endswith(f"/files/{error_file}/content") for c in batches.seen)  # it was read
    assert not list(folder_for(cache).glob("*.json"))  # and the record is gone
    again = run(batches, cache, [0, 1, 2, 3])  # a re-run resumes nothing: the new request goes anew
    assert [r["cached"] for r in again] == [True, True, True, False] and batches.creations == 2


def test_a_gzip_result_file_is_inflated_a_piece_at_a_time(batches):
    """Issue 34: ~66 KB of gzip inflating to 66 MiB of newlines took 1.2-1.7 GB, each chunk
    inflated whole and split; inflated INFLATE_PIECE at a time, the peak stays small."""
    import tracemalloc

    from bv.engine.batch_api import BatchClient

    line = json.dumps(fixture("openai_output_line")).encode()
    batches.files["file-bomb"] = b"\n" * (16 << 20) + line + b"\n"
    batches.gzip_files = True
    endpoint = resolve("openai", model="gpt-4o", base_url=[batches.base_url], api_key="sk-test", env={})

    async def read() -> list[bytes]:
        client = BatchClient(endpoint)
        try:
            return [got async for got in client.lines("file-bomb")]
        finally:
            await client.aclose()

    tracemalloc.start()
    try:
        got = asyncio.run(read())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == [line]
    assert peak < 12 << 20, peak  # the file inflates to 16 MiB; 128 MiB more when split whole


def test_a_batch_still_running_past_its_expiry_is_not_polled_forever(batches, tmp_path):
    """Issue 34: a batch in_progress past its expires_at was polled forever (377 polls in 20 s).
    Past expires_at and the grace, polling ends: its rows fail, saying so, and its record stays
    for a re-run to collect it should the server end it."""
    from bv.engine.batch_api import EXPIRY_GRACE_S

    batches.hold.set()
    batches.expires_in = -EXPIRY_GRACE_S - 60
    cache = tmp_path / "cache.sqlite"
    rows = run(batches, cache, [0, 1])
    assert all("past its expires_at" in r["error"] for r in rows), rows
    assert batches.retrievals < 5
    assert len(list(folder_for(cache).glob("*.json"))) == 1


def test_polls_past_a_batch_s_expiry_thin_out_until_the_grace_ends(batches, tmp_path):
    """Issue 43: a batch still running past its expires_at was polled at BV_BATCH_POLL_S (20 ms
    here: ~19 times a second) through the whole grace. Now each wait past it doubles, and the
    grace's end gives it up at once: 3 s of grace left is a handful of looks, not ~50."""
    from bv.engine.batch_api import EXPIRY_GRACE_S

    batches.hold.set()
    batches.expires_in = -EXPIRY_GRACE_S + 3
    rows = run(batches, tmp_path / "cache.sqlite", [0, 1])
    assert all("past its expires_at" in r["error"] for r in rows), rows
    assert batches.retrievals <= 12, batches.retrievals


def test_a_conflicting_twin_is_recorded_in_the_reply_kept(batches, tmp_path, capfd):
    """Issue 43: two different result lines for one request were resolved to the first with a
    count on stderr alone. The first still wins (documented in docs/batch.md), and the reply
    kept, in the cache and the row's turn, records how many lines disagreed."""

    def twin(content: bytes) -> bytes:
        first = content.splitlines(keepends=True)[0]
        other = json.loads(first)
        other["response"]["body"]["choices"][0]["message"]["content"] = "\\boxed{Z}"
        return content + json.dumps(other).encode() + b"\n"

    batches.mangle = twin
    cache = tmp_path / "cache.sqlite"
    rows = run(batches, cache, [0, 1])
    assert [r["content"] for r in rows] == ["\\boxed{A}"] * 2
    with ReplyCache(cache) as stored:
        said = sorted(entry["reply"].get("batch_conflicts", 0) for entry in stored.entries())
    assert said == [0, 1], said
    assert "its reply records how many others disagreed (batch_conflicts)" in capfd.readouterr().err
    assert not [p.name for p in folder_for(cache).iterdir() if p.name.startswith(".results")]


def test_a_torn_result_line_and_a_conflicting_twin_are_said_as_what_they_are(batches, tmp_path, capfd):
    """Issue 34: a torn result line left its request "completed before this request ran"; two
    lines for one custom_id with different answers: the first won without a word."""

    def torn(content: bytes) -> bytes:
        first, second, *_ = content.splitlines(keepends=True)
        return first + second[: len(second) // 2]  # the second line cut short, no newline

    batches.mangle = torn
    rows = run(batches, tmp_path / "cache.sqlite", [0, 1])
    errors = [r.get("error") for r in rows]
    assert errors[0] is None and "no readable result line" in errors[1], errors
    assert "before this request ran" not in errors[1]

    def twin(content: bytes) -> bytes:
        first = content.splitlines(keepends=True)[0]
        other = json.loads(first)
        other["response"]["body"]["choices"][0]["message"]["content"] = "\\boxed{Z}"
        return content + json.dumps(other).encode() + b"\n" + first  # a different twin, and a same one

    batches.mangle = twin
    capfd.readouterr()
    rows = run(batches, tmp_path / "cache2.sqlite", [0, 1])
    assert [r["content"] for r in rows] == ["\\boxed{A}"] * 2  # the first line of each is used
    said = capfd.readouterr().err
    assert "1 request a second, different result line" in said, said
