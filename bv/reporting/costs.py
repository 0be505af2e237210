"""What the rows of a report cost: each row's recorded cost (its rollout's replies and its LLM
judge's, bv.engine.prices), summed in whole units so that the total does not depend on the rows'
order, and the rows whose cost is not known counted apart, never taken as free."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bv.core.stats import counted, dollars
from bv.reporting.report_types import Summary, UsageTotals

COST_UNITS = 10**8  # costs are summed in hundred-millionths of a dollar (rows record 8 decimals)
MAX_ROW_USD = 1e6  # a row's cost outside [0, this) is not a cost: the row counts as unknown


def is_usd(value: Any) -> bool:
    """A recorded cost bv can add: a number in [0, MAX_ROW_USD), not a bool, NaN or infinity."""
    return (value.__class__ is float or value.__class__ is int) and 0 <= value < MAX_ROW_USD


def row_cost_units(get: Callable[[str], Any]) -> int | None:
    """A row's cost in COST_UNITS (`get` is row.get), None when it is not known: no cost recorded
    (a row made without prices), a reply of unknown price, or an LLM judge's of unknown price."""
    cost = get("cost_usd")
    if not is_usd(cost):
        return None
    units = round(cost * COST_UNITS)
    judge = get("judge_cost_usd")
    if is_usd(judge):
        units += round(judge * COST_UNITS)
    elif get("judge_price_source") is not None:  # an LLM judge was priced, and its price is unknown
        return None
    return units


def usd(units: int) -> float:
    return round(units / COST_UNITS, 8)


def cost_text(usage: UsageTotals) -> str:
    """`cost $12.34`, `cost $12.34 (3 rows of unknown cost not counted)`; "" when no row has one."""
    if usage["cost_usd"] is None:
        return ""
    text = f"cost {dollars(usage['cost_usd'])}"
    if usage["cost_unknown"]:
        text += f" ({counted(usage['cost_unknown'], 'row')} of unknown cost not counted)"
    return text


def total_cost_text(summaries: Sequence[Summary]) -> str:
    """The cost of several inputs together, when more than one has a cost; "" otherwise."""
    costs = [s["usage"]["cost_usd"] for s in summaries if s["usage"]["cost_usd"] is not None]
    if len(summaries) < 2 or not costs:
        return ""
    unknown = sum(s["usage"]["cost_unknown"] for s in summaries)
    text = f"Total cost of the {len(summaries)} inputs: {dollars(sum(costs))}"
    return text + (f" ({counted(unknown, 'row')} of unknown cost not counted)" if unknown else "")
