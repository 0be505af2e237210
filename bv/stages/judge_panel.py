"""A panel of LLM judges: every judge asked about the same row at once, each verdict kept in
the row (`judge_panel`), the panel's verdict made by its rule (docs/judging.md, "A panel"):

  majority   right when more than half of the judges say right (a tie is wrong)
  unanimous  right when every judge says right
  any        right when at least one judge says right

A row any judge could not judge is a judge error (`hard` null, the failing judges named in
`judge_error`): a verdict short of a judge is not the panel's, and a re-run asks again only
the judge that failed (the others' replies come from the reply cache).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bv.core.records import JudgeFields, PanelVerdict, RolloutRow


def verdict_said(model: str, cost: Any, hard: Any, reply: Any, error: Any, answer: Any) -> PanelVerdict:
    """One judge's verdict as a row keeps it (a panel's `judge_panel`, `judge_calibration`)."""
    said: PanelVerdict = {
        "model": model,
        "hard": hard,
        "reply": reply,
        "error": error,
        "cost_usd": None if cost is None else cost.usd,
        "price_source": None if cost is None else cost.source,
    }
    if answer is not None:
        said["usage"] = dict(answer.usage)
    return said


class Judge(Protocol):
    """One LLM judge of the panel (bv.stages.judge.LLMJudge)."""

    sent: dict[str, Any]

    @property
    def model(self) -> str: ...
    def cost(self, reply: Any) -> Any: ...
    async def verdict(self, record: RolloutRow, extracted: str | None) -> tuple[Any, ...]: ...


def combine(rule: str, verdicts: Sequence[int]) -> int:
    """The panel's verdict from every judge's 0/1 (see the module's docstring)."""
    if rule == "unanimous":
        return int(all(verdicts))
    if rule == "any":
        return int(any(verdicts))
    return int(2 * sum(verdicts) > len(verdicts))


@dataclass
class Panel:
    judges: Sequence[Judge]
    rule: str

    @property
    def model(self) -> str:
        """What the row's `judge_model` says: the rule and the judges, in order."""
        return f"{self.rule} of {', '.join(judge.model for judge in self.judges)}"

    async def fields(self, row: RolloutRow, extracted: str | None) -> JudgeFields:
        """The judge fields every judge's verdict makes (those the rules set are the caller's)."""
        said = await asyncio.gather(*(judge.verdict(row, extracted) for judge in self.judges))
        panel: list[PanelVerdict] = []
        usage: dict[str, int] = {}
        for judge, (hard, reply, error, answer) in zip(self.judges, said, strict=True):
            entry = verdict_said(judge.model, judge.cost(answer), hard, reply, error, answer)
            if answer is not None:
                for key, value in answer.usage.items():
                    if isinstance(value, int):
                        usage[key] = usage.get(key, 0) + value
            panel.append(entry)
        failed = [e for e in panel if e["hard"] is None]
        priced = [e for e in panel if e["price_source"] is not None]
        unknown = [e for e in priced if e["cost_usd"] is None]
        fields: JudgeFields = {  # type: ignore[typeddict-item]  # the rules' fields: the caller's
            "judge_model": self.model,
            "judge_params": self.judges[0].sent,
            "judge_reply": None,
            "judge_error": "; ".join(f"{e['model']}: {e['error']}" for e in failed) or None,
            "judge_cost_usd": None
            if not priced or unknown
            else round(sum(e["cost_usd"] or 0.0 for e in priced), 8),
            "judge_price_source": None if not priced else (unknown or priced)[0]["price_source"],
            "hard": None if failed else combine(self.rule, [e["hard"] or 0 for e in panel]),
            "decided_by": "error" if failed else "llm",
            "undecided": False,
            "judge_panel": panel,
            "judge_panel_rule": self.rule,
        }
        if usage:
            fields["judge_usage"] = usage
        return fields
