"""What replies cost, in US dollars: priced from a user's price file or from the genai-prices
package (the optional extra `prices`), never guessed.

A reply's usage is counted as OpenAI counts it: `prompt_tokens`, of which `cached_tokens` were
read from the provider's prompt cache, and `completion_tokens`, of which `reasoning_tokens` were
reasoning. Each part is priced at its own rate where the source has one (a cached input token
at the cached rate, a reasoning token at the reasoning rate), else at the rate of the whole it is
part of. A model the source has no price for, a reply without usage, or usage that contradicts
itself is priced `None` with the reason, so a total is never a silent undercount. A reply that
came from a Batch API job (`batch`) is priced at the source's batch rates, and is unknown where
the source has none (never the online rate in silence). The price file's format is in
docs/formats.md ("Prices").
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from bv.core.errors import BadConfig

GENAI_PRICES = "genai-prices"  # the source named by the package rather than a file
MAX_FILE_BYTES = 4 << 20
RATE_NAMES = ("input", "output", "cached_input", "reasoning")  # USD per million tokens
BATCH = "batch"  # a price file's key for a model's batch rates (an object of rates, or a fraction)
BATCH_BASIS = " (batch)"  # how a price source names batch rates
_PER_TOKEN = 1e-6
# The dearest rate a price file may give, USD per million tokens ($1 a token, thousands of times
# any model's): a rate of 1e308 is finite but makes every cost inf (issue 34: "$inf spent").
MAX_RATE = 1e6


@dataclass(frozen=True)
class Cost:
    """A price in USD, or None when unknown; `source` says where it came from, or why it is unknown."""

    usd: float | None
    source: str


@dataclass(frozen=True)
class Rates:
    """A model's prices in USD per million tokens; None: the rate of the whole the part is in."""

    input: float
    output: float
    cached_input: float | None = None
    reasoning: float | None = None
    batch: Rates | None = None  # the rates of a reply from a batch job; None: unknown

    def scaled(self, fraction: float) -> Rates:
        """These rates times `fraction` (a price file's `"batch": 0.5`)."""
        return Rates(
            self.input * fraction,
            self.output * fraction,
            None if self.cached_input is None else self.cached_input * fraction,
            None if self.reasoning is None else self.reasoning * fraction,
        )


class Prices(Protocol):
    """A price source: what one reply of `model` with `usage` cost (`batch`: at batch rates)."""

    name: str

    def cost(
        self,
        model: str,
        usage: Mapping[str, Any],
        *,
        endpoint: str | None = None,
        at: datetime | None = None,
        batch: bool = False,
    ) -> Cost: ...


def _counts(usage: Mapping[str, Any]) -> tuple[int, int, int, int] | str:
    """(prompt, cached, completion, reasoning) tokens, or why they cannot be priced."""
    values = []
    for name in ("prompt_tokens", "cached_tokens", "completion_tokens", "reasoning_tokens"):
        value = usage.get(name, 0)
        if value.__class__ is not int or value < 0:
            return f"usage {name} is {value!r}, not a count"
        values.append(value)
    prompt, cached, completion, reasoning = values
    if "prompt_tokens" not in usage or "completion_tokens" not in usage:
        return "no token usage reported"
    if cached > prompt or reasoning > completion:
        return "usage contradicts itself (a part larger than its whole)"
    return prompt, cached, completion, reasoning


class PriceFile:
    """Prices per model from a JSON file: `{"MODEL": {"input": 2.5, "output": 10}, ...}`."""

    def __init__(self, path: Path) -> None:
        self.name = str(path)
        self.rates = read_price_file(path)

    def cost(
        self,
        model: str,
        usage: Mapping[str, Any],
        *,
        endpoint: str | None = None,
        at: datetime | None = None,
        batch: bool = False,
    ) -> Cost:
        rates = self.rates.get(model)
        if rates is None:
            return Cost(None, f"unknown: no price for model {model!r} in {self.name}")
        if batch:
            if rates.batch is None:
                return Cost(None, f"unknown: no batch price for model {model!r} in {self.name}")
            rates = rates.batch
        counts = _counts(usage)
        if isinstance(counts, str):
            return Cost(None, f"unknown: {counts}")
        prompt, cached, completion, reasoning = counts
        usd = (
            (prompt - cached) * rates.input
            + cached * (rates.input if rates.cached_input is None else rates.cached_input)
            + (completion - reasoning) * rates.output
            + reasoning * (rates.output if rates.reasoning is None else rates.reasoning)
        ) * _PER_TOKEN
        return Cost(usd, f"{self.name}: {model}{BATCH_BASIS if batch else ''}")


