"""Dollars before, during and after a run (issue 22): rows priced from a --prices file and from the
genai-prices package, unknown models unknown, the spend on the progress line, bv report's cost, the
dry run's cost range without a key, and --max-cost stopping within one wave of requests."""

from __future__ import annotations

import json
import re

import pytest
from support.commands import bv_inproc, jsonl
from support.fakeopenai import Reply

from bv.core.stats import dollars

# USD per million tokens; the loopback server answers 1,000 prompt and 500 completion tokens.
RATES = {"fake-model": {"input": 1.0, "output": 2.0}}
PER_REPLY = (1000 * 1.0 + 500 * 2.0) / 1e6  # $0.002


@pytest.fixture
def prices(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(RATES))
    return path


def priced_server(server, **reply):
    server.responder = lambda seen: Reply(usage=(1000, 500), **reply)
    return server


def test_rows_record_their_cost_and_its_source_and_the_report_sums_them(server, prices, prompts, tmp_path):
    priced_server(server)
    rollout = f"bv rollout -m fake-model --base-url {server.base_url} --repeats 2 --prices {prices}"
    first = bv_inproc(f"{rollout} {prompts} | bv judge --mode rules > {tmp_path / 'r.jsonl'}")
    assert first.returncode == 0, first.stderr
    rows = jsonl((tmp_path / "r.jsonl").read_text())
    assert len(rows) == 24 and len(server.seen) == 24
    for row in rows:
        assert row["cost_usd"] == pytest.approx(PER_REPLY)
        assert row["price_source"] == f"{prices}: fake-model"
    assert f"{dollars(24 * PER_REPLY)} spent" in first.stderr  # the summary line: this run's spend
    # a re-run takes every reply from the cache: the rows cost what their replies cost, the run nothing
    again = bv_inproc(f"{rollout} {prompts} > {tmp_path / 'again.jsonl'}")
    assert len(server.seen) == 24 and "$0.00 spent" in again.stderr
    assert [r["cost_usd"] for r in jsonl((tmp_path / "again.jsonl").read_text())] == [
        pytest.approx(PER_REPLY)
    ] * 24
    report = json.loads(bv_inproc(f"bv report {tmp_path / 'r.jsonl'} --format json").stdout)
    usage = report["inputs"][0]["usage"]
    assert usage["cost_usd"] == pytest.approx(24 * PER_REPLY) and usage["cost_unknown"] == 0
    assert f"cost {dollars(24 * PER_REPLY)}" in bv_inproc(f"bv report {tmp_path / 'r.jsonl'}").stdout


def test_the_price_package_prices_a_known_model(server, prompts, tmp_path):
    genai_prices = pytest.importorskip("genai_prices")
    server.responder = lambda seen: Reply(usage=(2000, 300))
    made = bv_inproc(f"bv rollout -m gpt-4o --base-url {server.base_url} --prices genai-prices {prompts}")
    assert made.returncode == 0, made.stderr
    row = jsonl(made.stdout)[0]
    expected = genai_prices.calc_price(genai_prices.Usage(input_tokens=2000, output_tokens=300), "gpt-4o")
    assert row["cost_usd"] == pytest.approx(float(expected.total_price), rel=1e-6)
    assert row["price_source"].startswith(f"genai-prices {genai_prices.__version__}: ")


def test_a_model_without_a_price_is_unknown_never_free(server, prices, prompts, tmp_path):
    priced_server(server)
    out = tmp_path / "r.jsonl"
    made = bv_inproc(
        f"bv rollout -m my-own-model --base-url {server.base_url} --prices {prices} {prompts}"
        f" | bv judge --mode rules > {out}"
    )
    assert made.returncode == 0, made.stderr
    row = jsonl(out.read_text())[0]
    assert row["cost_usd"] is None
    assert row["price_source"] == f"unknown: no price for model 'my-own-model' in {prices}"
    assert "12 replies of unknown price" in made.stderr
    assert "$" not in bv_inproc(f"bv report {out}").stdout  # no dollar figure made up
    usage = json.loads(bv_inproc(f"bv report {out} --format json").stdout)["inputs"][0]["usage"]
    assert usage["cost_usd"] is None and usage["cost_unknown"] == 12


def test_a_bad_price_file_is_refused_before_any_request(server, tmp_path, prompts):
    bad = tmp_path / "bad.json"
    bad.write_text('{"fake-model": {"input": 1}}')
    made = bv_inproc(f"bv rollout -m fake-model --base-url {server.base_url} --prices {bad} {prompts}")
    assert made.returncode == 2 and server.seen == []
    assert "no 'output' rate" in made.stderr and str(bad) in made.stderr


