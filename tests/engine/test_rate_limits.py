"""Rate limits, hangs and refusals as real endpoints give them: every wait header honoured, 429s
borne for the run's patience with fewer requests in flight, a silent server named on the progress
line, and a stage whose first requests are all refused the same way stopped with the fix."""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from email.utils import formatdate

import pytest
from support.commands import bv_inproc, jsonl
from support.fakeopenai import Reply

from bv.engine.retry import duration_seconds, wait_seconds

KEY = "sk-limits-0123456789abcdefghijklmn"


def item_of(seen) -> str:
    return seen.body["messages"][1]["content"][0]["text"] + str(len(json.dumps(seen.body)))


def test_every_wait_header_form_is_read():
    now = 1_000_000.0
    assert wait_seconds({"retry-after": "2"}) == 2.0
    date = formatdate(now + 30, usegmt=True)
    assert wait_seconds({"retry-after": date}, now=now) == pytest.approx(30, abs=1)
    assert wait_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25  # the precise one first
    assert wait_seconds({"llm_provider-retry-after": "7"}) == 7.0  # LiteLLM passing on the provider's
    assert wait_seconds({"llm_provider-retry-after-ms": "1500"}) == 1.5
    assert wait_seconds({"x-ratelimit-reset-requests": "4m0s"}) == 240.0
    assert wait_seconds({"x-ratelimit-reset-tokens": "20ms"}) == pytest.approx(0.02)
    both = {"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s"}
    assert wait_seconds(both) == 1.0  # neither named spent: the sooner reset
    spent = {**both, "x-ratelimit-remaining-tokens": "0", "x-ratelimit-remaining-requests": "12"}
    assert wait_seconds(spent) == 300.0  # the spent limit's reset (6 min), cut to bv's cap on one wait
    assert wait_seconds({"llm_provider-x-ratelimit-reset-requests": "1.5s"}) == 1.5
    assert wait_seconds({"retry-after": "soon", "x-ratelimit-reset-requests": "2s"}) == 2.0
    assert wait_seconds({"x-ratelimit-reset-requests": "-1s"}) is None
    assert wait_seconds({"x-ratelimit-reset-requests": "1s2"}) is None
    assert wait_seconds({}) is None


def test_durations():
    assert duration_seconds("1h2m3.5s") == pytest.approx(3723.5)
    assert duration_seconds("0.5s") == 0.5
    assert duration_seconds("59.832s") == pytest.approx(59.832)
    assert duration_seconds("150us") == pytest.approx(0.00015)
    assert duration_seconds("12") == 12.0
    for bad in ("", "s", "1x", "1s 2s", "nan", "1e400s", "-2"):
        assert duration_seconds(bad) is None, bad


WAITS = {  # header, the wait it asks for (s)
    "retry-after": ({"retry-after": "0.3"}, 0.3),
    "retry-after date": ({"retry-after": "DATE"}, 0.0),  # dates have whole seconds: the past, at once
    "retry-after-ms": ({"retry-after-ms": "300"}, 0.3),
    "llm_provider-retry-after": ({"llm_provider-retry-after": "0.3"}, 0.3),
    "x-ratelimit-reset-requests": (
        {"x-ratelimit-reset-requests": "300ms", "x-ratelimit-remaining-requests": "0"},
        0.3,
    ),
    "x-ratelimit-reset-tokens": ({"x-ratelimit-reset-tokens": "0m0.3s"}, 0.3),
}


@pytest.mark.parametrize("name", list(WAITS))
def test_429s_with_each_wait_header_every_row_finishes(name, prompts, server, tmp_path):
    """Each item is refused twice with the header before it is answered: every row finishes, with
    --retries 0 (429s are borne for the patience, not the tries), and each retry waited as asked
    (the backoff of its own would be under 0.04 s here)."""
    headers, wait = WAITS[name]
    headers = {k: formatdate(time.time() - 5, usegmt=True) if v == "DATE" else v for k, v in headers.items()}
    refused: dict[str, int] = {}
    lock = threading.Lock()

    def respond(seen):
        with lock:
            key = item_of(seen)
            refused[key] = refused.get(key, 0) + 1
            if refused[key] <= 2:
                return Reply(status=429, headers=headers)
        return Reply(content="\\boxed{A}")

    server.responder = respond
    result = bv_inproc(
        f"bv rollout --base-url {server.base_url} -m m -j 12 --retries 0 --no-cache {prompts}",
        env={"BV_RETRY_BASE_S": "0.01"},
    )
    rows = jsonl(result.stdout)
    assert result.returncode == 0, result.stderr
    assert len(rows) == 12 and all(r["error"] is None for r in rows)
    assert len(server.seen) == 36
    by_item: dict[str, list] = {}
    for seen in server.seen:
        by_item.setdefault(item_of(seen), []).append(seen)
    for tries in by_item.values():
        gaps = [b.started - a.finished for a, b in itertools.pairwise(tries)]
        assert all(gap >= wait * 0.9 for gap in gaps), gaps


