"""The reply cache in process: what a key depends on, round trips, clearing, and a cache that
fails mid-run (the run goes on without it; the reply is never lost)."""

from __future__ import annotations

import shutil
import sqlite3
import time

import pytest
from PIL import Image

from bv.engine.backends import Reply
from bv.engine.cache import CacheUnusable, ImageHashes, ReplyCache, request_key


def _key(messages, **changes):
    fields = dict(
        backend="openai", model="m", endpoint="http://h/v1", params={"temperature": 0}, run=0, turn=0
    )
    fields.update(changes)
    return request_key(messages=messages, image_hash=ImageHashes(), **fields)


def _messages(path):
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Which?"},
                {"type": "image_url", "image_url": {"url": path.as_uri()}},
            ],
        }
    ]


def test_a_key_names_everything_the_reply_depends_on_and_nothing_else(tmp_path):
    image = tmp_path / "a.png"
    Image.new("RGB", (4, 4), "red").save(image)
    messages = _messages(image)
    key = _key(messages)
    assert key == _key(messages)
    for change in (
        {"run": 1},
        {"turn": 1},
        {"model": "m2"},
        {"backend": "azure"},
        {"endpoint": "http://other/v1"},
        {"params": {"temperature": 1}},
    ):
        assert _key(messages, **change) != key, change
    moved = tmp_path / "elsewhere" / "b.png"
    moved.parent.mkdir()
    shutil.copy(image, moved)
    assert _key(_messages(moved)) == key  # the image by content, not by where it lies
    Image.new("RGB", (4, 4), "blue").save(moved)
    assert _key(_messages(moved)) != key


def test_replies_round_trip_and_clear_by_model_and_age(tmp_path):
    cache = ReplyCache(tmp_path / "c" / "cache.sqlite")
    reply = Reply("\\boxed{A} \ud800", "stop", {"prompt_tokens": 3, "completion_tokens": 1}, 0.25, "m-2024")
    cache.put("k1", "openai", "m", reply.to_json(), "http://a/v1")
    cache.put("k2", "openai", "other", Reply("x").to_json(), "http://b/v1")
    made = Reply(reply.content, "stop", reply.usage, 0.25, "m-2024", endpoint="http://a/v1")
    assert Reply.from_json(cache.get("k1")) == made  # with the endpoint that made it
    assert cache.get("missing") is None
    assert cache.stats()["replies"] == 2
    assert cache.clear(older_than_s=3600) == 0
    assert cache.clear(model="other") == 1 and cache.get("k2") is None
    time.sleep(0.01)
    assert cache.clear(older_than_s=0) == 1 and cache.stats()["replies"] == 0


def test_a_cache_that_fails_mid_run_says_so_once_and_is_left_alone(tmp_path, capsys):
    path = tmp_path / "cache.sqlite"
    cache = ReplyCache(path)
    cache.put("k", "openai", "m", Reply("a").to_json(), "http://a/v1")
    cache.db.close()
    cache.db = sqlite3.connect(":memory:")  # the table is gone: every statement now fails
    assert cache.get("k") is None
    cache.put("k2", "openai", "m", Reply("b").to_json(), "http://a/v1")  # never raises: the reply is paid for
    assert cache.get("k2") is None
    err = capsys.readouterr().err
    assert err.count("warning: the reply cache") == 1 and str(path) in err


def test_a_cache_that_cannot_be_opened_is_named(tmp_path):
    folder = tmp_path / "cache.sqlite"
    folder.mkdir()
    with pytest.raises(CacheUnusable, match=r"cache\.sqlite"):
        ReplyCache(folder)
