"""Hostile replies through `bv rollout` (issue 10): bounded bytes, field-by-field validation,
redaction of every server field, escaped error bodies, Retry-After; and 404s made actionable."""

from __future__ import annotations

import sys
import time
from email.utils import formatdate

import pytest
from support.commands import bv_inproc, jsonl, sh
from support.fakeopenai import FakeOpenAI, Reply
from support.hostileopenai import HostileOpenAI

from bv.engine.retry import wait_seconds as retry_after_seconds

KEY = "sk-hostile-Zx8Vb7Nm6Lk5Jh4Gf3Ds2Aq1"


@pytest.fixture(scope="module")
def hostile():
    server = HostileOpenAI()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def two_prompts(sample_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "prompts.jsonl"
    result = bv_inproc(f"bv prompt {sample_dir}/meta_data.jsonl | head -2 > {path}")
    assert result.returncode == 0, result.stderr
    return path


def rollout(server, prompts, model, extra="--no-cache", env=None):
    return bv_inproc(
        f"bv rollout --base-url {server.base_url} --api-key {KEY} -m {model} -j 2 --retries 1"
        f" {extra} {prompts}",
        env={"BV_RETRY_BASE_S": "0.01", **(env or {})},
    )


def test_content_as_a_list_of_text_parts_is_joined(hostile, two_prompts):
    rows = jsonl(rollout(hostile, two_prompts, "content-list").stdout)
    assert len(rows) == 2 and all(r["error"] is None for r in rows)
    assert all(r["response"] == "I think it is \\boxed{A}" for r in rows)


def test_content_that_is_a_number_is_retried_then_an_error_row(hostile, two_prompts):
    before = len(hostile.seen)
    result = rollout(hostile, two_prompts, "content-int")
    rows = jsonl(result.stdout)
    assert len(rows) == 2 and "Traceback" not in result.stderr
    assert all(r["error"] == "unparseable reply (content is a int) (gave up after 2 tries)" for r in rows)
    assert len(hostile.seen) - before == 4  # each item tried twice


def test_lone_surrogate_is_stored_once_and_served_from_the_cache(hostile, two_prompts, tmp_path):
    cache = tmp_path / "cache.sqlite"
    first = rollout(hostile, two_prompts, "lone-surrogate", f"--cache {cache}")
    rows = jsonl(first.stdout)
    assert len(rows) == 2 and all(r["error"] is None for r in rows), first.stderr
    assert all(r["response"] == "odd \ufffd text \\boxed{A}" for r in rows)
    first.stdout.encode("utf-8")  # valid UTF-8 all through
    before = len(hostile.seen)
    second = rollout(hostile, two_prompts, "lone-surrogate", f"--cache {cache}")
    assert len(hostile.seen) == before and jsonl(second.stdout) and "2 cache hits" in second.stderr


@pytest.mark.parametrize("model", ["huge", "huge-declared"])
def test_huge_reply_is_cut_off_at_the_cap(hostile, two_prompts, model):
    started = time.monotonic()
    result = rollout(hostile, two_prompts, model)
    rows = jsonl(result.stdout)
    assert len(rows) == 2 and time.monotonic() - started < 30
    assert all("over the 8,388,608-byte limit" in r["error"] for r in rows), rows[0]["error"]


PROBE = """\
import resource, subprocess, sys
out = subprocess.run(["bash", "-c", sys.argv[1]], capture_output=True, text=True).stdout
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
print(out, end="")
"""


def test_gzip_bomb_costs_at_most_the_cap(hostile, two_prompts, tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    command = (
        f"bv rollout --base-url {hostile.base_url} -m gzip-bomb -j 2 --retries 1 --no-cache {two_prompts}"
    )
    result = sh(f"{sys.executable} {probe} '{command}'", env={"BV_RETRY_BASE_S": "0.01"})  # its memory
    peak, _, out = result.stdout.partition("\n")
    rows = jsonl(out)
    assert len(rows) == 2 and all("compression bomb" in r["error"] for r in rows), result.stderr
    assert float(peak) < 250, peak  # the bomb inflates to 256 MiB per reply


def test_gzip_reply_is_inflated(hostile, two_prompts):
    rows = jsonl(rollout(hostile, two_prompts, "gzip-ok").stdout)
    assert [r["response"] for r in rows] == ["zipped \\boxed{A}"] * 2


def test_key_echoed_in_any_field_is_redacted(hostile, two_prompts, tmp_path):
    cache = tmp_path / "cache.sqlite"
    result = rollout(hostile, two_prompts, "echo-key", f"--cache {cache}")
    assert result.returncode == 0, result.stderr
    rows = jsonl(result.stdout)
    turn = rows[0]["turns"][0]
    assert turn["model"] == "m-***" and "***" in turn["finish_reason"] and "***" in rows[0]["response"]
    blobs = [result.stdout, result.stderr] + [
        p.read_bytes().decode("latin-1") for p in tmp_path.glob("cache*")
    ]
    assert not any(KEY in blob or KEY[-14:] in blob for blob in blobs)


def test_control_characters_in_error_bodies_are_escaped(hostile, two_prompts):
    result = rollout(hostile, two_prompts, "escape-error")
    rows = jsonl(result.stdout)
    assert len(rows) == 2
    error = rows[0]["error"]
    assert error.startswith("HTTP 400: bad \\x1b[2J\\x1b[31mrequest\\x07 for ***")
    assert "\\x0d\\x0abv: forged line" in error and "\x1b" not in error and KEY not in error


def test_404_names_the_models_served_escaped(hostile, two_prompts):
    result = rollout(hostile, two_prompts, "escape-404")
    assert result.returncode == 1 and "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "answered 404 (not found) for model 'escape-404'" in result.stderr
    assert "no \\x1b]0;title\\x07 model" in result.stderr
    assert f"{hostile.base_url}/models serves: served-a, served-\\x1b[31mb" in result.stderr
    assert "lacks /v1" not in result.stderr


def test_404_without_v1_suggests_adding_it(hostile, two_prompts):
    base = hostile.base_url.removesuffix("/v1")
    result = bv_inproc(f"bv rollout --base-url {base} -m x --no-cache {two_prompts}")
    assert result.returncode == 1
    assert f"The base URL's path lacks /v1: try --base-url {base}/v1." in result.stderr
    assert f"{base}/v1/models serves: served-a" in result.stderr


def test_absurd_usage_is_dropped_with_a_note(hostile, two_prompts):
    result = rollout(hostile, two_prompts, "absurd-usage")
    rows = jsonl(result.stdout)
    assert result.returncode == 0 and all(r["error"] is None for r in rows)
    assert all(r["turns"][0]["usage"] == {} for r in rows)
    assert result.stderr.count("prompt_tokens = 1000000000000000000000") == 1  # said once, bounded
    assert "completion_tokens = 'lots', not a token count; dropped" in result.stderr
    negative = jsonl(rollout(hostile, two_prompts, "negative-usage").stdout)
    assert all(r["turns"][0]["usage"] == {"completion_tokens": 7} for r in negative)
    assert all(r["usage"] == {"prompt_tokens": 0, "completion_tokens": 7} for r in negative)


def test_retry_after_forms_and_the_cap():
    now = 1_000_000.0
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    date = formatdate(now + 30, usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now=now) == pytest.approx(30, abs=1)
    assert retry_after_seconds({"retry-after": formatdate(now - 30, usegmt=True)}, now=now) == 0
    assert retry_after_seconds({"retry-after": "-5"}) is None
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({"retry-after": "nan"}) is None
    assert retry_after_seconds({"retry-after": "3600"}) == 300.0


def test_a_capped_wait_says_so(two_prompts):
    server = FakeOpenAI(
        lambda seen: Reply(status=429, headers={"retry-after": "3600"}) if len(server.seen) == 1 else Reply()
    )
    server.start()
    try:
        started = time.monotonic()
        result = sh(
            f"bv rollout --base-url {server.base_url} -m m -j 1 --no-cache {two_prompts}",
            env={"BV_MAX_WAIT_S": "0.3"},
        )
    finally:
        server.stop()
    assert all(r["error"] is None for r in jsonl(result.stdout)) and time.monotonic() - started < 20
    assert "the server asked to wait 3,600 s before retrying; waiting 0.3 s at most" in result.stderr
