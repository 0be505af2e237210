"""`calibrate`: the LLM judge also judges a share of the rows the rules decided, so that its
errors can be measured against verdicts known to be right (bv.core.calibration,
docs/judging.md, "Measuring the judge"). Which rows: those whose (id, run) hashes below the
share, the same on every re-run (so the reply cache answers them) and in any order or shard.
The row keeps the rules' verdict; the LLM's is kept beside it (`judge_calibration`), its cost
and tokens in the row's."""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

from bv.core.records import JudgedRow, RolloutRow
from bv.stages.judge_panel import verdict_said


class Judge(Protocol):
    @property
    def model(self) -> str: ...
    def cost(self, reply: Any) -> Any: ...
    async def verdict(self, record: RolloutRow, extracted: str | None) -> tuple[Any, ...]: ...


def in_sample(row: JudgedRow, share: float) -> bool:
    """Whether a rule-decided row is in the calibration sample (none left undecided or failed)."""
    if row["decided_by"] != "rules" or row["undecided"]:
        return False
    digest = hashlib.sha256(f"{row['id']}\0{row.get('run', 0)}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < share * 2**64


async def calibration(row: JudgedRow, judge: Judge, extracted: str | None) -> None:
    """Ask the LLM judge about a row the rules decided; its verdict into `judge_calibration`."""
    hard, reply, error, answer = await judge.verdict(row, extracted)
    said = verdict_said(judge.model, judge.cost(answer), hard, reply, error, answer)
    if answer is not None:
        row["judge_usage"] = dict(answer.usage)
    row["judge_cost_usd"], row["judge_price_source"] = said["cost_usd"], said["price_source"]
    row["judge_calibration"] = said


def unchecked(share: float, rows: int, by_rules: int) -> str:
    """What is said when `calibrate` checked no row (the report can then say nothing of it)."""
    from bv.core.stats import counted

    why = (
        f"the rules decided none of the {counted(rows, 'row')}, and the judge is checked only on rows"
        " whose verdict the rules know"
        if not by_rules
        else f"none of the {counted(by_rules, 'row')} the rules decided fell in its share: give a larger one"
    )
    return f"warning: `calibrate` {share:g} checked no row: {why}; the report has no measure of the judge"
