"""bv models: what an endpoint serves, through the real openai client against the loopback server."""

from __future__ import annotations

import json

from support.commands import bv_inproc
from support.fakeopenai import Reply

KEY = "sk-test-models-0123456789abcdef"


def test_lists_model_ids_with_the_rollout_endpoint_options(server):
    server.models = ["Qwen/Qwen2.5-VL-7B-Instruct", "evil\x1b[31mred"]
    result = bv_inproc(f"bv models --base-url {server.base_url} --api-key {KEY}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["Qwen/Qwen2.5-VL-7B-Instruct", "evil\\x1b[31mred"]
    assert [s.path for s in server.seen] == ["/v1/models"]
    assert server.seen[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in result.stdout + result.stderr
    listed = bv_inproc("bv models --json", env={"OPENAI_BASE_URL": server.base_url})
    records = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [r["id"] for r in records] == server.models
    assert records[0]["endpoint"] == server.base_url and records[0]["owned_by"] == "fake"


def test_a_404_suggests_the_missing_v1(server):
    server.responder = lambda seen: Reply(status=404)
    bare = server.base_url.removesuffix("/v1")
    result = bv_inproc(f"bv models --base-url {bare}")
    assert result.returncode == 1
    assert f"{bare}/models answered 404 (not found)" in result.stderr
    assert f"did you mean --base-url {bare}/v1 ?" in result.stderr
    assert "Traceback" not in result.stderr


def test_refused_key_unreachable_server_and_no_endpoint_are_clear(server):
    server.responder = lambda seen: Reply(status=401)
    refused = bv_inproc(f"bv models --base-url {server.base_url} --api-key {KEY}")
    assert refused.returncode == 1 and "refused the API key from --api-key (HTTP 401)" in refused.stderr
    assert KEY not in refused.stderr
    unreachable = bv_inproc("bv models --base-url http://127.0.0.1:9/v1 --timeout 5")
    assert unreachable.returncode == 1 and "cannot reach http://127.0.0.1:9/v1" in unreachable.stderr
    nothing = bv_inproc("bv models")
    assert nothing.returncode == 1 and "no endpoint to ask: give --base-url URL" in nothing.stderr


def test_a_base_url_without_a_scheme_is_a_usage_error(server):
    result = bv_inproc("bv models --base-url localhost:8000")
    assert result.returncode == 2 and "needs an http:// or https:// scheme" in result.stderr
    assert server.seen == []
