"""What batch runs cost (issue 22), as users type the commands, against the loopback files/batches
server (tests/support/fakebatch.py) and the online one (tests/support/fakeopenai.py): a reply from a batch is
recorded as such and priced at batch rates, also when a later run takes it from the cache; a model
without a batch price is unknown; the judge is priced, as the rollout is, by the model the server
answered with. Every expected cost is worked out here from the rates, apart from bv.engine.prices."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from support.commands import bv_inproc, jsonl
from support.fakebatch import FakeBatch, batch_server, quick_batch_polls  # noqa: F401 (fixtures)
from support.fakeopenai import Reply, completion_body

PROMPT, COMPLETION = 1000, 500  # what every reply of the servers below uses
ONLINE = {"input": 2.0, "output": 8.0}
BATCH = {"input": 1.0, "output": 3.0}  # not half of ONLINE: a fraction would hide which was used


def per_reply(rates: dict[str, float]) -> float:
    return (PROMPT * rates["input"] + COMPLETION * rates["output"]) / 1e6


@pytest.fixture
def price_file(tmp_path: Path) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps(
            {
                "gpt-4o": {**ONLINE, "batch": BATCH},
                "half-model": {**ONLINE, "batch": 0.5},
                "online-only": ONLINE,
            }
        )
    )
    return path


def priced(batches: FakeBatch) -> None:
    batches.responder = lambda line: Reply(usage=(PROMPT, COMPLETION))


def rollout(batches: FakeBatch, prompts: Path, cache: Path, *extra: str, model: str = "gpt-4o"):
    result = bv_inproc(
        f"bv rollout -m {model} --base-url {batches.base_url} --api-key sk-test --cache {cache}"
        f" {' '.join(extra)} {prompts}"
    )
    return result.returncode, jsonl(result.stdout), result.stderr


def test_batch_rows_are_priced_at_batch_rates_and_keep_them_from_the_cache(
    batches, prompts, price_file, tmp_path
):
    priced(batches)
    cache = tmp_path / "c.sqlite"
    status, rows, err = rollout(batches, prompts, cache, "--batch", "--prices", str(price_file))
    assert status == 0 and len(rows) == 12 and batches.creations == 1, err
    for row in rows:
        assert [t["batch"] for t in row["turns"]] == [True]
        assert row["cost_usd"] == pytest.approx(per_reply(BATCH))
        assert row["price_source"] == f"{price_file}: gpt-4o (batch)"
    assert f"${12 * per_reply(BATCH):.2f} spent" in err  # the batch's spend, at batch rates
    # an online run of the same command: every reply from the cache, still at the batch price
    status, again, err = rollout(batches, prompts, cache, "--prices", str(price_file))
    assert status == 0 and batches.chats == 0
    assert all(t["cached"] and t["batch"] for r in again for t in r["turns"])
    assert [r["cost_usd"] for r in again] == [pytest.approx(per_reply(BATCH))] * 12
    assert "$0.00 spent" in err
    # online replies, made online, are priced at online rates
    status, online, _ = rollout(batches, prompts, tmp_path / "o.sqlite", "--prices", str(price_file))
    assert status == 0 and batches.chats == 12
    assert all("batch" not in t for r in online for t in r["turns"])
    assert [r["cost_usd"] for r in online] == [pytest.approx(per_reply(ONLINE))] * 12
    assert online[0]["price_source"] == f"{price_file}: gpt-4o"


def test_a_batch_fraction_and_a_missing_batch_price(batches, prompts, price_file, tmp_path):
    priced(batches)
    status, rows, _ = rollout(
        batches, prompts, tmp_path / "h.sqlite", "--batch", "--prices", str(price_file), model="half-model"
    )
    assert status == 0
    assert [r["cost_usd"] for r in rows] == [pytest.approx(per_reply(ONLINE) / 2)] * 12
    status, rows, err = rollout(
        batches, prompts, tmp_path / "u.sqlite", "--batch", "--prices", str(price_file), model="online-only"
    )
    assert status == 0 and all(r["cost_usd"] is None for r in rows)  # never the online rate
    assert rows[0]["price_source"] == f"unknown: no batch price for model 'online-only' in {price_file}"
    assert "12 replies of unknown price" in err


def test_genai_prices_batch_rates(batches, prompts, tmp_path):
    genai_prices = pytest.importorskip("genai_prices")
    priced(batches)
    status, rows, err = rollout(batches, prompts, tmp_path / "c.sqlite", "--batch", "--prices genai-prices")
    assert status == 0, err
    used = genai_prices.Usage(input_tokens=PROMPT, output_tokens=COMPLETION)
    when = {"genai_request_timestamp": None, "provider_id": "openai"}
    online = float(genai_prices.calc_price(used, "gpt-4o", **when).total_price)
    batch = float(
        genai_prices.calc_price(used, "gpt-4o", **when, price_context={"processing": "batch"}).total_price
    )
    assert batch < online  # the package has a batch price for gpt-4o
    assert [r["cost_usd"] for r in rows] == [pytest.approx(batch)] * 12
    assert rows[0]["price_source"] == f"genai-prices {genai_prices.__version__}: openai gpt-4o (batch)"


def test_the_judge_is_priced_by_the_model_its_server_named(server, prompts, tmp_path):
    """Both stages price the model the reply names when the price source has it, else the one
    asked for: a server that answers `-m judge` as `judge-2025-01-01` is priced at that model's rates."""
    rates = {"roll": {"input": 1, "output": 1}, "roll-v2": {"input": 5, "output": 5}}
    rates |= {"judge": {"input": 1, "output": 1}, "judge-2025-01-01": {"input": 3, "output": 7}}
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(rates))

    def respond(seen):
        judged = len(seen.body["messages"]) == 1  # the rollout's requests have a system message
        served = "judge-2025-01-01" if judged else "roll-v2"
        content = "True" if judged else "\\boxed{A}"
        return Reply(body=completion_body(Reply(content=content, usage=(PROMPT, COMPLETION)), served))

    server.responder = respond
    rolled = tmp_path / "r.jsonl"
    made = bv_inproc(
        f"bv rollout -m roll --base-url {server.base_url} --prices {prices} {prompts} > {rolled}"
    )
    assert made.returncode == 0, made.stderr
    rows = jsonl(rolled.read_text())
    assert [r["cost_usd"] for r in rows] == [pytest.approx(per_reply(rates["roll-v2"]))] * 12
    assert rows[0]["price_source"] == f"{prices}: roll-v2"
    judge = f"bv judge --mode llm --judge-model judge --judge-base-url {server.base_url} --prices {prices}"
    judged = bv_inproc(f"{judge} {rolled}")
    assert judged.returncode == 0, judged.stderr
    verdicts = jsonl(judged.stdout)
    assert [r["judge_cost_usd"] for r in verdicts] == [
        pytest.approx(per_reply(rates["judge-2025-01-01"]))
    ] * 12
    assert verdicts[0]["judge_price_source"] == f"{prices}: judge-2025-01-01"
    assert verdicts[0]["judge_model"] == "judge" and "judge_batch" not in verdicts[0]
    # a served name the source does not price: the name asked for
    del rates["judge-2025-01-01"]
    prices.write_text(json.dumps(rates))
    again = jsonl(bv_inproc(f"{judge} {rolled}").stdout)
    assert [r["judge_cost_usd"] for r in again] == [pytest.approx(per_reply(rates["judge"]))] * 12
    assert again[0]["judge_price_source"] == f"{prices}: judge"


