"""What batch runs cost (issue 22), as users type the commands, against the loopback files/batches
server (tests/fakebatch.py) and the online one (tests/fakeopenai.py): a reply from a batch is
recorded as such and priced at batch rates, also when a later run takes it from the cache; a model
without a batch price is unknown; the judge is priced, as the rollout is, by the model the server
answered with. Every expected cost is worked out here from the rates, apart from bv.engine.prices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import bv_inproc, jsonl
from fakebatch import FakeBatch, batch_server, quick_batch_polls  # noqa: F401 (fixtures)
from fakeopenai import Reply, completion_body

PROMPT, COMPLETION = 1000, 500  # what every reply of the servers below uses
ONLINE = {"input": 2.0, "output": 8.0}
BATCH = {"input": 1.0, "output": 3.0}  # not half of ONLINE: a fraction would hide which was used


def per_reply(rates: dict[str, float]) -> float:
    return (PROMPT * rates["input"] + COMPLETION * rates["output"]) / 1e6


@pytest.fixture
def prompts(sample_dir: Path, tmp_path: Path) -> Path:
    out = tmp_path / "prompts.jsonl"
    result = bv_inproc(f"bv prompt {sample_dir / 'meta_data.jsonl'} > {out}")
    assert result.returncode == 0, result.stderr
    return out


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
