"""One way to ask an endpoint for its models (bv.engine.endpoints.fetch_models): `bv models` and the
model list a rollout's 404 names, with the same headers, for OpenAI-compatible servers and Azure."""

from __future__ import annotations

import asyncio
import gzip
import json

from support.commands import bv_inproc
from support.fakeopenai import Reply, models_body

from bv.engine.endpoints import MAX_MODEL_ID_CHARS, NoModelList, fetch_models, resolve

KEY = "sk-test-listing-0123456789abcdef"


def test_azure_lists_its_models_with_its_key_header_and_api_version(server):
    server.responder = lambda seen: Reply(body=models_body(["gpt-4o-deploy", "o3"]))
    root = server.base_url.removesuffix("/v1")
    env = {
        "AZURE_OPENAI_ENDPOINT": root,
        "AZURE_OPENAI_API_KEY": KEY,
        "AZURE_OPENAI_API_VERSION": "2024-10-21",
    }
    result = bv_inproc("bv models --backend azure --json", env=env)
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == ["gpt-4o-deploy", "o3"]
    assert json.loads(result.stdout.splitlines()[0])["endpoint"] == root
    (seen,) = server.seen
    assert seen.path == "/openai/models?api-version=2024-10-21"
    assert seen.headers["api-key"] == KEY and "authorization" not in seen.headers
    assert KEY not in result.stdout + result.stderr
    missing = bv_inproc("bv models --backend azure", env={**env, "AZURE_OPENAI_API_VERSION": ""})
    assert missing.returncode == 1 and "needs AZURE_OPENAI_API_VERSION" in missing.stderr


def test_openai_headers_from_the_environment_and_every_replica(server):
    env = {"OPENAI_API_KEY": KEY, "OPENAI_ORG_ID": "org-1", "OPENAI_PROJECT_ID": "proj-1"}
    result = bv_inproc(f"bv models --base-url {server.base_url} --base-url {server.base_url}/", env=env)
    assert result.returncode == 0 and result.stdout.splitlines() == ["fake-model", "fake-model"]
    assert [s.path for s in server.seen] == ["/v1/models", "/v1/models"]
    headers = server.seen[0].headers
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["openai-organization"] == "org-1" and headers["openai-project"] == "proj-1"


def test_what_the_server_lists_is_checked(server):
    entries = [
        {"id": "kept", "owned_by": 7, "created": "yesterday"},
        {"id": ""},
        {"id": 12},
        {"id": "x" * (MAX_MODEL_ID_CHARS + 1)},
        "not an object",
        {"id": "gzipped-too", "owned_by": "lab", "created": 1700000000},
    ]
    body = gzip.compress(json.dumps({"data": entries}).encode())
    server.responder = lambda seen: Reply(body=body, headers={"content-encoding": "gzip"})
    result = bv_inproc(f"bv models --base-url {server.base_url} --json")
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"id": "kept", "owned_by": None, "created": None, "endpoint": server.base_url},
        {"id": "gzipped-too", "owned_by": "lab", "created": 1700000000, "endpoint": server.base_url},
    ]


def test_an_answer_that_is_not_a_list_of_models_is_said(server):
    for body in (b"<html>hello</html>", b'{"data": {"id": "m"}}', b"[" * 100_000 + b"]" * 100_000):
        server.responder = lambda seen, body=body: Reply(body=body)
        result = bv_inproc(f"bv models --base-url {server.base_url}")
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert f"{server.base_url}/models did not answer with a list of models" in result.stderr
    server.responder = lambda seen: Reply(status=503)
    busy = bv_inproc(f"bv models --base-url {server.base_url}")
    assert busy.returncode == 1 and f"{server.base_url}/models answered HTTP 503" in busy.stderr


def test_fetch_models_in_process_says_why_not(server):
    endpoint = resolve("openai", model="*", base_url=[server.base_url], api_key=KEY)

    async def ask(url: str) -> list[dict] | NoModelList:
        import aiohttp

        async with aiohttp.ClientSession(auto_decompress=False) as session:
            try:
                return await fetch_models(session, endpoint, url)
            except NoModelList as exc:
                return exc

    server.models = ["a", "b"]
    assert [m["id"] for m in asyncio.run(ask(f"{server.base_url}/models"))] == ["a", "b"]
    server.responder = lambda seen: Reply(status=404)
    missing = asyncio.run(ask(f"{server.base_url}/models"))
    assert isinstance(missing, NoModelList) and missing.status == 404 and missing.answered
    refused = asyncio.run(ask("http://127.0.0.1:9/v1/models"))
    assert isinstance(refused, NoModelList) and not refused.answered and refused.status is None
    assert "connection refused by 127.0.0.1:9" in str(refused)


def test_a_rollout_404_names_what_bv_models_lists(sample_dir, server):
    server.models = ["served-a", "served-b"]
    server.responder = lambda seen: (
        Reply(body=models_body(server.models)) if seen.path.endswith("/models") else Reply(status=404)
    )
    rollout = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | head -1"
        f" | bv rollout --base-url {server.base_url} --api-key {KEY} -m nope --no-cache -q"
    )
    assert rollout.returncode == 1
    assert f"{server.base_url}/models serves: served-a, served-b." in rollout.stderr
    listed = bv_inproc(f"bv models --base-url {server.base_url} --api-key {KEY}")
    assert listed.stdout.splitlines() == ["served-a", "served-b"]
    models_requests = [s for s in server.seen if s.path.endswith("/models")]
    assert len(models_requests) == 2  # asked once by each, the same way
    assert models_requests[0].headers["authorization"] == models_requests[1].headers["authorization"]