def test_judge_batch_is_priced_at_batch_rates(batches, prompts, tmp_path):
    cache = tmp_path / "c.sqlite"
    _, rows, _ = rollout(batches, prompts, cache, "--batch")
    rolled = tmp_path / "rows.jsonl"
    rolled.write_text("".join(json.dumps(r) + "\n" for r in rows))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"judge-m": {**ONLINE, "batch": BATCH}}))
    batches.responder = lambda line: Reply(content="True", usage=(PROMPT, COMPLETION))
    judge = (
        f"bv judge --mode llm --judge-model judge-m --judge-base-url {batches.base_url} --judge-api-key sk-j"
        f" --cache {cache} --prices {prices} {rolled}"
    )
    result = bv_inproc(judge + " --batch")
    assert result.returncode == 0, result.stderr
    judged = jsonl(result.stdout)
    assert all(r["judge_batch"] is True for r in judged)
    assert [r["judge_cost_usd"] for r in judged] == [pytest.approx(per_reply(BATCH))] * 12
    assert judged[0]["judge_price_source"] == f"{prices}: judge-m (batch)"
    chats = batches.chats
    again = bv_inproc(judge)  # online, from the cache: the basis it was paid at
    assert again.returncode == 0 and batches.chats == chats
    kept = ("judge_cost_usd", "judge_price_source", "judge_batch", "judge_usage")
    assert [{k: r[k] for k in kept} for r in jsonl(again.stdout)] == [{k: r[k] for k in kept} for r in judged]


def dry_costs(err: str) -> list[float]:
    """The dollar figures of a dry run's cost line."""
    line = next(line for line in err.splitlines() if line.strip().startswith("cost:"))
    return [float(x.replace(",", "")) for x in re.findall(r"\$([\d,]+\.\d\d)", line)]


