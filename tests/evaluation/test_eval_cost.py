"""`bv eval`'s cost and scale options (issue 22): --prices puts each row's cost in results.jsonl and
the report, --max-cost bounds the rollout's and the judge's spend together and stops like a first
Ctrl-C (exit 130, no results, the summary says why, a re-run goes on from the cache), --batch sends
the rollout and the LLM judge as batch jobs (`bv.api.evaluate`'s keywords: tests/api/test_two_faces.py).
Costs are computed here from the rates, apart from bv.engine.prices."""

from __future__ import annotations

import json

import pytest
from support.commands import bv_inproc, jsonl
from support.evaluating import JUDGE_REPLY, RATES, ROLLOUT_REPLY, is_judge, priced, priced_command
from support.fakebatch import batch_server, quick_batch_polls  # noqa: F401 (fixtures)
from support.fakeopenai import Reply
from support.rows import comparable

from bv.core.stats import dollars

ITEMS = 12  # the sample set's


@pytest.fixture
def prices(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(RATES))
    return path


def online_like(row: dict) -> dict:
    """A row as an online run would write it: without what differs between runs, nor the batch flags."""
    return {k: v for k, v in comparable(row).items() if k != "judge_batch"}


def judge_requests(server) -> list:
    return [s for s in server.seen if is_judge(s.body)]


def test_the_budget_covers_rollout_and_judge_and_the_rerun_goes_on(sample_dir, server, prices, tmp_path):
    priced(server, delay=0.2)
    jobs = 2
    rollout_spend = ITEMS * ROLLOUT_REPLY
    limit = rollout_spend + 2.5 * JUDGE_REPLY  # reached by the judge's third reply, the rollout's counted
    out = tmp_path / "run"
    stopped = bv_inproc(
        priced_command(sample_dir, server.base_url, out, f"-j {jobs} --prices {prices} --max-cost {limit}")
    )
    assert stopped.returncode == 130, stopped.stderr  # as an interrupted run
    assert len(server.seen) - len(judge_requests(server)) == ITEMS  # the whole rollout
    judged = len(judge_requests(server))
    assert 3 <= judged <= 3 + jobs - 1  # the judge's requests in flight at the limit, none started after
    assert all(s.finished is not None for s in server.seen)  # those in flight finished
    said = stopped.stderr
    paid = dollars(rollout_spend + judged * JUDGE_REPLY)  # the replies in flight too (issue 34)
    assert f"bv eval: stopped at the cost limit ({paid} spent of ${limit:g})" in said
    assert "during the judge" in said and "re-run the same command to go on" in said
    assert f"{dollars(rollout_spend + judged * JUDGE_REPLY)} spent" in said  # all it paid for, both stages
    assert not (out / "results.jsonl").exists()  # an incomplete run is no result

    done = bv_inproc(
        priced_command(sample_dir, server.base_url, out, f"-j {jobs} --prices {prices}")
    )  # no limit now
    assert done.returncode == 0, done.stderr
    assert len(judge_requests(server)) == ITEMS and len(server.seen) == ITEMS + ITEMS  # only the rest sent
    assert (
        f"{dollars((ITEMS - judged) * JUDGE_REPLY)} spent" in done.stderr
    )  # cached replies cost nothing now
    rows = jsonl((out / "results.jsonl").read_text())
    assert len(rows) == ITEMS and all(r["decided_by"] == "llm" for r in rows)
    assert all(r["cost_usd"] == pytest.approx(ROLLOUT_REPLY) for r in rows)
    assert all(r["judge_cost_usd"] == pytest.approx(JUDGE_REPLY) for r in rows)
    assert {r["price_source"] for r in rows} == {f"{prices}: m"}
    assert {r["judge_price_source"] for r in rows} == {f"{prices}: judge-m"}
    report = json.loads(bv_inproc(f"bv report {out / 'results.jsonl'} --format json").stdout)
    assert report["inputs"][0]["usage"]["cost_usd"] == pytest.approx(ITEMS * (ROLLOUT_REPLY + JUDGE_REPLY))
    assert f"{dollars(ITEMS * (ROLLOUT_REPLY + JUDGE_REPLY))}" in (out / "report.md").read_text()
    assert json.loads((out / "config.json").read_text())["options"]["prices"] == str(prices)


def test_a_limit_reached_in_the_rollout_stops_within_one_wave(sample_dir, server, prices, tmp_path):
    priced(server, delay=0.2)
    jobs, limit = 4, 5 * ROLLOUT_REPLY  # reached by the fifth reply
    out = tmp_path / "run"
    stopped = bv_inproc(
        priced_command(sample_dir, server.base_url, out, f"-j {jobs} --prices {prices} --max-cost {limit}")
    )
    assert stopped.returncode == 130, stopped.stderr
    assert 5 <= len(server.seen) <= 5 + jobs - 1 and not judge_requests(server)  # the judge never asked
    paid = dollars(len(server.finished()) * ROLLOUT_REPLY)  # the replies in flight too (issue 34)
    assert f"stopped at the cost limit ({paid} spent of ${limit:g}) during the rollout" in stopped.stderr
    assert not (out / "results.jsonl").exists()


def test_max_cost_needs_prices_and_batch_needs_the_cache(sample_dir, server, tmp_path):
    out = tmp_path / "run"
    for more, said in (
        ("--max-cost 1", "--max-cost needs --prices"),
        ("--batch --no-cache", "--batch needs"),
    ):
        refused = bv_inproc(priced_command(sample_dir, server.base_url, out, more))
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
    assert server.seen == [] and not out.exists()


def test_batch_sends_the_rollout_and_the_llm_judge_as_batches(sample_dir, batches, tmp_path):
    batches.responder = lambda line: Reply(content="True" if is_judge(line["body"]) else "\\boxed{A}")
    online = bv_inproc(priced_command(sample_dir, batches.base_url, tmp_path / "online" / "run"))
    assert online.returncode == 0 and batches.chats == 2 * ITEMS and batches.creations == 0, online.stderr
    batched = bv_inproc(priced_command(sample_dir, batches.base_url, tmp_path / "batch" / "run", "--batch"))
    assert batched.returncode == 0, batched.stderr
    assert batches.creations == 2 and batches.chats == 2 * ITEMS  # one batch each, nothing online
    rows = {
        name: jsonl((tmp_path / name / "run" / "results.jsonl").read_text()) for name in ("online", "batch")
    }
    assert [online_like(r) for r in rows["batch"]] == [online_like(r) for r in rows["online"]]
    assert all(r["judge_batch"] is True for r in rows["batch"])
    rules = bv_inproc(
        priced_command(sample_dir, batches.base_url, tmp_path / "rules" / "run", "--batch --mode rules")
    )
    assert rules.returncode == 0 and batches.creations == 3, rules.stderr  # the rollout's only: rules judge
