"""Provenance that tells the truth: a row answered from the reply cache records the endpoint that
made its reply and that it came from the cache. Under the default `--cache-scope model` the key
names the model, not the URL, so replies fetched from server A answer a run against server B (its
replicas and a proxy share replies, by design); `--cache-scope endpoint` keys them by endpoint too,
so B is asked."""

from __future__ import annotations

import json

import pytest
from support.commands import jsonl, sh
from support.fakeopenai import FakeOpenAI, Reply


@pytest.fixture
def two_servers():
    """Two deployments serving one model name, answering differently."""
    a, b = (
        FakeOpenAI(lambda seen: Reply("A says \\boxed{A}")),
        FakeOpenAI(lambda seen: Reply("B says \\boxed{B}")),
    )
    a.start()
    b.start()
    yield a, b
    a.stop()
    b.stop()


def rollout(prompts: str, url: str, tmp_path, *extra: str):
    command = f"bv rollout -m gpt-4o --base-url {url} --cache {tmp_path / 'c.sqlite'} -q {' '.join(extra)}"
    done = sh(command, input=prompts, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return jsonl(done.stdout)


@pytest.fixture
def prompts(sample_dir):
    return sh(f"bv prompt {sample_dir / 'meta_data.jsonl'} --limit 3").stdout


def test_a_reply_from_the_cache_names_the_server_that_made_it(two_servers, prompts, tmp_path):
    a, b = two_servers
    first = rollout(prompts, a.base_url, tmp_path)
    assert [(r["endpoint"], r["cached"]) for r in first] == [(a.base_url, False)] * 3
    assert all("endpoint" not in t for r in first for t in r["turns"])  # the row says it for fresh replies
    second = rollout(prompts, b.base_url, tmp_path)  # the default scope: the model's name
    assert len(b.seen) == 0 and len(a.seen) == 3
    assert [(r["endpoint"], r["cached"], r["response"]) for r in second] == [
        (a.base_url, True, "A says \\boxed{A}")
    ] * 3
    assert [(t["endpoint"], t["cached"]) for r in second for t in r["turns"]] == [(a.base_url, True)] * 3
    judged = sh("bv judge --mode rules -q", input="".join(json.dumps(r) + "\n" for r in second), cwd=tmp_path)
    report = sh("bv report --format json", input=judged.stdout, cwd=tmp_path)
    assert json.loads(report.stdout)["inputs"][0]["provenance"]["endpoints"] == [a.base_url]  # never B's


def test_cache_scope_endpoint_asks_the_other_deployment(two_servers, prompts, tmp_path):
    a, b = two_servers
    rollout(prompts, a.base_url, tmp_path, "--cache-scope endpoint")
    rows = rollout(prompts, b.base_url, tmp_path, "--cache-scope endpoint")
    assert len(b.seen) == 3
    assert [(r["endpoint"], r["cached"], r["response"]) for r in rows] == [
        (b.base_url, False, "B says \\boxed{B}")
    ] * 3
    again = rollout(prompts, b.base_url, tmp_path, "--cache-scope endpoint")  # B's own replies resume B
    assert len(b.seen) == 3 and [(r["endpoint"], r["cached"]) for r in again] == [(b.base_url, True)] * 3
    back = rollout(prompts, a.base_url, tmp_path, "--cache-scope endpoint")
    assert len(a.seen) == 3 and {r["response"] for r in back} == {"A says \\boxed{A}"}


def test_a_reply_cached_by_an_older_bv_says_its_maker_is_unknown(two_servers, prompts, tmp_path):
    """A cache written before replies carried their endpoint: the row does not claim this run's."""
    import sqlite3

    a, b = two_servers
    rollout(prompts, a.base_url, tmp_path)
    db = sqlite3.connect(tmp_path / "c.sqlite")
    for key, text in db.execute("SELECT key, reply FROM replies").fetchall():
        reply = json.loads(text)
        del reply["endpoint"]
        db.execute("UPDATE replies SET reply = ? WHERE key = ?", (json.dumps(reply), key))
    db.commit()
    db.close()
    rows = rollout(prompts, b.base_url, tmp_path)
    assert len(b.seen) == 0
    assert {(r["endpoint"], r["cached"]) for r in rows} == {("unknown (cached by an older bv)", True)}


def test_replies_another_endpoint_made_are_said_with_their_count(two_servers, prompts, tmp_path):
    """Two servers giving one name to two checkpoints: a run against B answered from A's replies
    said nothing (exit 0, 0 requests). It says how many came from where, even under -q, and
    `--cache-scope endpoint` (named as the fix) asks B; a replica set sharing a URL is no elsewhere."""
    a, b = two_servers
    cache = tmp_path / "c.sqlite"
    rollout(prompts, a.base_url, tmp_path)
    line = f"bv rollout -m gpt-4o --cache {cache} -q --base-url {b.base_url}"
    done = sh(line, input=prompts, cwd=tmp_path)
    assert done.returncode == 0 and len(b.seen) == 0
    assert (
        f"bv rollout: notice: 3 replies came from the cache that another endpoint made"
        f" (3 at {a.base_url}), not {b.base_url}." in done.stderr
    ), done.stderr
    assert "--cache-scope endpoint" in done.stderr
    replicas = sh(f"{line} --base-url {a.base_url}", input=prompts, cwd=tmp_path)
    assert replicas.returncode == 0 and "notice" not in replicas.stderr, replicas.stderr
    scoped = sh(f"{line} --cache-scope endpoint", input=prompts, cwd=tmp_path)
    assert len(b.seen) == 3 and "notice" not in scoped.stderr
    assert {r["response"] for r in jsonl(scoped.stdout)} == {"B says \\boxed{B}"}
