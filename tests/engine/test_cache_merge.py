"""The reply cache is one file once bv is done (a copy of the .sqlite alone carries every reply),
and `bv cache merge` gathers per-node caches, refusing files that are not caches."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

from support.commands import BIN, sh
from support.fakeopenai import Reply


def stats(path) -> dict:
    result = sh(f"bv cache stats --cache {path}")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def rollout(sample_dir, server, cache, model: str = "m") -> None:
    server.responder = lambda seen: Reply(content="\\boxed{A}")
    result = sh(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --base-url {server.base_url} -m {model}"
        f" --cache {cache} -q > /dev/null"
    )
    assert result.returncode == 0, result.stderr


def test_a_copy_of_the_sqlite_alone_carries_every_reply(sample_dir, server, tmp_path):
    cache = tmp_path / "node" / "cache.sqlite"
    rollout(sample_dir, server, cache)
    wal = cache.with_name("cache.sqlite-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # the log was folded into the file
    copy = tmp_path / "copy.sqlite"
    shutil.copyfile(cache, copy)  # only the .sqlite, as `scp node:cache.sqlite .` does
    assert stats(copy)["replies"] == 12


def test_a_clean_interrupt_leaves_the_replies_in_the_file(sample_dir, server, tmp_path):
    answered = 0

    def slow(seen):
        nonlocal answered
        answered += 1
        return Reply(content="\\boxed{A}", delay=0 if answered <= 4 else 30)

    server.responder = slow
    cache = tmp_path / "cache.sqlite"
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(sh(f"bv prompt {sample_dir}/meta_data.jsonl").stdout)
    rollout_ = subprocess.Popen(
        [BIN / "bv", "rollout", "--base-url", server.base_url, "-m", "m", "-j", "1", "--cache", cache, "-q"],
        stdin=prompts.open(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert rollout_.stdout is not None
    rows = [rollout_.stdout.readline() for _ in range(4)]
    time.sleep(0.3)  # the fifth request is in flight
    rollout_.send_signal(signal.SIGINT)
    time.sleep(0.5)
    rollout_.send_signal(signal.SIGINT)  # Ctrl-C again: quit now, not after the grace period
    _, err = rollout_.communicate(timeout=60)
    assert rollout_.returncode == 130 and "Traceback" not in err, err
    assert all(rows)
    copy = tmp_path / "copy.sqlite"
    shutil.copyfile(cache, copy)
    assert stats(copy)["replies"] == 4


WAL_ONLY = """
import os, sys
from bv.engine.cache import ReplyCache
cache = ReplyCache(__import__("pathlib").Path(sys.argv[1]))
for i in range(3):
    cache.put(f"{i:064x}", "openai", "wal-model", {"content": f"reply {i}"}, "http://a/v1")
