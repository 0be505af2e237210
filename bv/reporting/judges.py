"""What a report says of its judges: a panel's agreement (Cohen's κ for two judges, Fleiss' κ
for more, bv.core.agreement) over the rows every judge gave a verdict on, the rows they
disagree on, each judge's share of "right" and its cost (docs/reports.md, "A panel of judges").

Rows are the unit here, not items: each row is its own reply, judged on its own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bv.core.agreement import kappa
from bv.core.calibration import correct
from bv.core.stats import clopper_pearson, clustered_se, exact_at_n_eff
from bv.reporting.costs import COST_UNITS, is_usd, usd
from bv.reporting.report_types import CalibrationSummary, PanelSummary, Summary

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

    # calibration: (rules' verdict, judge's) counts, the judge's errors, answer types; the rows
    # the LLM judge decided, as (item, hard)
    checked: dict[tuple[int, int], int] = field(default_factory=dict)
    checked_errors: int = 0
    checked_types: dict[str, int] = field(default_factory=dict)
    checker: str = ""
    judged: list[tuple[str, int]] = field(default_factory=list)
    judged_types: dict[str, int] = field(default_factory=dict)

    def add(self, get: Callable[[str], Any], item: str, run: int) -> None:
        """One row's `judge_panel`, `judge_calibration` or LLM verdict (`get` is row.get)."""
        if get("decided_by") == "llm" and not get("judge_panel"):
            hard = get("hard")
            self.judged.append((item, 1 if hard == 1 else 0))
            kind = str(get("ans_type"))
            self.judged_types[kind] = self.judged_types.get(kind, 0) + 1
        checked = get("judge_calibration")
        if isinstance(checked, dict) and get("hard") in (0, 1):
            self.checker = self.checker or str(checked.get("model"))
            said = checked.get("hard")
            if said in (0, 1):
                key = (int(get("hard")), int(said))
                self.checked[key] = self.checked.get(key, 0) + 1
                kind = str(get("ans_type"))
                self.checked_types[kind] = self.checked_types.get(kind, 0) + 1
            else:
                self.checked_errors += 1
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
        method, value = kappa(self.verdicts, len(self.models))
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

    def calibration(self) -> CalibrationSummary | None:
        """The judge's rates on the calibration rows and its rows' accuracy corrected for them."""
        if not self.checked and not self.checked_errors:
            return None
        c = self.checked
        tp, fn, tn, fp = c.get((1, 1), 0), c.get((1, 0), 0), c.get((0, 0), 0), c.get((0, 1), 0)
        n = len(self.judged)
        right = sum(hard for _, hard in self.judged)
        variance, se = None, float("nan")
        if n > 1:
            se = clustered_se([float(h) for _, h in self.judged], [i for i, _ in self.judged])
            variance = se * se
        result = correct(right, n, tp, tp + fn, tn, tn + fp, variance)

        def pair(ci: tuple[float, float] | None) -> list[float] | None:
            return None if ci is None else [round(ci[0], 6), round(ci[1], 6)]

        def figure(value: float | None) -> float | None:
            return None if value is None else round(value, 6)

        share = right / n if n else None
        judged_ci = None  # exact (a Wald interval covered 85-93% at 40-200 rows); repeats: at n_eff
        if share is not None:
            one_each = len({item for item, _ in self.judged}) == n
            judged_ci = clopper_pearson(right, n) if one_each else exact_at_n_eff(share, se, n, n)
        return {
            "judge": self.checker,
            "rows": tp + fn + tn + fp,
            "judge_errors": self.checked_errors,
            "positives": tp + fn,
            "negatives": tn + fp,
            "sensitivity": figure(result.sensitivity),
            "sensitivity_ci95": pair(result.sensitivity_ci95),
            "specificity": figure(result.specificity),
            "specificity_ci95": pair(result.specificity_ci95),
            "judged_rows": n,
            "judged_accuracy": figure(share),
            "judged_ci95": pair(judged_ci),
            "corrected_accuracy": figure(result.estimate),
            "corrected_ci95": pair(result.ci95),
            "answer_types": {"calibration": dict(self.checked_types), "judged": dict(self.judged_types)},
        }


def calibration_lines(summary: Summary) -> list[str]:
    """The lines under the table saying how the LLM judge measured up, and the corrected accuracy."""
    from bv.core.stats import counted

    c = summary.get("judge_calibration")
    if c is None:
        return []

    def rate(value: float | None, ci: list[float] | None) -> str:
        if value is None or ci is None:
            return "n/a"
        return f"{100 * value:.1f}% [{100 * ci[0]:.1f}–{100 * ci[1]:.1f}]"

    name = summary["name"]
    failed = counted(c["judge_errors"], "calibration row")
    if not c["rows"]:  # the judge failed on every row it was asked to check
        return [
            f"{name}: LLM judge {c['judge']} could not be checked: it failed on all {failed} (judge"
            " errors), so neither its errors nor a corrected accuracy are known"
        ]
    lines = [
        f"{name}: LLM judge {c['judge']} checked on {counted(c['rows'], 'row')} the rules decided:"
        f" sensitivity {rate(c['sensitivity'], c['sensitivity_ci95'])} ({c['positives']} right rows),"
        f" specificity {rate(c['specificity'], c['specificity_ci95'])} ({c['negatives']} wrong rows)"
        + (f"; it failed on {failed} more (judge errors, left out)" if c["judge_errors"] else "")
    ]
    if c["judged_rows"]:
        judged = rate(c["judged_accuracy"], c["judged_ci95"])
        corrected = rate(c["corrected_accuracy"], c["corrected_ci95"])
        if c["corrected_accuracy"] is None:
            corrected = "not valid (sensitivity + specificity must exceed 1, both measured)"
        lines.append(
            f"{name}: the {counted(c['judged_rows'], 'row')} the LLM judge decided: {judged} as judged,"
            f" {corrected} corrected for its errors"
        )
    types = c["answer_types"]
    mix = "; ".join(
        f"{where} " + ", ".join(f"{kind} {n}" for kind, n in sorted(types[where].items()))
        for where in ("calibration", "judged")
        if types[where]
    )
    lines.append(f"{name}: answer types: {mix} (the correction holds if the two are alike: docs/judging.md)")
    return lines


def panel_lines(summary: Summary) -> list[str]:
    """The lines under the table saying how a panel agreed (none without a panel)."""
    from bv.core.stats import counted, dollars

    panel = summary.get("judge_panel")
    if panel is None:
        return []
    if panel["kappa"] is not None:
        value = f"{panel['kappa']:.3f}"
    elif panel["rows"]:
        value = "undefined (every judge said the same of every row)"
    else:
        value = "undefined (no row has a verdict from every judge)"
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