def test_dry_run_batch_shows_the_batch_rate_range_beside_the_online_one(server, prompts, tmp_path):
    prices = tmp_path / "prices.json"
    online = {"input": 400.0, "output": 800.0}  # dear, so that cents do not hide the ratio
    prices.write_text(json.dumps({"m": {**online, "batch": {"input": 100.0, "output": 200.0}}, "o": online}))
    common = f"--base-url {server.base_url} --repeats 2 --max-tokens 100 --prices {prices} --dry-run"
    cache = f"--cache {tmp_path / 'c.sqlite'}"
    plain = bv_inproc(f"bv rollout -m m {common} {cache} {prompts}")
    batch = bv_inproc(f"bv rollout -m m {common} {cache} --batch {prompts}")
    assert plain.returncode == 0 and batch.returncode == 0 and server.seen == [], batch.stderr
    low, high = dry_costs(plain.stderr)
    assert "at batch rates" not in plain.stderr and "at batch rates" in batch.stderr
    b_low, b_high, o_low, o_high = dry_costs(batch.stderr)
    assert (o_low, o_high) == (low, high)  # the online figure, beside
    assert b_low == pytest.approx(low / 4, abs=0.01) and b_high == pytest.approx(high / 4, abs=0.01)
    unknown = bv_inproc(f"bv rollout -m o {common} {cache} --batch {prompts}")
    assert f"cost:          unknown: no batch price for model 'o' in {prices}" in unknown.stderr
    # the judge's dry run too
    rolled = tmp_path / "r.jsonl"
    server.responder = lambda seen: Reply(usage=(PROMPT, COMPLETION))
    assert bv_inproc(f"bv rollout -m m --base-url {server.base_url} -q {prompts} > {rolled}").returncode == 0
    judge = (
        f"bv judge --mode llm --judge-model m --judge-base-url {server.base_url} --prices {prices} {cache}"
    )
    judge += f" --judge-param max_tokens=10 --dry-run {rolled}"
    j_plain, j_batch = bv_inproc(judge), bv_inproc(f"{judge} --batch")
    assert j_batch.returncode == 0 and "at batch rates" in j_batch.stderr, j_batch.stderr
    low, high = dry_costs(j_plain.stderr)
    b_low, b_high, o_low, o_high = dry_costs(j_batch.stderr)
    assert (o_low, o_high) == (low, high) and b_high == pytest.approx(high / 4, abs=0.01) and b_high > 0


@pytest.fixture
def dear_output(tmp_path: Path) -> Path:
    """Batch rates under which a request's worst case is exactly its token limit's completion:
    $1 for 1,000 completion tokens, prompts free (so the test need not bound prompt tokens)."""
    path = tmp_path / "dear.json"
    path.write_text(json.dumps({"gpt-4o": {**ONLINE, "batch": {"input": 0, "output": 1000}}}))
    return path


def test_max_cost_under_batch_submits_only_what_fits_and_stops_at_the_limit(
    batches, prompts, dear_output, tmp_path
):
    priced(batches)  # each reply: 500 completion tokens, $0.50 at these rates; its worst case $1
    cache = tmp_path / "c.sqlite"
    common = f"--batch --prices {dear_output} --max-tokens 1000"
    status, rows, err = rollout(batches, prompts, cache, common, "--max-cost 5.5")
    assert status == 130, err  # as an interrupted run
    assert batches.creations == 1 and len(batches.jobs[max(batches.jobs)].lines) == 5  # 5 x $1 fit
    assert len(rows) == 5 and all(r["cost_usd"] == pytest.approx(0.5) for r in rows)
    assert "stopped at the cost limit ($2.50 spent of $5.5; 7 requests not sent" in err
    assert "re-run the same command to go on" in err
    # the same command with room for the rest sends exactly those
    status, rows, err = rollout(batches, prompts, cache, common, "--max-cost 100")
    assert status == 0, err
    assert batches.creations == 2 and len(batches.jobs[max(batches.jobs)].lines) == 7
    assert len(rows) == 12 and sum(t["cached"] for r in rows for t in r["turns"]) == 5
    assert "$3.50 spent of $100 at most" in err


def test_max_cost_under_batch_checks_each_refinement_batch_against_what_is_left(
    batches, prompts, dear_output, tmp_path
):
    batches.responder = lambda line: Reply(
        content="thinking..." if len(line["body"]["messages"]) <= 2 else "so \\boxed{A}",
        usage=(PROMPT, COMPLETION),
    )
    status, rows, err = rollout(
        batches,
        prompts,
        tmp_path / "c.sqlite",
        f"--batch --prices {dear_output} --max-tokens 1000",
        "--max-turns 2 --max-cost 15",
    )
    # first turns: 12 x $1 worst case fit in $15, and cost $6; then $9 is left: 9 refinement turns
    assert status == 130, err
    assert [len(job.lines) for job in batches.jobs.values()] == [12, 9]
    assert len(rows) == 9 and all(len(r["turns"]) == 2 for r in rows)
    assert "stopped at the cost limit ($10.50 spent of $15; 3 requests not sent" in err


