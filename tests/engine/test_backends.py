"""Backends against loopback servers: replicas share the load, Azure routing, the cache's contents."""

from __future__ import annotations

import json
import sqlite3

from support.commands import bv_inproc, jsonl
from support.fakeopenai import FakeOpenAI, Reply

KEY = "sk-live-ZZZZsecretkeyvalue0123456789"


def test_replicas_share_load_and_a_failing_one_rests(sample_dir, tmp_path):
    good, bad = (
        FakeOpenAI(lambda seen: Reply(content="\\boxed{A}")),
        FakeOpenAI(lambda seen: Reply(status=503)),
    )
    good.start(), bad.start()
    try:
        result = bv_inproc(
            f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --base-url {bad.base_url}"
            f" --base-url {good.base_url} -m m -j 4 --no-cache --retries 8",
            env={"BV_RETRY_BASE_S": "0.01"},
        )
        rows = jsonl(result.stdout)
        assert result.returncode == 0 and rows and all(r["error"] is None for r in rows)
        assert len(good.finished()) == len(rows)
        assert len(bad.seen) <= 6  # three failures in a row, and it rests
    finally:
        good.stop(), bad.stop()


def test_replicas_least_in_flight(sample_dir):
    slow = FakeOpenAI(lambda seen: Reply(content="\\boxed{A}", delay=0.6))
    fast = FakeOpenAI(lambda seen: Reply(content="\\boxed{A}"))
    slow.start(), fast.start()
    try:
        result = bv_inproc(
            f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --base-url {slow.base_url}"
            f" --base-url {fast.base_url} -m m -j 2 --no-cache"
        )
        assert result.returncode == 0
        assert (
            len(fast.seen) > len(slow.seen) >= 1
        )  # the slow one holds its slot; the fast one serves the rest
    finally:
        slow.stop(), fast.stop()


def test_azure_backend_routes_to_the_deployment(sample_dir, server, tmp_path):
    server.responder = lambda seen: Reply(content="\\boxed{C}")
    env = {
        "AZURE_OPENAI_ENDPOINT": f"http://127.0.0.1:{server.port}",
        "AZURE_OPENAI_API_KEY": KEY,
        "AZURE_OPENAI_API_VERSION": "2024-10-21",
    }
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --backend azure -m my-deployment -j 2"
        " --no-cache",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    rows = jsonl(result.stdout)
    assert rows and all(r["backend"] == "azure" and r["model"] == "my-deployment" for r in rows)
    seen = server.seen[0]
    assert seen.path == "/openai/deployments/my-deployment/chat/completions?api-version=2024-10-21"
    assert seen.headers["api-key"] == KEY


def test_azure_without_settings_names_what_is_missing(sample_dir):
    result = bv_inproc(f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --backend azure -m d")
    assert (
        result.returncode == 1
        and "AZURE_OPENAI_ENDPOINT" in result.stderr
        and "Traceback" not in result.stderr
    )


def test_cache_holds_replies_not_keys_and_can_be_inspected(sample_dir, server, tmp_path):
    server.responder = lambda seen: Reply(content="\\boxed{D}")
    cache = tmp_path / "cache.sqlite"
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --base-url {server.base_url}"
        f" --api-key {KEY} -m model-x --cache {cache} > /dev/null"
    )
    assert result.returncode == 0, result.stderr
    db = sqlite3.connect(cache)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    n = db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]
    assert n == len(server.seen)
    db.close()
    for path in tmp_path.glob("cache.sqlite*"):
        assert KEY.encode() not in path.read_bytes() and KEY[-12:].encode() not in path.read_bytes()
    stats = json.loads(bv_inproc(f"bv cache stats --cache {cache}").stdout)
    assert stats["replies"] == n and stats["models"][0]["model"] == "model-x"
    assert "deleted 0 replies" in bv_inproc(f"bv cache clear --cache {cache} --model other").stderr
    assert f"deleted {n} replies" in bv_inproc(f"bv cache clear --cache {cache} --all").stderr
    assert json.loads(bv_inproc(f"bv cache stats --cache {cache}").stdout)["replies"] == 0


def test_default_cache_follows_xdg(sample_dir, server, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    server.responder = lambda seen: Reply(content="\\boxed{A}")
    bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --base-url {server.base_url} -m m > /dev/null"
    )
    assert (tmp_path / "xdg" / "bv" / "cache.sqlite").exists()


def test_max_pixels_is_part_of_the_request(sample_dir, server, tmp_path):
    """Downscaled images are other requests: neither served from the full-size cache nor sent full size."""
    server.responder = lambda seen: Reply(content="\\boxed{A}")
    cache = tmp_path / "cache.sqlite"
    base = f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --base-url {server.base_url} -m m"
    base += f" --cache {cache}"
    assert bv_inproc(f"{base} > /dev/null").returncode == 0
    first = len(server.seen)
    rows = jsonl(bv_inproc(f"{base} --max-pixels 5000").stdout)
    assert len(server.seen) == 2 * first
    assert all(r["params"] == {"max_pixels": 5000} for r in rows)
    assert all("max_pixels" not in s.body for s in server.seen)  # bv's own parameter, not the API's
    image = next(p for p in server.seen[-1].body["messages"][1]["content"] if p["type"] == "image_url")
    assert len(image["image_url"]["url"]) < 20_000