def test_rate_limit_patience_is_apart_from_the_tries(prompts, server):
    server.responder = lambda seen: Reply(status=429, headers={"retry-after-ms": "50"})
    started = time.monotonic()
    result = bv_inproc(
        f"bv rollout --base-url {server.base_url} -m m -j 12 --retries 0 --rate-limit-patience 0.6"
        f" --no-cache {prompts}",
        env={"BV_RETRY_BASE_S": "0.01"},
    )
    rows = jsonl(result.stdout)
    assert result.returncode == 1 and len(rows) == 12
    assert all("still refused after" in r["error"] for r in rows)
    # a row's error is data, in the library's words: the setting, not the option
    assert all("`rate_limit_patience` 0.6 s" in r["error"] for r in rows)
    assert len(server.seen) > 3 * 12  # many more tries than --retries 0 allows for other failures
    assert time.monotonic() - started < 15


def in_flight_at_start(seen: list) -> list[int]:
    """For each request, how many the server held at once as it arrived (itself included)."""
    return [sum(1 for o in seen if o.started <= s.started < (o.finished or 1e18)) for s in seen]


def test_concurrency_backs_off_under_429s_and_recovers(prompts, server, tmp_path):
    """The first 40 requests are refused; then every request is answered after 50 ms. The server
    sees -j 8 at first, at most 2 at once while the 429s go on, and 8 again at the end."""
    lock = threading.Lock()
    count = {"n": 0}

    def respond(seen):
        with lock:
            count["n"] += 1
            n = count["n"]
        if n <= 40:
            return Reply(status=429, headers={"retry-after-ms": "20"}, delay=0.01)
        return Reply(content="\\boxed{A}", delay=0.05)

    server.responder = respond
    result = bv_inproc(
        f"bv rollout --base-url {server.base_url} -m m -j 8 --repeats 8 --retries 0 --no-cache {prompts}",
        env={"BV_RETRY_BASE_S": "0.01", "BV_PROGRESS_EVERY_S": "0.1"},
    )
    assert result.returncode == 0, result.stderr
    assert len(jsonl(result.stdout)) == 96
    seen = sorted(server.seen, key=lambda s: s.started)
    held = in_flight_at_start(seen)
    assert max(held[:8]) >= 6  # all eight sent at first
    assert max(held[24:40]) <= 2  # backed off while the 429s went on
    assert max(held[-30:]) >= 7  # and back up once they stopped
    assert re.search(r"[12] of 8 in flight while rate limited", result.stderr)


def test_a_server_that_never_answers_is_named_and_the_timeout_says_first_byte(prompts, server, tmp_path):
    server.responder = lambda seen: Reply(hang=True)
    two = tmp_path / "two.jsonl"
    two.write_text("".join(prompts.read_text().splitlines(keepends=True)[:2]))
    result = bv_inproc(
        f"bv rollout --base-url {server.base_url} --api-key {KEY} -m m -j 2 --retries 0 --no-cache"
        f" --first-byte-timeout 2 --stall-notice 0.6 {two}",
        env={"BV_PROGRESS_EVERY_S": "0.2"},
    )
    rows = jsonl(result.stdout)
    assert result.returncode == 1 and len(rows) == 2
    notice = rf"no reply for \d s from {re.escape(server.base_url)} \(2 requests in flight\)"
    assert re.search(notice, result.stderr), result.stderr
    assert all(
        r["error"].startswith(f"first-byte timeout: 127.0.0.1:{server.port} sent no reply within 2 s")
        and "(`first_byte_timeout`)" in r["error"]  # a row's error is data: the setting's name
        for r in rows
    )
    assert KEY not in result.stderr + result.stdout


def test_no_stall_notice_while_replies_come(prompts, server, tmp_path):
    """A reply every 0.3 s for 1.8 s, past its 1 s --stall-notice: the notice counts from the last reply."""
    server.responder = lambda seen: Reply(content="\\boxed{A}", delay=0.3)
    six = tmp_path / "six.jsonl"
    six.write_text("".join(prompts.read_text().splitlines(keepends=True)[:6]))
    result = bv_inproc(
        f"bv rollout --base-url {server.base_url} -m m -j 1 --no-cache --stall-notice 1 {six}",
        env={"BV_PROGRESS_EVERY_S": "0.1"},
    )
    assert result.returncode == 0 and "no reply for" not in result.stderr


UNSUPPORTED = json.dumps(  # OpenAI's answer to max_tokens on a reasoning model
    {
        "error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model."
            " Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "unsupported_parameter",
        }
    }
).encode()


