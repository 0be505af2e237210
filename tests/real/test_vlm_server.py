"""bv against a real `transformers serve` on the CPU, serving a tiny random-weight LLaVA built
from configs on the spot (tests/real/tiny_vlm.py: nothing downloaded). The server pins `-m` to
the model's path and answers GET /v1/models with a 500 (no Hugging Face cache here): bv models,
bv rollout and bv eval must read it right, and the image must really go through the model."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.commands import jsonl, sh
from support.real_parts import RAN_AGAINST, free_port, part, stop, version_of, wait_http

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def vlm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(base URL, model path) of a running `transformers serve`."""
    python = part("vlm", "python")
    serve = part("vlm", "transformers")
    folder = tmp_path_factory.mktemp("vlm")
    model = folder / "tiny-llava"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(folder / "hf"),
        "TOKENIZERS_PARALLELISM": "false",
    }
    built = subprocess.run(
        [python, HERE / "tiny_vlm.py", model], capture_output=True, text=True, env=env, timeout=300
    )
    assert built.returncode == 0, built.stderr[-3000:]
    RAN_AGAINST["vlm"] = (
        f"{version_of(python, 'transformers', 'torch', 'fastapi', 'uvicorn')};"
        f" `transformers serve` of {built.stdout.strip().split(': ', 1)[-1]}"
    )
    port = free_port()
    log = folder / "serve.log"
    server = subprocess.Popen(
        [serve, "serve", model, "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health", server, log, timeout=180)
        yield f"http://127.0.0.1:{port}/v1", str(model)
    finally:
        stop(server)


@pytest.fixture(scope="module")
def items(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("items")
    assert sh(f"bv synth --n 4 --seed 3 --out {out}").returncode == 0
    return out / "meta_data.jsonl"


def test_bv_models_says_the_server_does_not_list_its_models(vlm):
    base_url, _ = vlm
    result = sh(f"bv models --base-url {base_url}")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "answered HTTP 500: the server does not list its models" in result.stderr, result.stderr


def test_another_model_name_stops_at_once_naming_the_pinned_one(vlm, items):
    base_url, model = vlm
    result = sh(f"bv prompt {items} | bv rollout --base-url {base_url} -m qwen -j 1 --no-cache")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"Server is pinned to '{model}'" in result.stderr
    assert f"run with -m/--model {model}" in result.stderr, result.stderr


def test_eval_runs_and_the_image_goes_through_the_model(vlm, items, tmp_path):
    base_url, model = vlm
    run = tmp_path / "run"
    result = sh(f"bv eval {items} --base-url {base_url} -m {model} --max-tokens 8 -j 2 -o {run}", timeout=600)
    assert result.returncode == 0, result.stderr
    rows = jsonl((run / "results.jsonl").read_text())
    assert len(rows) == 4 and all(row["error"] is None and row["model"] == model for row in rows)
    assert all(row["usage"]["completion_tokens"] > 0 for row in rows)
    # The same request without its image: the prompt is shorter by the image's tokens (16 patch
    # features of the tiny model's 32x32 input, and its marker), so the image went through the model.
    prompts = jsonl(sh(f"bv prompt {items}").stdout)
    first = next(p for p in prompts if p["id"] == rows[0]["id"])
    text_only = [
        {**m, "content": [c for c in m["content"] if c.get("type") == "text"]}
        if isinstance(m["content"], list)
        else m
        for m in first["messages"]
    ]
    body = json.dumps({"model": model, "messages": text_only, "max_tokens": 1}).encode()
    request = urllib.request.Request(
        f"{base_url}/chat/completions", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as answer:
        without = json.load(answer)["usage"]["prompt_tokens"]
    assert 16 <= rows[0]["usage"]["prompt_tokens"] - without <= 20, (rows[0]["usage"], without)