def test_dry_run_without_a_key_sends_nothing_and_prints_a_cost_range(server, prices, prompts, tmp_path):
    priced_server(server)
    expensive = tmp_path / "expensive.json"
    expensive.write_text(json.dumps({"fake-model": {"input": 0, "output": 1000}}))
    common = f"-m fake-model --base-url {server.base_url} --repeats 2 --max-tokens 100 --prices {expensive}"
    dry = bv_inproc(f"bv rollout {common} --dry-run {prompts}")
    assert dry.returncode == 0, dry.stderr
    assert server.seen == []  # no request reached the server
    assert "requests:      24 (12 rows × 2 repeats)" in dry.stderr
    # no earlier replies: prompts only at the low end (free here), every completion at 100 at the high
    assert f"cost:          $0.00 to {dollars(24 * 100 * 1000 / 1e6)}" in dry.stderr
    # half the items run for real; the dry run then reads their replies' completion tokens
    half = tmp_path / "half.jsonl"
    half.write_text("".join(prompts.read_text().splitlines(keepends=True)[:6]))
    assert bv_inproc(f"bv rollout {common} {half} -q > {tmp_path / 'r.jsonl'}").returncode == 0
    server.seen.clear()
    dry = bv_inproc(f"bv rollout {common} --dry-run {prompts}")
    assert server.seen == [] and "in the cache:  12 of these requests" in dry.stderr
    assert "~500 tokens per reply, the mean of 12 earlier replies in the cache" in dry.stderr
    assert (
        f"cost:          {dollars(12 * 500 * 1000 / 1e6)} to {dollars(12 * 100 * 1000 / 1e6)}" in dry.stderr
    )


def test_dry_run_needs_no_key_for_openai_itself(prompts):
    dry = bv_inproc(f"bv rollout -m gpt-4o --dry-run --max-tokens 1000 --prices genai-prices {prompts}")
    assert dry.returncode == 0, dry.stderr
    assert "gpt-4o (openai at https://api.openai.com/v1)" in dry.stderr
    assert re.search(r"cost: +\$\d+\.\d+ to \$\d+\.\d+ \(genai-prices", dry.stderr), dry.stderr


def test_max_cost_stops_within_one_wave_of_requests(server, prices, prompts, tmp_path):
    priced_server(server, delay=0.2)
    jobs, limit = 4, 5 * PER_REPLY  # reached by the fifth reply
    out = tmp_path / "r.jsonl"
    made = bv_inproc(
        f"bv rollout -m fake-model --base-url {server.base_url} -j {jobs} --repeats 3"
        f" --prices {prices} --max-cost {limit} {prompts} > {out}"
    )
    assert made.returncode == 130, made.stderr  # as an interrupted run
    served = len(server.finished())
    assert 5 <= served <= 5 + jobs - 1  # the replies in flight when the limit was reached, no more
    assert len(server.seen) == served  # none started after
    rows = jsonl(out.read_text())
    assert len(rows) == served  # the rows in flight finished and were written
    assert f"stopped at the cost limit ({dollars(5 * PER_REPLY)} spent of ${limit:g})" in made.stderr
    assert f"{dollars(served * PER_REPLY)} spent of ${limit:g} at most" in made.stderr  # all it paid for
    assert "re-run the same command to go on" in made.stderr
    # they were cached: a dry run of the same command counts them
    dry = bv_inproc(f"bv rollout -m fake-model --base-url {server.base_url} --repeats 3 --dry-run {prompts}")
    assert f"in the cache:  {served} of these requests" in dry.stderr


def test_max_cost_needs_prices(server, prompts):
    made = bv_inproc(f"bv rollout -m fake-model --base-url {server.base_url} --max-cost 1 {prompts}")
    assert made.returncode == 2 and server.seen == []
    assert "--max-cost" in made.stderr and "--prices" in made.stderr


def test_the_llm_judge_is_priced_and_its_dry_run_needs_no_key(server, prices, prompts, tmp_path):
    judge_asked = lambda seen: len(seen.body["messages"]) == 1  # noqa: E731  (the rollout's have a system message)
    server.responder = lambda seen: Reply(
        content="True" if judge_asked(seen) else "\\boxed{A}", usage=(1000, 500)
    )
    rollout = f"bv rollout -m fake-model --base-url {server.base_url} --prices {prices} -q {prompts}"
    assert bv_inproc(f"{rollout} > {tmp_path / 'r.jsonl'}").returncode == 0
    judge = (
        f"bv judge --mode llm --judge-model fake-model --judge-base-url {server.base_url} --prices {prices}"
    )
    server.seen.clear()
    dry = bv_inproc(f"{judge} --dry-run {tmp_path / 'r.jsonl'}")
    assert dry.returncode == 0 and server.seen == [], dry.stderr
    assert "to the LLM:    12" in dry.stderr and "to send:       12" in dry.stderr
    assert re.search(r"cost: +\$\d+\.\d+", dry.stderr), dry.stderr
    judged = bv_inproc(f"{judge} {tmp_path / 'r.jsonl'} > {tmp_path / 'j.jsonl'}")
    assert judged.returncode == 0, judged.stderr
    rows = jsonl((tmp_path / "j.jsonl").read_text())
    assert len(server.seen) == 12 and all(r["decided_by"] == "llm" for r in rows)
    assert all(r["judge_cost_usd"] == pytest.approx(PER_REPLY) for r in rows)
    assert all(r["cost_usd"] == pytest.approx(PER_REPLY) for r in rows)  # the rollout's, kept
    assert rows[0]["judge_price_source"] == f"{prices}: fake-model"
    usage = json.loads(bv_inproc(f"bv report {tmp_path / 'j.jsonl'} --format json").stdout)["inputs"][0][
        "usage"
    ]
    assert usage["cost_usd"] == pytest.approx(2 * 12 * PER_REPLY) and usage["cost_unknown"] == 0
    # the judge's replies are cached now: its dry run says so and costs nothing more
    dry = bv_inproc(f"{judge} --dry-run {tmp_path / 'r.jsonl'}")
    assert "in the cache:  12 of these requests" in dry.stderr and "to send:       0" in dry.stderr
    assert "$0.00: every request is answered by the cache" in dry.stderr
