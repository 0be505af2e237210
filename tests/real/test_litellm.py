"""bv through a real LiteLLM proxy (1.106.12) in front of a loopback provider (tests/support/
fakebatch.py: chat completions, files and batches, refusing any model it does not serve, as
OpenAI does): online and batch, with the provider's model name and with a proxy alias.
The configuration is docs/batch.md's."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.commands import jsonl, sh
from support.fakebatch import FakeBatch
from support.fakeopenai import Reply
from support.real_parts import RAN_AGAINST, free_port, part, stop, version_of, wait_http

SERVED = "gpt-4o-mini"  # the only model the provider serves
MASTER_KEY = "sk-bv-test-master"
PROVIDER_KEY = "sk-bv-test-provider"
CONFIG = """\
model_list:
  - model_name: {served}
    litellm_params:
      model: openai/{served}
      api_base: {provider}
      api_key: os.environ/OPENAI_API_KEY
  - model_name: vl-batch                      # an alias: mapped online, not inside a batch file
    litellm_params:
      model: openai/{served}
      api_base: {provider}
      api_key: os.environ/OPENAI_API_KEY
files_settings:
  - custom_llm_provider: openai
    api_base: {provider}
    api_key: os.environ/OPENAI_API_KEY
general_settings:
  master_key: os.environ/LITELLM_MASTER_KEY
"""


def respond(line: dict) -> Reply:
    """The provider (a batch line, or an online request as one): answers a request for the model
    it serves; any other name is a 404, as OpenAI answers it."""
    model = line["body"].get("model")
    if model != SERVED:
        error = {"error": {"message": f"The model `{model}` does not exist", "code": "model_not_found"}}
        return Reply(status=404, body=json.dumps(error).encode())
    return Reply(content="\\boxed{A}")


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeBatch]:
    fake = FakeBatch(respond)
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def proxy(provider: FakeBatch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a running LiteLLM proxy with docs/batch.md's configuration."""
    litellm = part("proxy", "litellm")
    RAN_AGAINST["proxy"] = version_of(litellm.with_name("python"), "litellm", "fastapi", "uvicorn")
    folder = tmp_path_factory.mktemp("litellm")
    config = folder / "litellm-config.yaml"
    config.write_text(CONFIG.format(served=SERVED, provider=provider.base_url))
    port = free_port()
    env = {
        **os.environ,
        "OPENAI_API_KEY": PROVIDER_KEY,
        "LITELLM_MASTER_KEY": MASTER_KEY,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of the price map from the network
        "LITELLM_TELEMETRY": "False",
    }
    log = folder / "proxy.log"
    server = subprocess.Popen(
        [litellm, "--config", config, "--host", "127.0.0.1", "--port", str(port)],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health/liveliness", server, log, timeout=180)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop(server)


@pytest.fixture(scope="module")
def prompts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("items")
    assert sh(f"bv synth --n 6 --seed 5 --out {out}").returncode == 0
    prompts = out / "prompts.jsonl"
    prompts.write_text(sh(f"bv prompt {out}/meta_data.jsonl").stdout)
    return prompts


def rollout(proxy: str, prompts: Path, model: str, cache: Path, *extra: str):
    return sh(
        f"bv rollout --base-url {proxy} -m {model} --api-key {MASTER_KEY} --cache {cache} {' '.join(extra)}"
        f" {prompts}",
        env={"BV_BATCH_POLL_S": "0.5"},
        timeout=300,
    )


def test_online_through_the_proxy_with_the_name_and_the_alias(proxy, provider, prompts, tmp_path):
    for model in (SERVED, "vl-batch"):
        result = rollout(proxy, prompts, model, tmp_path / f"{model}.sqlite")
        assert result.returncode == 0, result.stderr
        rows = jsonl(result.stdout)
        assert len(rows) == 6 and all(row["response"] == "\\boxed{A}" for row in rows)
    assert provider.chats >= 12  # online, the alias was mapped to the provider's name


def test_batch_with_the_providers_name_gives_the_online_rows(proxy, provider, prompts, tmp_path):
    online = rollout(proxy, prompts, SERVED, tmp_path / "online.sqlite")
    created = provider.creations
    batch = rollout(proxy, prompts, SERVED, tmp_path / "batch.sqlite", "--batch")
    assert batch.returncode == 0, batch.stderr
    assert "proxy alias" not in batch.stderr
    assert provider.creations == created + 1  # one batch, through the proxy to the provider
    key = lambda row: (row["id"], row["run"])  # noqa: E731
    by_online = {key(r): r["response"] for r in jsonl(online.stdout)}
    assert {key(r): r["response"] for r in jsonl(batch.stdout)} == by_online


def test_batch_with_an_alias_warns_and_the_provider_refuses_every_line(proxy, provider, prompts, tmp_path):
    result = rollout(proxy, prompts, "vl-batch", tmp_path / "alias.sqlite", "--batch")
    assert "cannot tell whether that is the provider's model name or a proxy alias" in result.stderr
    rows = jsonl(result.stdout)
    assert result.returncode == 1 and len(rows) == 6
    assert all("vl-batch" in (row["error"] or "") for row in rows), rows[0]["error"]
    models = {line["body"]["model"] for job in provider.jobs.values() for line in job.lines}
    assert "vl-batch" in models  # the alias reached the provider as written, as docs/batch.md says
