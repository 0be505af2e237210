"""bv posts chat requests with aiohttp directly (issue 11: the SDK's request building cost half of
bv's CPU). These tests hold it to the real `openai` SDK: the same request, sent by the SDK and by
bv's backend to the same loopback server, arrives at the same path with the same body and the
headers that matter (key, organisation, project, content and accepted types), for OpenAI and for Azure."""

from __future__ import annotations

import asyncio
import base64
import io

import pytest
from PIL import Image

from bv.engine.backends import make_backend
from bv.engine.endpoints import resolve

KEY = "sk-conformance-0123456789abcdef"
SENT_BY_BOTH = ("accept", "authorization", "api-key", "content-type", "openai-organization", "openai-project")


def _image_url(tmp_path) -> str:
    path = tmp_path / "cell.png"
    Image.new("RGB", (12, 8), (200, 30, 30)).save(path)
    return path.as_uri()


def _messages(image_url: str) -> list[dict]:
    return [
        {"role": "system", "content": "You are a careful observer."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Which cell is red? Options: A. left B. right"},
                {"type": "image_url", "image_url": {"url": image_url}},
            ],
        },
    ]


def _bv_then_sdk(server, backend, sdk_client, params: dict) -> tuple:
    """bv sends the messages (inlining the image), then the SDK sends what bv sent."""
    messages = _messages(_image_url(server.tmp_path))
    reply = asyncio.run(_complete(backend, messages, params))
    assert reply.content == "\\boxed{A}" and reply.usage == {"prompt_tokens": 10, "completion_tokens": 5}
    ours = server.seen[-1]
    sdk_params = {k: v for k, v in ours.body.items() if k not in ("model", "messages")}
    completion = sdk_client.chat.completions.create(
        model=ours.body["model"], messages=ours.body["messages"], **sdk_params
    )
    assert completion.choices[0].message.content == reply.content
    return ours, server.seen[-1]


async def _complete(backend, messages, params):
    try:
        return await backend.complete(messages, **params)
    finally:
        await backend.aclose()


def _same_request(ours, sdk) -> None:
    assert ours.path == sdk.path
    assert ours.body == sdk.body
    for name in SENT_BY_BOTH:
        assert ours.headers.get(name) == sdk.headers.get(name), name


@pytest.fixture
def served(server, tmp_path):
    server.tmp_path = tmp_path
    return server


def test_openai_request_matches_the_sdk(served):
    openai = pytest.importorskip("openai")
    env = {"OPENAI_ORG_ID": "org-bv", "OPENAI_PROJECT_ID": "proj-bv"}
    endpoint = resolve("openai", model="qwen-vl", base_url=[served.base_url], api_key=KEY, env=env)
    backend = make_backend("openai", endpoint=endpoint)
    client = openai.OpenAI(
        base_url=served.base_url, api_key=KEY, organization="org-bv", project="proj-bv", max_retries=0
    )
    ours, sdk = _bv_then_sdk(
        served, backend, client, {"max_tokens": 64, "temperature": 0.0, "seed": 3, "run": 1}
    )
    _same_request(ours, sdk)
    assert ours.path.endswith("/chat/completions")
    assert ours.headers["authorization"] == f"Bearer {KEY}"
    assert "run" not in ours.body  # bv's own parameters never reach the server
    url = ours.body["messages"][1]["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).size == (12, 8)


def test_azure_request_matches_the_sdk(served):
    openai = pytest.importorskip("openai")
    env = {
        "AZURE_OPENAI_ENDPOINT": f"http://127.0.0.1:{served.port}",
        "AZURE_OPENAI_API_KEY": KEY,
        "AZURE_OPENAI_API_VERSION": "2024-10-21",
    }
    endpoint = resolve("azure", model="my-deployment", env=env)
    backend = make_backend("azure", endpoint=endpoint)
    client = openai.AzureOpenAI(
        azure_endpoint=env["AZURE_OPENAI_ENDPOINT"],
        api_key=KEY,
        api_version=env["AZURE_OPENAI_API_VERSION"],
        azure_deployment="my-deployment",
        max_retries=0,
    )
    ours, sdk = _bv_then_sdk(served, backend, client, {"max_tokens": 64})
    _same_request(ours, sdk)
    assert ours.path == "/openai/deployments/my-deployment/chat/completions?api-version=2024-10-21"
    assert ours.headers["api-key"] == KEY and "authorization" not in ours.headers
