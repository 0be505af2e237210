"""What a report says of its judges: a panel's agreement (Cohen's κ for two judges, Fleiss' κ
for more, bv.core.agreement) over the rows every judge gave a verdict on, the rows they
disagree on, each judge's share of "right" and its cost (docs/reports.md, "A panel of judges").

Rows are the unit here, not items: each row is its own reply, judged on its own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bv.core.agreement import kappa
from bv.reporting.costs import COST_UNITS, is_usd, usd
from bv.reporting.report_types import PanelSummary, Summary

MAX_LISTED = 50  # disagreeing rows named in the report (all are counted)


@dataclass
class JudgeTally:
    models: tuple[str, ...] | None = None
    rule: str = ""
    verdicts: list[tuple[int, ...]] = field(default_factory=list)
    disagreeing: list[str] = field(default_factory=list)  # `id#run`, the first MAX_LISTED
    disagreements: int = 0
    judge_errors: int = 0  # rows some judge could not judge
    other_panels: int = 0  # rows judged by another panel: left out, counted
    cost: list[int] = field(default_factory=list)  # COST_UNITS per judge
    cost_known: list[bool] = field(default_factory=list)

    def add(self, get: Callable[[str], Any], item: str, run: int) -> None:
        """One row's `judge_panel` (`get` is row.get), when it has one."""
        panel = get("judge_panel")
        if panel.__class__ is not list or not panel:
            return
        models = tuple(str(e.get("model")) if isinstance(e, dict) else "?" for e in panel)
        if self.models is None:
            self.models, self.rule = models, str(get("judge_panel_rule") or "")
            self.cost, self.cost_known = [0] * len(models), [True] * len(models)
        elif models != self.models:
            self.other_panels += 1
            return
        said = tuple(e.get("hard") if isinstance(e, dict) else None for e in panel)
        for index, entry in enumerate(panel):
            cost = entry.get("cost_usd") if isinstance(entry, dict) else None
            if cost is not None and is_usd(cost):
                self.cost[index] += round(cost * COST_UNITS)
            else:
                self.cost_known[index] = False
        if not all(v == 0 or v == 1 for v in said):
            self.judge_errors += 1
            return
        verdicts = tuple(int(v) for v in said if v is not None)
        self.verdicts.append(verdicts)
        if len(set(verdicts)) > 1:
            self.disagreements += 1
            if len(self.disagreeing) < MAX_LISTED:
                self.disagreeing.append(f"{item}#{run}")

    def summary(self) -> PanelSummary | None:
        if self.models is None:
            return None
        method, value = kappa(self.verdicts)
        n = len(self.verdicts)
        return {
            "judges": list(self.models),
            "rule": self.rule,
            "rows": n,
            "judge_errors": self.judge_errors,
            "other_panels": self.other_panels,
            "method": method,
            "kappa": None if value is None else round(value, 6),
            "agreement": round((n - self.disagreements) / n, 6) if n else None,
            "right_share": [
                round(sum(v[i] for v in self.verdicts) / n, 6) if n else 0.0 for i in range(len(self.models))
            ],
            "cost_usd": [
                usd(c) if known else None for c, known in zip(self.cost, self.cost_known, strict=True)
            ],
            "disagreements": self.disagreements,
            "disagreeing_rows": list(self.disagreeing),
        }


def panel_lines(summary: Summary) -> list[str]:
    """The lines under the table saying how a panel agreed (none without a panel)."""
    from bv.core.stats import counted, dollars

    panel = summary.get("judge_panel")
    if panel is None:
        return []
    value = (
        "undefined (every judge said the same of every row)"
        if panel["kappa"] is None
        else f"{panel['kappa']:.3f}"
    )
    line = (
        f"{summary['name']}: judge panel ({panel['rule']} of {', '.join(panel['judges'])}):"
        f" {panel['method']} {value} over {counted(panel['rows'], 'row')}"
    )
    if panel["agreement"] is not None:
        line += f" (they agree on {100 * panel['agreement']:.1f}%)"
    costs = [
        f"{j} {dollars(c) if c is not None else 'unknown'}"
        for j, c in zip(panel["judges"], panel["cost_usd"], strict=True)
    ]
    if any(c is not None for c in panel["cost_usd"]):
        line += f"; cost per judge: {', '.join(costs)}"
    lines = [line]
    if panel["disagreements"]:
        shown = ", ".join(panel["disagreeing_rows"])
        more = panel["disagreements"] - len(panel["disagreeing_rows"])
        lines.append(
            f"{summary['name']}: the judges disagree on {counted(panel['disagreements'], 'row')}"
            f" (id#run): {shown}{f' and {more} more' if more > 0 else ''}"
        )
    if panel["judge_errors"] or panel["other_panels"]:
        lines.append(
            f"{summary['name']}: left out of the agreement: {counted(panel['judge_errors'], 'row')}"
            f" some judge could not judge, {counted(panel['other_panels'], 'row')} judged by another panel"
        )
    return lines