def read_price_file(path: Path) -> dict[str, Rates]:
    """The rates of a price file, checked: BadConfig naming the file and the model for anything wrong."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise BadConfig(
            f"cannot read the price file {path}: {exc.strerror or exc}", option="prices"
        ) from None
    if len(data) > MAX_FILE_BYTES:
        raise BadConfig(f"the price file {path} is over {MAX_FILE_BYTES >> 20} MiB", option="prices")
    try:
        table = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadConfig(f"the price file {path} is not JSON: {exc}", option="prices") from None
    if not isinstance(table, dict) or not table:
        raise BadConfig(
            f"the price file {path} must be a JSON object of models and their rates", option="prices"
        )
    return {str(model): _rates(path, str(model), entry) for model, entry in table.items()}


def _rates(path: Path, model: str, entry: Any, batch: bool = False) -> Rates:
    where = f"the price file {path}, model {model!r}" + (f", its {BATCH!r} rates" if batch else "")
    if not isinstance(entry, dict):
        raise BadConfig(
            f'{where}: rates must be an object such as {{"input": 2.5, "output": 10}}', option="prices"
        )
    entry = dict(entry)
    batch_rates = entry.pop(BATCH, None) if not batch else None
    unknown = sorted(set(entry) - set(RATE_NAMES))
    if unknown:
        raise BadConfig(
            f"{where}: unknown rate {unknown[0]!r} (known: {', '.join(RATE_NAMES)})", option="prices"
        )
    for name in ("input", "output"):
        if name not in entry:
            raise BadConfig(f"{where}: no {name!r} rate (USD per million tokens)", option="prices")
    for name, value in entry.items():
        if value.__class__ not in (int, float) or not (math.isfinite(value) and 0 <= value <= MAX_RATE):
            raise BadConfig(
                f"{where}: {name!r} must be a number of USD per million tokens from 0 to"
                f" {MAX_RATE:,.0f}, not {value!r}",
                option="prices",
            )
    given = {name: float(value) for name, value in entry.items()}
    rates = Rates(given["input"], given["output"], given.get("cached_input"), given.get("reasoning"))
    if batch_rates is None:
        return rates
    if batch_rates.__class__ in (int, float):
        if not (math.isfinite(batch_rates) and 0 <= batch_rates <= 1):
            raise BadConfig(
                f"{where}: {BATCH!r} must be its batch rates (an object) or the fraction of these rates"
                f" a batch costs (0.5 for half), not {batch_rates!r}",
                option="prices",
            )
        return replace(rates, batch=rates.scaled(float(batch_rates)))
    return replace(rates, batch=_rates(path, model, batch_rates, batch=True))


class PackagePrices:
    """Prices from the genai-prices package (pydantic's maintained price database), imported
    only when a price is asked for. A model is looked up with the provider the endpoint's URL
    names (api.openai.com, Azure, OpenRouter, ...), else by its name alone; at the time of the
    request, since prices change. Batch rates are the package's `processing: batch` price
    variant; a model without one has no known batch price."""

    def __init__(self) -> None:
        try:
            import genai_prices
        except ImportError:
            raise BadConfig(
                "the genai-prices package is not installed: pip install 'babyvision-bv[prices]',"
                " or give a price file",
                option="prices",
            ) from None
        self._package = genai_prices
        self.name = f"{GENAI_PRICES} {genai_prices.__version__}"

    def cost(
        self,
        model: str,
        usage: Mapping[str, Any],
        *,
        endpoint: str | None = None,
        at: datetime | None = None,
        batch: bool = False,
    ) -> Cost:
        counts = _counts(usage)
        if isinstance(counts, str):
            return Cost(None, f"unknown: {counts}")
        prompt, cached, completion, reasoning = counts
        used = self._package.Usage(
            input_tokens=prompt,
            cache_read_tokens=cached,
            output_tokens=completion,
            output_reasoning_tokens=reasoning,
        )
        calc = self._package.calc_price
        context = {"processing": "batch"} if batch else None
        try:
            try:
                found = calc(
                    used, model, provider_api_url=endpoint, genai_request_timestamp=at, price_context=context
                )
            except LookupError:  # an endpoint of no known provider (a proxy, a local server)
                if endpoint is None:
                    raise
                found = calc(used, model, genai_request_timestamp=at, price_context=context)
        except LookupError:
            return Cost(None, f"unknown: no price for model {model!r} in {self.name}")
        except ValueError as exc:  # usage the package refuses
            return Cost(None, f"unknown: {exc}")
        named = f"{found.provider.id} {found.model.id}"
        if batch and not _has_batch_price(found, at):
            return Cost(None, f"unknown: no batch price for {named} in {self.name}")
        return Cost(float(found.total_price), f"{self.name}: {named}{BATCH_BASIS if batch else ''}")


def _has_batch_price(found: Any, at: datetime | None) -> bool:
    """Whether genai-prices priced `found` at a batch variant: the package falls back to the
    standard prices when the model has none in force (or was found under another provider)."""
    model, provider = found.model, found.provider
    if not any(model is own for own in provider.models):
        return False
    when = at or datetime.now(UTC)
    return any(
        variant.when.get("processing") == "batch"
        and (variant.constraint is None or variant.constraint.active(when))
        for variant in model.price_variants or ()
    )


def load_prices(source: str | Path) -> Prices:
    """The price source a setting names: `genai-prices`, or a price file's path."""
    if str(source) == GENAI_PRICES:
        return PackagePrices()
    return PriceFile(Path(source))


def request_time(started_at: Any) -> datetime | None:
    """A row's `started_at` (ISO 8601, UTC) as a time to price at; None (now) when absent or bad."""
    if not isinstance(started_at, str):
        return None
    try:
        return datetime.strptime(started_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def reply_cost(
    prices: Prices, usage: Mapping[str, Any], model: str, served: Any = None, **where: Any
) -> Cost:
    """What one reply cost: priced by the model name the server answered with (a dated version,
    when it names one and the source prices it), else by the name asked for. `where`: the
    endpoint, the time and the basis (`batch`) to price at."""
    if isinstance(served, str) and served and served != model:
        cost = prices.cost(served, usage, **where)
        if cost.usd is not None:
            return cost
    return prices.cost(model, usage, **where)


def total_cost(costs: Iterable[Cost], none: str = "no replies") -> Cost:
    """Several replies' cost: their sum, or unknown (with the first reason) when any one is."""
    usd, sources = 0.0, []
    for cost in costs:
        if cost.usd is None:
            return cost
        usd += cost.usd
        if cost.source not in sources:
            sources.append(cost.source)
    return Cost(round(usd, 8), "; ".join(sources) or none)


def price_book(
    source: str | None,
    max_cost: float | None,
    batch: bool = False,
    max_tokens: Any = None,
    max_tokens_name: str = "`max_tokens`",
) -> Prices | None:
    """A stage's prices from its settings: None when none are asked for; BadConfig for a cost
    limit that cannot be kept (no prices to count it in, not a number of dollars, or under
    `batch` with no token limit to bound each request by: bv.engine.batch_budget)."""
    if max_cost is not None:
        if not (isinstance(max_cost, int | float) and math.isfinite(max_cost) and max_cost >= 0):
            raise BadConfig(f"`max_cost` must be a number of USD, not {max_cost!r}", option="max_cost")
        if source is None:
            raise BadConfig(
                "`max_cost` needs `prices` (a price file, or genai-prices) to count the spend in",
                option="max_cost",
            )
        if batch and not (max_tokens.__class__ is int and max_tokens > 0):
            raise BadConfig(
                f"`max_cost` with `batch` needs {max_tokens_name}: a batch cannot be stopped once"
                " submitted, so bv submits only the requests whose worst case (their prompt and the"
                " token limit of completion, at batch rates) fits the limit",
                option="max_cost",
            )
    return None if source is None else load_prices(source)


def first_url(endpoint: str | None) -> str | None:
    """The URL to look a provider up by: a row's endpoint names its replicas space-separated."""
    return (endpoint or "").split(" ")[0] or None


def row_cost(
    prices: Prices, turns: Iterable[Mapping[str, Any]], model: str, endpoint: str | None, started_at: Any
) -> Cost:
    """What a row's replies cost (cached ones too: they were paid for when made), at the price in
    force when the row started and on the basis each was paid at (a batch reply at batch rates,
    from the cache too); a row without replies cost nothing."""
    at, where = request_time(started_at), first_url(endpoint)
    return total_cost(
        (
            reply_cost(
                prices,
                t.get("usage") or {},
                model,
                t.get("model"),
                endpoint=where,
                at=at,
                batch=t.get("batch") is True,
            )
            for t in turns
        ),
        none="no replies",
    )


def batch_ceiling(prices: Prices, model: str, endpoint: str | None) -> Rates | str:
    """The dearest batch rates a reply to a request for `model` may be priced at, or why that is
    unknown. `reply_cost` prices a reply by the model the server names when the source prices it,
    so a server may name any model the source prices (issue 34: $0.66 spent of $0.01): a price
    file bounds it by its dearest batch rates of each kind of token; genai-prices, every
    provider's models, cannot be a bound."""
    asked = prices.cost(model, {"prompt_tokens": 1, "completion_tokens": 1}, endpoint=endpoint, batch=True)
    if asked.usd is None:
        return asked.source
    if not isinstance(prices, PriceFile):
        return (
            f"not bounded: a batch reply is priced by the model its server names, which may be any"
            f" model {prices.name} prices; a price file naming the models this endpoint may answer"
            " with bounds it"
        )
    rates = [r.batch for r in prices.rates.values() if r.batch is not None]
    return Rates(  # the dearest of each kind: cached input and reasoning may be priced above the whole
        max(max(r.input, r.cached_input or 0.0) for r in rates),
        max(max(r.output, r.reasoning or 0.0) for r in rates),
    )


def at_rates(rates: Rates, prompt_tokens: int, completion_tokens: int) -> float:
    """USD for this many prompt and completion tokens at `rates`' input and output rates."""
    return (prompt_tokens * rates.input + completion_tokens * rates.output) * _PER_TOKEN


def check_priced(
    prices: Prices | None,
    max_cost: float | None,
    model: str | None,
    endpoint: str | None,
    batch: bool = False,
) -> None:
    """Refuse (BadConfig, before anything is sent) a cost limit on a model the prices do not
    know: every reply's cost would be unknown, so the limit could not be kept."""
    if prices is None or max_cost is None:
        return
    found = prices.cost(
        model or "", {"prompt_tokens": 1, "completion_tokens": 1}, endpoint=endpoint, batch=batch
    )
    if found.usd is None:
        raise BadConfig(
            f"`max_cost` cannot be kept for model {model!r}: its price is {found.source}, so nothing"
            ' is sent. Give its rates in a price file (`prices` FILE: {"MODEL": {"input": USD,'
            ' "output": USD}} per million tokens, docs/formats.md#prices), or run without `max_cost`',
            option="max_cost",
        )
    ceiling = batch_ceiling(prices, model or "", endpoint) if batch else None
    if isinstance(ceiling, str):
        raise BadConfig(
            f"`max_cost` with `batch` cannot be kept for model {model!r}: its worst case is {ceiling};"
            " nothing is sent",
            option="max_cost",
        )