def test_the_same_refusal_on_the_first_requests_stops_the_stage(prompts, server, tmp_path):
    server.responder = lambda seen: Reply(status=400, body=UNSUPPORTED)
    out = tmp_path / "out.jsonl"
    cache = tmp_path / "cache.sqlite"
    command = f"bv rollout --base-url {server.base_url} -m m -j 2 --repeats 5 --cache {cache} {prompts}"
    result = bv_inproc(f"{command} > {out}")
    assert result.returncode == 1
    assert "the first 3 requests were all refused the same way" in result.stderr
    assert "HTTP 400: Unsupported parameter: 'max_tokens'" in result.stderr
    assert "tell bv its family with BV_PARAM_RULES" in result.stderr  # the fix, from bv.engine.params
    assert "Traceback" not in result.stderr
    rows = jsonl(out.read_text())
    assert 3 <= len(rows) <= 4 and all(r["error"].startswith("HTTP 400") for r in rows)
    assert len(server.seen) <= 4  # not 60 requests, one refusal per row
    server.responder = lambda seen: Reply(content="\\boxed{A}")  # fixed: the same command finishes
    result = bv_inproc(command)
    assert result.returncode == 0 and len(jsonl(result.stdout)) == 60


def test_refusals_that_differ_or_a_reply_among_them_do_not_stop_it(prompts, server):
    state = {"n": 0}

    def respond(seen):
        state["n"] += 1
        if state["n"] == 2:
            return Reply(content="\\boxed{A}")
        return Reply(status=400, body=UNSUPPORTED)

    server.responder = respond
    result = bv_inproc(f"bv rollout --base-url {server.base_url} -m m -j 1 --no-cache {prompts}")
    rows = jsonl(result.stdout)
    assert result.returncode == 1 and len(rows) == 12 and sum(r["error"] is None for r in rows) == 1
    assert "refused the same way" not in result.stderr


def test_the_judge_stops_the_same_way(prompts, server, tmp_path):
    server.responder = lambda seen: Reply(content="no box here")
    rollouts = tmp_path / "r.jsonl"
    rollout = bv_inproc(f"bv rollout --base-url {server.base_url} -m m --no-cache {prompts} > {rollouts}")
    assert rollout.returncode == 0
    server.responder = lambda seen: Reply(status=400, body=UNSUPPORTED)
    before = len(server.seen)
    result = bv_inproc(
        f"bv judge --mode llm --judge-model gpt-5-mini --judge-base-url {server.base_url} -j 1"
        f" --no-cache {rollouts}"
    )
    assert result.returncode == 1
    assert "the first 3 requests were all refused the same way" in result.stderr
    assert len(server.seen) - before == 3


def test_a_retry_after_pauses_the_endpoint_and_refusals_are_counted_apart(prompts, server):
    """The first request is refused with `retry-after: 1`, every other one answered after 0.3 s,
    -j 4: before, the three answered meanwhile were followed by new requests at once, each to
    find out alone; now no request starts until the second is over. The summary counts the
    refused try apart from the 12 requests."""
    lock = threading.Lock()
    count = {"n": 0}

    def respond(seen):
        with lock:
            count["n"] += 1
            n = count["n"]
        if n == 1:
            return Reply(status=429, headers={"retry-after": "1"})
        return Reply(content="\\boxed{A}", delay=0.3)

    server.responder = respond
    result = bv_inproc(
        f"bv rollout --base-url {server.base_url} -m m -j 4 --retries 0 --no-cache {prompts}",
        env={"BV_RETRY_BASE_S": "0.01"},
    )
    assert result.returncode == 0, result.stderr
    assert len(jsonl(result.stdout)) == 12 and len(server.seen) == 13
    seen = sorted(server.seen, key=lambda s: s.started)
    refused_at = min(s.finished for s in seen if s.status == 429)
    after = [s.started - refused_at for s in seen if s.started > refused_at]
    # the three sent with it arrive at once; then nothing is sent in the second asked for (before:
    # new requests 0.3 s on, as the three were answered)
    assert len([a for a in after if a < 0.1]) <= 3 and not [a for a in after if 0.1 <= a < 0.9], after
    assert "12 requests (and 1 try refused with 429)" in result.stderr


def test_a_hung_server_is_found_in_seconds_and_a_busy_one_is_waited_on(prompts, server, tmp_path):
    """A server that takes requests and answers nothing was waited on for two rounds of the
    first-byte limit (by default --timeout, 600 s: 20 minutes). Now, with no --first-byte-timeout
    given, it is asked GET /models once --connect-timeout has passed: no answer to that either,
    and the stage stops at once. A server that answers /models is only busy, and is waited on."""
    two = tmp_path / "two.jsonl"
    two.write_text("".join(prompts.read_text().splitlines(keepends=True)[:2]))
    line = f"bv rollout --base-url {server.base_url} -m m --no-cache --connect-timeout 0.5 --timeout 20 {two}"
    server.responder = lambda seen: Reply(hang=True)
    started = time.monotonic()
    hung = bv_inproc(line)
    assert hung.returncode == 1 and time.monotonic() - started < 8, hung.stderr
    assert (
        f"cannot reach the model endpoint {server.base_url}: 127.0.0.1:{server.port} took requests but"
        " answered none within 0.5 s, nor GET /models within 0.5 s more (--connect-timeout): it is hung"
    ) in hung.stderr
    assert "0.0 req/s" in hung.stderr  # its tries were never answered
    server.responder = lambda seen: Reply() if seen.path.endswith("/models") else Reply(delay=2)
    busy = bv_inproc(line)
    assert busy.returncode == 0 and len(jsonl(busy.stdout)) == 2, busy.stderr