os._exit(0)  # as a process killed mid-run: never closed, every row still in the -wal
"""


def test_merge_gathers_per_node_caches_and_logs_never_folded(sample_dir, server, tmp_path):
    one, two = tmp_path / "n1" / "cache.sqlite", tmp_path / "n2" / "cache.sqlite"
    rollout(sample_dir, server, one, model="m1")
    rollout(sample_dir, server, two, model="m2")
    crashed = tmp_path / "n3" / "cache.sqlite"
    crashed.parent.mkdir()
    subprocess.run([sys.executable, "-c", WAL_ONLY, crashed], check=True)
    copied = tmp_path / "copied"
    copied.mkdir()
    for name in ("cache.sqlite", "cache.sqlite-wal"):  # the .sqlite and its -wal, as copied from a node
        shutil.copyfile(crashed.with_name(name), copied / name)
    assert (copied / "cache.sqlite-wal").stat().st_size > 0
    shutil.copyfile(crashed, tmp_path / "alone.sqlite")
    assert stats(tmp_path / "alone.sqlite")["replies"] == 0  # the .sqlite alone: every row is in the -wal

    target = tmp_path / "all.sqlite"
    result = sh(f"bv cache merge {one} {two} {copied}/cache.sqlite --cache {target}")
    assert result.returncode == 0, result.stderr
    assert f"{one}: 12 replies taken, 0 already there" in result.stderr
    assert f"{target} holds 27 replies" in result.stderr
    held = {m["model"]: m["replies"] for m in stats(target)["models"]}
    assert held == {"m1": 12, "m2": 12, "wal-model": 3}
    again = sh(f"bv cache merge {one} --cache {target}")
    assert "0 replies taken, 12 already there" in again.stderr and "holds 27 replies" in again.stderr
    shutil.copyfile(target, tmp_path / "merged.sqlite")  # the merged cache is one file too
    assert stats(tmp_path / "merged.sqlite")["replies"] == 27

    # a rollout against the merged cache sends nothing: every reply is there
    sent = len(server.seen)
    rollout(sample_dir, server, target, model="m2")
    assert len(server.seen) == sent


def test_merge_refuses_what_is_not_a_cache(sample_dir, server, tmp_path):
    good = tmp_path / "good.sqlite"
    rollout(sample_dir, server, good)
    target = tmp_path / "all.sqlite"
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(os.urandom(8192))
    result = sh(f"bv cache merge {good} {junk} --cache {target}")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"{junk} could not be merged" in result.stderr and "nothing of it was merged" in result.stderr
    assert stats(target)["replies"] == 12  # what the sources before it gave is kept

    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    result = sh(f"bv cache merge {other} --cache {target}")
    assert result.returncode != 0 and "no such table: replies" in result.stderr, result.stderr
    missing = sh(f"bv cache merge {tmp_path}/none.sqlite --cache {target}")
    assert missing.returncode != 0 and "none.sqlite: no such file" in missing.stderr
    itself = sh(f"bv cache merge {target} --cache {target}")
    assert itself.returncode != 0 and "is the cache being merged into" in itself.stderr


def test_merge_skips_rows_bv_never_writes(tmp_path):
    hostile = tmp_path / "hostile.sqlite"
    with sqlite3.connect(hostile) as db:
        db.execute("CREATE TABLE replies (key TEXT, created REAL, backend TEXT, model TEXT, reply TEXT)")
        rows = [
            ("a" * 64, 1.0, "openai", "m", json.dumps({"content": "kept"})),
            ("../../etc", 1.0, "openai", "m", json.dumps({"content": "bad key"})),
            ("b" * 64, 1.0, "openai", "m", "not json"),
            ("c" * 64, 1.0, "openai", "m", json.dumps(["not", "an", "object"])),
            ("d" * 64, 1.0, "openai", "m\x1b]0;x\x07" * 200, json.dumps({"content": "long name"})),
            ("e" * 64, float("nan"), "openai", "m", json.dumps({"content": "no date"})),
        ]
        db.executemany("INSERT INTO replies VALUES (?, ?, ?, ?, ?)", rows)
    target = tmp_path / "all.sqlite"
    result = sh(f"bv cache merge {hostile} --cache {target}")
    assert result.returncode == 0, result.stderr
    assert "1 replies taken, 0 already there, 5 rows skipped" in result.stderr
    assert stats(target)["models"][0] | {"first": 0, "last": 0} == {
        "backend": "openai",
        "model": "m",
        "replies": 1,
        "first": 0,
        "last": 0,
    }


def test_merge_bounds_hostile_sources(tmp_path):
    """A reply nested 100k deep is skipped, named; a `replies` that is a recursive view is refused
    at once; a missing source is refused before the target is created."""
    deep = tmp_path / "deep.sqlite"
    with sqlite3.connect(deep) as db:
        db.execute("CREATE TABLE replies (key TEXT, created REAL, backend TEXT, model TEXT, reply TEXT)")
        nested = '{"content": ' + "[" * 100_000 + "]" * 100_000 + "}"
        db.execute("INSERT INTO replies VALUES (?, 1.0, 'openai', 'm', ?)", ("f" * 64, nested))
    target = tmp_path / "all.sqlite"
    result = sh(f"bv cache merge {deep} --cache {target}")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert (
        f"1 rows skipped (not a reply bv writes; the first: reply {'f' * 64}: invalid JSON: nested too deep)"
        in result.stderr
    )

    endless = tmp_path / "endless.sqlite"
    with sqlite3.connect(endless) as db:
        db.execute(
            "CREATE VIEW replies AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)"
            " SELECT printf('%064x', i) AS key, 1.0 AS created, 'openai' AS backend, 'm' AS model,"
            " '{}' AS reply FROM n"
        )
    result = sh(f"bv cache merge {endless} --cache {target}", timeout=30)
    assert result.returncode == 1 and "is not a plain table" in result.stderr, result.stderr

    fresh = tmp_path / "fresh.sqlite"
    missing = sh(f"bv cache merge {deep} {tmp_path}/none.sqlite --cache {fresh}")
    assert missing.returncode != 0 and "none.sqlite: no such file" in missing.stderr
    assert not fresh.exists()
