"""Prices (bv/engine/prices.py): a user's price file and the genai-prices package, each reply's
usage priced by its parts, and a model without a price unknown with its reason, never a guess."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from bv.core.errors import BadConfig
from bv.engine.prices import Cost, PriceFile, load_prices, reply_cost, request_time, total_cost

RATES = {
    "gpt-4o": {"input": 2.5, "cached_input": 1.25, "output": 10},
    "local/qwen": {"input": 0.2, "output": 0.6},
}


@pytest.fixture
def price_file(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(RATES))
    return path


def test_a_price_file_prices_each_part_of_the_usage(price_file):
    prices = load_prices(price_file)
    usage = {"prompt_tokens": 1_000_000, "cached_tokens": 400_000, "completion_tokens": 200_000}
    cost = prices.cost("gpt-4o", usage)
    # 600k uncached at 2.5, 400k cached at 1.25, 200k out at 10 per million
    assert cost == Cost(pytest.approx(0.6 * 2.5 + 0.4 * 1.25 + 0.2 * 10), f"{price_file}: gpt-4o")
    # no cached rate: cached tokens at the input rate; reasoning tokens are part of the completion
    plain = prices.cost(
        "local/qwen", {"prompt_tokens": 1000, "completion_tokens": 500, "reasoning_tokens": 400}
    )
    assert plain.usd == pytest.approx((1000 * 0.2 + 500 * 0.6) / 1e6)


def test_a_reasoning_rate_prices_the_reasoning_tokens_apart(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"r1": {"input": 1, "output": 2, "reasoning": 8}}))
    cost = load_prices(path).cost(
        "r1", {"prompt_tokens": 0, "completion_tokens": 1000, "reasoning_tokens": 750}
    )
    assert cost.usd == pytest.approx((250 * 2 + 750 * 8) / 1e6)


def test_unknown_models_and_unusable_usage_are_unknown_with_the_reason(price_file):
    prices = load_prices(price_file)
    unknown = prices.cost("gpt-4.1", {"prompt_tokens": 10, "completion_tokens": 1})
    assert unknown.usd is None and "no price for model 'gpt-4.1'" in unknown.source
    assert prices.cost("gpt-4o", {}).usd is None  # an exec agent reports no usage: not free
    assert (
        "contradicts"
        in prices.cost("gpt-4o", {"prompt_tokens": 1, "cached_tokens": 5, "completion_tokens": 0}).source
    )
    assert prices.cost("gpt-4o", {"prompt_tokens": "9", "completion_tokens": 1}).usd is None
    # one unknown reply makes the row's total unknown, not a smaller sum
    row = total_cost([Cost(0.5, "a"), unknown, Cost(0.25, "a")])
    assert row.usd is None and "gpt-4.1" in row.source
    assert total_cost([Cost(0.5, "a"), Cost(0.25, "a")]) == Cost(0.75, "a")


def test_the_served_model_name_is_priced_first_then_the_asked_one(price_file):
    prices = load_prices(price_file)
    usage = {"prompt_tokens": 1000, "completion_tokens": 0}
    assert reply_cost(prices, usage, "gpt-4o", "gpt-4o-2024-08-06").source.endswith(": gpt-4o")
    assert reply_cost(prices, usage, "alias", "gpt-4o").source.endswith(": gpt-4o")


@pytest.mark.parametrize(
    "content, says",
    [
        ("[1, 2]", "JSON object"),
        ("{nope", "not JSON"),
        ('{"m": {"input": 1}}', "no 'output' rate"),
        ('{"m": {"input": 1, "output": -2}}', "'output' must be a number"),
        ('{"m": {"input": 1, "output": true}}', "'output' must be a number"),
        ('{"m": {"input": 1e308, "output": 2}}', "'input' must be a number .* to 1,000,000"),  # issue 34
        ('{"m": {"input": 1, "output": 2, "batch": {"input": 1, "output": 1e7}}}', "'output' must be"),
        ('{"m": {"input": 1, "output": 2, "cache": 1}}', "unknown rate 'cache'"),
        ('{"m": 3}', "rates must be an object"),
        ('{"m": {"input": 1, "output": 2, "batch": 1.5}}', "fraction of these rates"),
        ('{"m": {"input": 1, "output": 2, "batch": {"input": 1}}}', "'batch' rates: no 'output' rate"),
        ('{"m": {"input": 1, "output": 2, "batch": {"input": 1, "output": 1, "batch": 1}}}', "unknown rate"),
        ('{"m": {"input": 1, "output": 2, "batch": true}}', "rates must be an object"),
    ],
)
def test_a_bad_price_file_is_refused_naming_the_file(tmp_path, content, says):
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(BadConfig, match=says) as raised:
        PriceFile(path)
    assert str(path) in str(raised.value) and raised.value.option == "prices"
    with pytest.raises(BadConfig, match="cannot read"):
        load_prices(tmp_path / "missing.json")


def test_the_price_package_prices_known_models_and_not_others():
    genai_prices = pytest.importorskip("genai_prices")
    prices = load_prices("genai-prices")
    usage = {"prompt_tokens": 12_000, "cached_tokens": 2_000, "completion_tokens": 3_000}
    when = datetime(2026, 11, 1, tzinfo=UTC)
    cost = prices.cost("gpt-4o", usage, endpoint="https://api.openai.com/v1", at=when)
    expected = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=12_000, cache_read_tokens=2_000, output_tokens=3_000),
        "gpt-4o",
        provider_id="openai",
        genai_request_timestamp=when,
    )
    assert cost.usd == pytest.approx(float(expected.total_price)) and cost.usd > 0
    assert cost.source == f"genai-prices {genai_prices.__version__}: openai gpt-4o"
    # cached input is cheaper than fresh input, by the package's own rates
    fresh = prices.cost("gpt-4o", {"prompt_tokens": 12_000, "completion_tokens": 3_000}, at=when)
    assert fresh.usd is not None and fresh.usd > cost.usd
    # a loopback or proxy URL names no provider: the model name alone decides
    assert prices.cost("gpt-4o", usage, endpoint="http://127.0.0.1:8000/v1", at=when).usd == cost.usd
    local = prices.cost("Qwen/Qwen2.5-VL-7B-Instruct-self-hosted", usage, endpoint="http://127.0.0.1:8000/v1")
    assert local.usd is None and local.source.startswith("unknown: no price for model")


def test_the_price_package_is_imported_only_when_asked_for():
    code = "import bv.engine.prices, bv.cli.app, sys; print('genai_prices' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_request_time_reads_a_rows_started_at():
    assert request_time("2026-11-30T09:41:07Z") == datetime(2026, 11, 30, 9, 41, 7, tzinfo=UTC)
    assert request_time("yesterday") is None and request_time(None) is None


def test_batch_rates_from_a_price_file(tmp_path):
    path = tmp_path / "p.json"
    rates = {"input": 2, "cached_input": 1, "output": 8}
    batch = {"input": 1, "cached_input": 0.25, "output": 3, "reasoning": 4}
    path.write_text(json.dumps({"a": {**rates, "batch": batch}, "h": {**rates, "batch": 0.5}, "o": rates}))
    prices = load_prices(path)
    usage = {"prompt_tokens": 1000, "cached_tokens": 400, "completion_tokens": 500, "reasoning_tokens": 200}
    cost = prices.cost("a", usage, batch=True)
    assert cost.usd == pytest.approx((600 * 1 + 400 * 0.25 + 300 * 3 + 200 * 4) / 1e6)
    assert cost.source == f"{path}: a (batch)"
    assert prices.cost("a", usage).usd == pytest.approx((600 * 2 + 400 * 1 + 500 * 8) / 1e6)  # online
    half = prices.cost("h", usage, batch=True)
    assert half.usd == pytest.approx((600 * 2 + 400 * 1 + 500 * 8) / 2 / 1e6)
    none = prices.cost("o", usage, batch=True)
    assert none.usd is None and none.source == f"unknown: no batch price for model 'o' in {path}"


def test_the_price_package_s_batch_prices_and_a_model_without_one():
    genai_prices = pytest.importorskip("genai_prices")
    prices = load_prices("genai-prices")
    usage = {"prompt_tokens": 12_000, "completion_tokens": 3_000}
    when = datetime(2026, 11, 1, tzinfo=UTC)
    used = genai_prices.Usage(input_tokens=12_000, output_tokens=3_000)
    batch = genai_prices.calc_price(
        used,
        "gpt-4o",
        provider_id="openai",
        genai_request_timestamp=when,
        price_context={"processing": "batch"},
    )
    online = genai_prices.calc_price(used, "gpt-4o", provider_id="openai", genai_request_timestamp=when)
    assert batch.total_price < online.total_price
    cost = prices.cost("gpt-4o", usage, endpoint="https://api.openai.com/v1", at=when, batch=True)
    assert cost.usd == pytest.approx(float(batch.total_price))
    assert cost.source == f"genai-prices {genai_prices.__version__}: openai gpt-4o (batch)"
    # the package prices chatgpt-4o-latest online only: its batch price is unknown, not the online one
    assert prices.cost("chatgpt-4o-latest", usage, endpoint="https://api.openai.com/v1", at=when).usd
    unknown = prices.cost(
        "chatgpt-4o-latest", usage, endpoint="https://api.openai.com/v1", at=when, batch=True
    )
    assert unknown.usd is None and unknown.source.startswith("unknown: no batch price for openai")
