"""The replay path (bv.stages.replay): rows the reply cache answers whole are made without the
request engine, and are the engine's rows byte for byte, in the same order; a changed image is
hashed again, so its stale replies are never replayed."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3

import pytest
from PIL import Image
from support.commands import bv_inproc, jsonl
from support.fakeopenai import Reply

from bv.engine.cache import CACHE_VERSION, ImageHashes, ReplyCache, RequestKey, stored_reply

# The two fields that say when this run made the row: they differ between any two runs.
_TIMES = re.compile(rb'"latency_s":[0-9.e-]+,(?="error")|"started_at":"[^"]*"')


def _answer(seen):
    """Replies that end at different turns: by the prompt, boxed at once, after a refinement, or
    never (cut off); with reasoning tokens for some."""
    turn = sum(1 for m in seen.body["messages"] if m["role"] == "assistant")
    kind = int(hashlib.sha256(json.dumps(seen.body["messages"][:2]).encode()).hexdigest(), 16) % 3
    if kind == 0 or (kind == 1 and turn == 1):
        return Reply(content=f"so \\boxed{{{'AB'[turn]}}}", usage=(11, 3 + turn))
    return Reply(content=f"hmm, thinking {turn}", finish_reason="length" if kind == 2 else "stop")


def _rollout(sample_dir, server, cache, extra="", env=None):
    return bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --base-url {server.base_url} -m m -j 3"
        f" --repeats 3 --max-turns 3 --cache {cache} -q {extra}",
        env=env,
    )


@pytest.mark.parametrize("ordered", ["", "--ordered --cache-scope endpoint"])
def test_a_replay_writes_the_engines_rows_byte_for_byte(sample_dir, server, tmp_path, ordered):
    server.responder = _answer
    cache = tmp_path / "cache.sqlite"
    filled = _rollout(sample_dir, server, cache, ordered.replace("--ordered", ""))
    assert filled.returncode == 0, filled.stderr
    sent = len(server.seen)
    replayed = _rollout(sample_dir, server, cache, ordered)
    engine = _rollout(sample_dir, server, cache, ordered, env={"BV_REPLAY": "0"})
    assert replayed.returncode == engine.returncode == 0, replayed.stderr + engine.stderr
    assert len(server.seen) == sent  # every reply from the cache, both ways
    rows = jsonl(replayed.stdout)
    assert len(rows) == 36 and all(t["cached"] for r in rows for t in r["turns"])
    assert {len(r["turns"]) for r in rows} == {1, 2, 3}  # every way a row's turns end
    assert {(r["cached"], r["endpoint"]) for r in rows} == {(True, server.base_url)}  # where it was made
    assert _TIMES.sub(b"", replayed.stdout.encode()) == _TIMES.sub(b"", engine.stdout.encode())
    assert len(_TIMES.findall(replayed.stdout.encode())) == 72  # only those two fields were masked
    assert replayed.stderr == engine.stderr


def test_a_cached_run_needs_no_turn_of_the_engine(sample_dir, server, tmp_path, monkeypatch):
    """Every row the cache answers is the replay's: the engine's row maker is not even called."""
    import bv.stages.rollout

    server.responder = _answer
    cache = tmp_path / "cache.sqlite"
    assert _rollout(sample_dir, server, cache).returncode == 0
    expected = _rollout(sample_dir, server, cache, "--ordered", env={"BV_REPLAY": "0"}).stdout

    async def no_engine(*args, **kwargs):
        raise AssertionError("a cached row went through the engine")

    monkeypatch.setattr(bv.stages.rollout, "rollout_one", no_engine)
    replayed = _rollout(sample_dir, server, cache, "--ordered")
    assert replayed.returncode == 0, replayed.stderr
    assert _TIMES.sub(b"", replayed.stdout.encode()) == _TIMES.sub(b"", expected.encode())


def test_rows_the_cache_cannot_answer_are_sent_and_keep_their_place(sample_dir, server, tmp_path):
    server.responder = _answer
    cache = tmp_path / "cache.sqlite"
    assert _rollout(sample_dir, server, cache, "--repeats 2").returncode == 0  # runs 0 and 1 cached
    copy = tmp_path / "copy.sqlite"
    with sqlite3.connect(cache) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    replayed = _rollout(sample_dir, server, cache, "--ordered")
    engine = _rollout(sample_dir, server, copy, "--ordered", env={"BV_REPLAY": "0"})
    assert replayed.returncode == engine.returncode == 0
    rows, others = jsonl(replayed.stdout), jsonl(engine.stdout)
    assert [(r["id"], r["run"]) for r in rows] == [(r["id"], r["run"]) for r in others]
    cached = [[t["cached"] for t in r["turns"]] for r in rows]
    assert cached == [[t["cached"] for t in r["turns"]] for r in others]
    assert {r["run"] for r in rows if not r["turns"][0]["cached"]} == {2}
    for row, other in zip(rows, others, strict=True):  # the sent turns' own latencies differ
        for turn in row["turns"] + other["turns"]:
            turn["latency_s"] = 0
        assert {**row, "latency_s": 0, "started_at": 0} == {**other, "latency_s": 0, "started_at": 0}


def test_a_changed_image_is_hashed_again(sample_dir, server, tmp_path):
    image = tmp_path / "a.png"
    image.write_bytes(b"red " * 64)
    hashes = ImageHashes()
    first = hashes(image)
    assert ImageHashes()(image) == first  # remembered for the process, not the instance
    before = image.stat()
    image.write_bytes(b"blue" * 64)  # the same size; then even the same mtime
    os.utime(image, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert hashes(image) == hashlib.sha256(b"blue" * 64).hexdigest()
    replaced = tmp_path / "b.png"
    replaced.write_bytes(b"red " * 64)
    os.utime(replaced, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(replaced, image)  # another file of the same size and mtime
    assert hashes(image) == first

    # In one process, as the gates of bv optimize run: a prompt whose image changed is sent again.
    from bv.data.synth import write_sample_set

    folder = tmp_path / "set"
    write_sample_set(folder, 2, seed=7)
    cache = tmp_path / "cache.sqlite"
    assert _rollout(folder, server, cache).returncode == 0
    sent = len(server.seen)
    assert _rollout(folder, server, cache).returncode == 0
    assert len(server.seen) == sent
    changed = folder / "images" / "1.png"
    Image.new("RGB", (8, 8), "white").save(changed)
    again = _rollout(folder, server, cache)
    assert again.returncode == 0
    fresh = {(r["id"], r["run"]) for r in jsonl(again.stdout) if not r["turns"][0]["cached"]}
    assert fresh == {("1", 0), ("1", 1), ("1", 2)}


def test_a_prompts_keys_are_the_keys_of_its_requests():
    fields = {
        "v": CACHE_VERSION,
        "backend": "openai",
        "model": "m",
        "endpoint": None,
        "messages": [{"role": "user", "content": 'é \u2028 \\ " {}'}],
        "params": {"temperature": 0.5, "max_tokens": 10, "extra_body": {"b": 1, "a": [2]}},
    }
    for extra in ({}, {"scope": "http://h/v1"}, {"rz": 1, "tz": 2, "u": {"z": 1, "a": 2}}):
        keys = RequestKey({**fields, **extra})
        for run, turn in ((0, 0), (3, 1), (12, 2)):
            payload = {**fields, **extra, "run": run, "turn": turn}
            blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
            assert keys(run, turn) == hashlib.sha256(blob.encode()).hexdigest()


def test_lookups_in_batches_find_what_single_lookups_find(tmp_path):
    cache = ReplyCache(tmp_path / "c.sqlite")
    replies = {f"k{i}": {"content": f"\\boxed{{{i}}}", "usage": {"prompt_tokens": i}} for i in range(1200)}
    for key, reply in replies.items():
        cache.put(key, "openai", "m", reply, "http://h/v1")
    wanted = [f"k{i}" for i in range(0, 1300, 2)]  # over two queries' worth, some absent
    stored = {k: {**replies[k], "endpoint": "http://h/v1"} for k in wanted if k in replies}
    assert cache.get_many(wanted) == stored
    assert all(cache.get_many([k])[k] == cache.get(k) for k in ("k0", "k999"))


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 18446744073709551616}',
        '{"a": -9223372036854775809, "b": [1, {"c": 123456789012345678901}]}',
        '{"a": 1e300, "b": 9.3e18}',
        '{"a": "\\ud800"}',
        '{"a": NaN}',
        '{"a": 1.5, "b": "9999999999999999999", "a": 2}',
        '{"content": "\\u00e9", "usage": {"prompt_tokens": 9223372036854775807}}',
    ],
)
def test_a_stored_reply_reads_as_json_reads_it(text):
    value, expected = stored_reply(text), json.loads(text)
    assert repr(value) == repr(expected)


def test_replayed_rows_wait_their_turn_in_a_bounded_window():
    """With `ordered`, rows replayed behind a row still in flight wait in the writer's window;
    neither they nor the reader run beyond it (memory stays bounded however long the input)."""
    import asyncio

    from bv.engine.stream import REPLAY_BATCH, run_stream

    jobs, read, started, replayed = 4, [], [], []

    def tasks():
        for n in range(2000):
            read.append(n)
            yield n

    def replay(batch):
        replayed.extend(n for n in batch if n % 3)
        return [{"n": n, "by": "replay"} if n % 3 else None for n in batch]

    async def work(n):
        started.append(n)
        if n == 0:
            await release.wait()
        return {"n": n, "by": "engine"}

    async def go():
        nonlocal release
        release = asyncio.Event()
        written = []
        running = asyncio.ensure_future(
            run_stream(tasks(), work, written.append, jobs=jobs, ordered=True, replay=replay)
        )
        await asyncio.sleep(0.5)  # plenty of time to run ahead, were it allowed
        ahead = (max(started), max(replayed), max(read))
        release.set()
        return await running, written, ahead

    release = None
    outcome, written, (worked, replayed_to, read_to) = asyncio.run(go())
    window = max(4 * jobs, 64)
    assert worked < window and replayed_to < window + REPLAY_BATCH
    assert read_to <= window + REPLAY_BATCH + 1
    assert [row["n"] for row in written] == list(range(2000)) and not outcome.interrupted
    assert [row["by"] for row in written[:6]] == ["engine", "replay", "replay", "engine", "replay", "replay"]
