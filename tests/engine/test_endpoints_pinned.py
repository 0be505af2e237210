"""A VLM server as `transformers serve MODEL` is (fixtures recorded from transformers 5.17.0): it
refuses every other model name with 400 "Server is pinned to …", and answers GET /v1/models with
a 500. `bv models`, `bv rollout` and `bv eval` say what to do, at once; and `bv rollout --batch`
warns when a proxy may not know its model name."""

from __future__ import annotations

import json

import pytest
from support.commands import bv_inproc, jsonl
from support.fakeopenai import Reply
from support.paths import FIXTURES

PINNED = "/models/tiny-vlm"  # what the recorded server was started with


def replay(name: str) -> Reply:
    """A recorded answer of the server (tests/fixtures/servers/NAME.json, naming its source):
    its status and body as sent (`text`: a body that is not JSON)."""
    fixture = json.loads((FIXTURES / "servers" / f"{name}.json").read_text())
    assert fixture["source"].startswith("recorded") and "transformers 5.17.0" in fixture["source"]
    text = fixture.get("text")
    body = text.encode() if text is not None else json.dumps(fixture["body"]).encode()
    return Reply(status=fixture["status"], headers=fixture.get("headers", {}), body=body)


@pytest.fixture
def pinned(server):
    def respond(seen):
        if seen.path.endswith("/models"):
            return replay("transformers_serve_models_500")
        if seen.body.get("model") != PINNED:
            return replay("transformers_serve_pinned")
        return Reply(content="\\boxed{A}")

    server.responder = respond
    return server


def test_models_says_the_server_does_not_list_them(pinned):
    result = bv_inproc(f"bv models --base-url {pinned.base_url}")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "answered HTTP 500: the server does not list its models" in result.stderr
    assert "give the model by name" in result.stderr and "transformers serve PATH" in result.stderr


def test_rollout_with_another_name_stops_at_once_naming_the_model(pinned, sample_dir):
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl"
        f" | bv rollout --base-url {pinned.base_url} -m qwen -j 1 --no-cache"
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"serves only the model it was started with: run with -m/--model {PINNED}" in result.stderr
    chats = [s for s in pinned.seen if s.path.endswith("/chat/completions")]
    assert len(chats) == 1  # the first refusal says every request would be refused: none more is sent


def test_eval_fails_fast_then_runs_with_the_pinned_name(pinned, sample_dir, tmp_path):
    wrong = bv_inproc(
        f"bv eval {sample_dir}/meta_data.jsonl --base-url {pinned.base_url} -m qwen -o {tmp_path}/wrong"
    )
    assert wrong.returncode != 0 and f"run with -m/--model {PINNED}" in wrong.stderr
    right = bv_inproc(
        f"bv eval {sample_dir}/meta_data.jsonl --base-url {pinned.base_url} -m {PINNED} -o {tmp_path}/right"
    )
    assert right.returncode == 0, right.stderr  # the 500 on /v1/models is no obstacle to a run
    rows = jsonl((tmp_path / "right" / "results.jsonl").read_text())
    assert len(rows) == 12 and all(row["model"] == PINNED and row["error"] is None for row in rows)


@pytest.mark.parametrize(
    ("model", "warned"),
    [("vl-batch", True), ("openai/gpt-4o-mini", True), ("gpt-4o-mini", False), ("o4-mini", False)],
)
def test_batch_through_a_proxy_warns_of_an_alias(server, sample_dir, tmp_path, model, warned):
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --base-url {server.base_url} -m {model} --batch"
        f" --cache {tmp_path}/cache.sqlite --dry-run"
    )
    assert result.returncode == 0, result.stderr
    assert (
        "cannot tell whether that is the provider's model name or a proxy alias" in result.stderr
    ) is warned


def test_batch_at_the_provider_does_not_warn(sample_dir, tmp_path):
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl"
        " | bv rollout --base-url https://api.openai.com/v1 -m my-ft-alias --api-key sk-test"
        f" --batch --cache {tmp_path}/cache.sqlite --dry-run"
    )
    assert result.returncode == 0, result.stderr
    assert "proxy alias" not in result.stderr