def test_max_cost_under_batch_sends_nothing_that_cannot_fit_or_be_priced(batches, prompts, tmp_path):
    priced(batches)
    dear_input = tmp_path / "in.json"  # $1,000 per million prompt tokens: any prompt passes $0.001
    dear_input.write_text(json.dumps({"gpt-4o": {**ONLINE, "batch": {"input": 1000, "output": 0}}}))
    common = "--batch --max-tokens 10"
    status, rows, err = rollout(
        batches, prompts, tmp_path / "a.sqlite", common, f"--prices {dear_input} --max-cost 0.001"
    )
    assert status == 130 and rows == [] and batches.creations == 0 and batches.files == {}
    assert "stopped at the cost limit ($0.00 spent of $0.001; 12 requests not sent" in err
    online_only = tmp_path / "o.json"
    online_only.write_text(json.dumps({"gpt-4o": ONLINE}))
    status, rows, err = rollout(
        batches, prompts, tmp_path / "b.sqlite", common, f"--prices {online_only} --max-cost 100"
    )
    assert status == 2 and rows == [] and batches.creations == 0  # refused before anything is sent
    assert "--max-cost cannot be kept for model 'gpt-4o': its price is unknown: no batch price" in err


def test_max_cost_under_batch_needs_a_token_limit(batches, prompts, dear_output, tmp_path):
    status, _, err = rollout(
        batches, prompts, tmp_path / "c.sqlite", f"--batch --prices {dear_output} --max-cost 5"
    )
    assert status == 2 and batches.seen == []
    assert "--max-cost with --batch needs --max-tokens" in err
    rolled = tmp_path / "r.jsonl"
    rolled.write_text("")
    judge = bv_inproc(
        f"bv judge --mode llm --judge-model gpt-4o --judge-base-url {batches.base_url} --judge-api-key k"
        f" --cache {tmp_path / 'c.sqlite'} --batch --prices {dear_output} --max-cost 5 {rolled}"
    )
    assert judge.returncode == 2 and batches.seen == []
    assert "--max-cost with --batch needs --judge-param max_tokens" in judge.stderr, judge.stderr


def test_the_prompt_token_bound_counts_text_bytes_and_the_larger_image_rule(tmp_path):
    from PIL import Image

    from bv.stages.estimate import prompt_token_bound

    small, large = tmp_path / "s.png", tmp_path / "l.png"
    Image.new("RGB", (1024, 1024)).save(small)
    Image.new("RGB", (4000, 3000)).save(large)

    def image(path: Path) -> dict:
        return {"type": "image_url", "image_url": {"url": path.as_uri()}}

    text = "héllo ✓"  # 7 characters, 10 UTF-8 bytes
    messages = [
        {"role": "system", "content": text},
        {"role": "user", "content": [{"type": "text", "text": text}, image(small), image(large)]},
    ]
    # text: 2 x 10 bytes; chat format: 4 a message and 3; the 1024 px square: 32 x 32 patches x 2.46
    # (the tile rule says 85 + 4 x 170 = 765); the 4000 x 3000 one: 1,536 patches at most x 2.46
    expected = 20 + 2 * 4 + 3 + math.ceil(1024 * 2.46) + math.ceil(1536 * 2.46)
    assert prompt_token_bound(None)(messages) == expected


def test_the_judge_s_max_cost_under_batch_writes_every_row_and_stops(batches, prompts, dear_output, tmp_path):
    cache = tmp_path / "c.sqlite"
    _, rows, _ = rollout(batches, prompts, cache, "--batch")
    rolled = tmp_path / "rows.jsonl"
    rolled.write_text("".join(json.dumps(r) + "\n" for r in rows))
    batches.responder = lambda line: Reply(content="True", usage=(PROMPT, COMPLETION))
    created = batches.creations
    judged = bv_inproc(
        f"bv judge --mode llm --judge-model gpt-4o --judge-base-url {batches.base_url} --judge-api-key k"
        f" --cache {cache} --batch --prices {dear_output} --max-cost 4.5 --judge-param max_tokens=1000"
        f" {rolled}"
    )
    assert judged.returncode == 130, judged.stderr
    assert batches.creations == created + 1 and len(batches.jobs[max(batches.jobs)].lines) == 4  # 4 x $1
    verdicts = jsonl(judged.stdout)
    assert len(verdicts) == 12  # the judge writes every row: those not sent as judge errors to redo
    assert [r["decided_by"] for r in verdicts].count("llm") == 4
    assert all(r["judge_cost_usd"] == pytest.approx(0.5) for r in verdicts if r["decided_by"] == "llm")
    assert "stopped at the cost limit ($2.00 spent of $4.5; 8 requests not sent" in judged.stderr
