"""The rollout engine against a server that misbehaves: every item ends once, with a reply or an error."""

from __future__ import annotations

import collections
import json
import threading

from support.commands import bv_inproc, jsonl, read_items
from support.fakeopenai import Reply


def item_key(seen) -> str:
    """Which item a request is for: its user text plus image URL length, stable across retries."""
    return json.dumps(seen.body["messages"][1]["content"][0]["text"]) + str(len(json.dumps(seen.body)))


FAULTS = [
    Reply(hang=True),  # past --timeout; every item's first fault (see below)
    Reply(status=429, headers={"retry-after-ms": "30"}),
    Reply(status=429, headers={"retry-after": "0"}),
    Reply(status=500),
    Reply(status=503, headers={"retry-after-ms": "10"}),
    Reply(drop=True),
    Reply(body=b'{"id": "x", "choices": [{"message": {"content": "trunc'),
]
# Long enough that a real answer never times out on a loaded machine; the hanging one always does.
TIMEOUT_S = 1.5


def test_every_fault_is_retried_and_every_item_ends_once(prompts, server, tmp_path):
    """Each item meets every kind of fault once, in turn, before the server answers it. The hang
    comes first for every item, while all of them are in flight at once (-j 12) and before any 429
    halves the requests in flight, so the run waits about one timeout, not one per item; the
    other faults follow in an order of the item's own."""
    tries = collections.Counter()
    lock = threading.Lock()

    def respond(seen):
        with lock:
            key = item_key(seen)
            attempt = tries[key]
            tries[key] += 1
        if attempt == 0:
            return FAULTS[0]
        if attempt < len(FAULTS):
            return FAULTS[1 + (attempt + hash(key)) % (len(FAULTS) - 1)]
        return Reply(content="ok \\boxed{A}")

    server.responder = respond
    result = bv_inproc(
        f"bv rollout --base-url {server.base_url} -m m -j 12 --timeout {TIMEOUT_S} --retries {len(FAULTS)}"
        f" --no-cache {prompts} > {tmp_path}/out.jsonl",
        env={"BV_RETRY_BASE_S": "0.01"},
    )
    assert result.returncode == 0, result.stderr
    rows = jsonl((tmp_path / "out.jsonl").read_text())
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) == len(jsonl(prompts.read_text()))
    assert all(r["error"] is None and r["response"] == "ok \\boxed{A}" for r in rows), result.stderr
    assert len(tries) == len(ids) and all(n == len(FAULTS) + 1 for n in tries.values()), tries


def test_retries_run_out_into_error_rows_that_are_not_cached(prompts, server, tmp_path):
    server.responder = lambda seen: Reply(status=503, headers={"retry-after-ms": "5"})
    cache = tmp_path / "cache.sqlite"
    command = (
        f"bv rollout --base-url {server.base_url} -m m -j 4 --retries 2 --cache {cache} {prompts}"
        f" > {tmp_path}/out.jsonl"
    )
    result = bv_inproc(command, env={"BV_RETRY_BASE_S": "0.01"})
    rows = jsonl((tmp_path / "out.jsonl").read_text())
    n = len(jsonl(prompts.read_text()))
    # Failed rows fail the stage (exit 1), yet every row is written, and the summary says so.
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"bv rollout: {n} of {n} rows failed; re-run the same command to retry only the failed rows:"
        " 0 rows are cached"
    )
    assert len(rows) == n and all(r["error"] == "HTTP 503 (gave up after 3 tries)" for r in rows)
    assert all(r["response"] is None for r in rows)
    assert len(server.seen) == 3 * n
    # The next run retries exactly the failed rows, and now they succeed.
    server.responder = lambda seen: Reply(content="\\boxed{B}")
    result = bv_inproc(command)
    assert result.returncode == 0
    rows = jsonl((tmp_path / "out.jsonl").read_text())
    assert all(r["error"] is None and r["response"] == "\\boxed{B}" for r in rows)
    assert len(server.seen) == 4 * n
    # And a third run is served from the cache.
    result = bv_inproc(command)
    assert len(server.seen) == 4 * n and f"{n} cache hits" in result.stderr


def test_fatal_auth_error_stops_the_run_with_a_clear_message(prompts, server, tmp_path):
    server.responder = lambda seen: Reply(status=401)
    key = "sk-secret-0123456789abcdefghij"
    result = bv_inproc(f"bv rollout --base-url {server.base_url} --api-key {key} -m m -j 2 {prompts}")
    assert result.returncode == 1
    assert (
        "refused the API key from --api-key (HTTP 401)" in result.stderr and "Traceback" not in result.stderr
    )
    assert key not in result.stderr + result.stdout
    assert len(server.seen) <= 4  # stopped early instead of failing every item


def test_waiting_retries_are_visible_on_stderr(prompts, server):
    state = {"n": 0}

    def respond(seen):
        state["n"] += 1
        if state["n"] <= 4:
            return Reply(status=429, headers={"retry-after": "1"})
        return Reply(content="\\boxed{A}")

    server.responder = respond
    result = bv_inproc(
        f"bv rollout --base-url {server.base_url} -m m -j 4 --no-cache {prompts}",
        env={"BV_PROGRESS_EVERY_S": "0.2"},
    )
    assert result.returncode == 0
    assert "waiting to retry (429 rate limited ×4)" in result.stderr


def test_repeats_are_runs_cached_apart(prompts, server, tmp_path):
    server.responder = lambda seen: Reply(content="\\boxed{C}")
    cache = tmp_path / "c.sqlite"
    command = f"bv rollout --base-url {server.base_url} -m m --repeats 3 --temperature 0.7 --cache {cache}"
    command += f" {prompts}"
    rows = jsonl(bv_inproc(command).stdout)
    n = len(jsonl(prompts.read_text()))
    assert sorted(collections.Counter((r["id"], r["run"]) for r in rows).values()) == [1] * 3 * n
    assert {r["run"] for r in rows} == {0, 1, 2} and len(server.seen) == 3 * n
    assert all(r["params"] == {"temperature": 0.7} for r in rows)
    assert all(s.body["temperature"] == 0.7 for s in server.seen)
    bv_inproc(command)
    assert len(server.seen) == 3 * n  # every run came from the cache


def test_refinement_turn_when_no_box(prompts, server, sample_dir):
    def respond(seen):
        if len(seen.body["messages"]) == 2:
            return Reply(content="I think it is the second one.", usage=(100, 7))
        return Reply(content="\\boxed{B}", usage=(130, 3))

    server.responder = respond
    rows = jsonl(
        bv_inproc(f"bv rollout --base-url {server.base_url} -m m --max-turns 2 --no-cache {prompts}").stdout
    )
    assert rows and all(len(r["turns"]) == 2 and r["response"] == "\\boxed{B}" for r in rows)
    assert rows[0]["usage"] == {"prompt_tokens": 230, "completion_tokens": 10}
    follow_up = next(s for s in server.seen if len(s.body["messages"]) == 4).body["messages"]
    assert follow_up[2] == {"role": "assistant", "content": "I think it is the second one."}
    assert follow_up[3]["content"].startswith("Your previous answer was: I think it is the second one.")
    assert rows[0]["turns"][0]["finish_reason"] == "stop" and rows[0]["turns"][0]["latency_s"] >= 0
    assert len(read_items(sample_dir)) == len(rows)
