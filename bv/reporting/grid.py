"""The report as rows and columns for people: which groups, in what order, and each figure as
text. The table (bv.reporting.text_table in a pipe or file, bv.reporting.table_fit on a
terminal), Markdown and the HTML page all lay out what `grid` returns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from bv.core.stats import p_beside, points
from bv.reporting.compare import SIGNIFICANT
from bv.reporting.report_types import Built, Comparison, Difference, Figures, Paired, Summary

_LEVEL_GROUP = {"type": "by_type", "subtype": "by_subtype", "ans_type": "by_ans_type"}
# What replies were, beside right or wrong: columns of the table (one input) when any row has one,
# and a sentence under it for each input.
# (figure, column head, noun counted, the rest of the phrase)
REPLY_COLUMNS = (
    ("refusals", "refused", "refusal", ""),
    ("content_filtered", "filtered", "row", " stopped by a content filter"),
    ("cut_off", "cut off", "row", " cut off at the token limit with no answer"),
    ("answer_in_reasoning", "ans. in reasoning", "row", " with the answer only in the reasoning"),
)


def reply_count(cell: Figures, key: str) -> int:
    """One of a cell's REPLY_COLUMNS figures (0 in a report made before bv counted them)."""
    value = cast(Mapping[str, Any], cell).get(key)
    return value if isinstance(value, int) else 0


def ordered_groups(summary: Summary) -> list[tuple[str, str, str, Figures]]:
    """(level, label, group name, cell) in display order: overall, then each type followed by
    its subtypes, then the answer types."""
    out: list[tuple[str, str, str, Figures]] = [("overall", "Overall", "", summary["overall"])]
    for type_name, cell in summary["by_type"].items():
        out.append(("type", type_name, type_name, cell))
        for subtype, sub in summary["by_subtype"].items():
            if sub.get("type") == type_name:
                out.append(("subtype", subtype, subtype, sub))
    for answer_type, cell in summary["by_ans_type"].items():
        out.append(("ans_type", f"{answer_type} items", answer_type, cell))
    return out


def group_difference(pair: Paired, level: str, group: str) -> Difference | None:
    """The pair's difference in one group ("overall" for the whole)."""
    if level == "overall":
        return pair
    return pair[_LEVEL_GROUP[level]].get(group)  # type: ignore[literal-required]


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def interval_text(ci: list[float] | None, sign: bool = False) -> str:
    if not ci:
        return "–"
    return f"{points(ci[0])}, {points(ci[1])}" if sign else f"{pct(ci[0])}–{pct(ci[1])}"


# How much of an input's accuracy a comparison shows: all of it, without its interval, or bare
# (a narrow terminal keeps the difference's interval, which the verdict is about).
FULL, BRIEF, BARE = 0, 1, 2


def accuracy_text(cell: Figures, detail: int = FULL) -> str:
    """`41.2 ± 2.1 [36.3–46.1]`: ± the run-to-run spread, [] the 95% interval over items (left
    out at BRIEF, the spread too at BARE)."""
    if cell["accuracy"] is None:
        return "–"
    spread = f" ± {pct(cell['std'])}" if cell["std"] is not None and detail < BARE else ""
    return f"{pct(cell['accuracy'])}{spread}" + ("" if detail else f" [{interval_text(cell.get('ci95'))}]")


def difference_text(diff: Difference | None) -> str:
    """`+7.5 [-2.1, +17.1]`: the mean per-item difference in points and its 95% interval."""
    if diff is None or diff["diff"] is None:
        return "–"
    return f"{points(diff['diff'])} [{interval_text(diff['ci95'], sign=True)}]"


def finished_only(summaries: list[Summary]) -> bool:
    """Whether the accuracies are over finished rows only (--exclude-failed), which every format says."""
    return any(str(s.get("accuracy_over", "")).startswith("finished") for s in summaries)


def failures_text(cell: Figures) -> str:
    return f"{cell['errors']}/{cell['judge_errors']}/{cell['undecided']}"


def grid(
    report: Built, detail: int = FULL, only: int | None = None
) -> tuple[list[str], list[list[str]], list[str]]:
    """Headers, rows and each row's level, for the table and Markdown formats; `detail` says how
    much of each input's accuracy a comparison shows, and `only` keeps one comparison alone
    (its two inputs), as a narrow table stacks them."""
    summaries = summaries_of(report)
    accuracy_label = "accuracy % (finished rows)" if finished_only(summaries) else "accuracy %"
    if len(summaries) == 1:
        s = summaries[0]
        several = s["overall"]["runs"] > 1
        headers = ["group", "n", "correct", accuracy_label, "95% CI (items)"]
        headers += ["± std (runs)"] if several else []
        headers += ["chance %", "errors", "judge err", "undecided"]
        shown = [(key, head) for key, head, _, _ in REPLY_COLUMNS if reply_count(s["overall"], key)]
        headers += [head for _, head in shown]
        rows, levels = [], []
        for level, label, _, cell in ordered_groups(s):
            row = [label, str(cell["n"]), f"{cell['correct']}/{cell.get('denominator', cell['rows'])}"]
            row += [pct(cell["accuracy"]), interval_text(cell.get("ci95"))]
            row += [pct(cell["std"])] if several else []
            row += [
                pct(cell["chance"]),
                str(cell["errors"]),
                str(cell["judge_errors"]),
                str(cell["undecided"]),
                *(str(reply_count(cell, key)) for key, _ in shown),
            ]
            rows.append(row)
            levels.append(level)
        return headers, rows, levels
    comparison = comparison_of(report)
    pairs = comparison["pairs"] if comparison else []
    if only is not None:
        pairs = [pairs[only]]
        summaries = [s for s in summaries if s["name"] in (pairs[0]["a"], pairs[0]["b"])]
    suffix = " % (finished)" if finished_only(summaries) else " %"
    headers = ["group", "n"] + [f"{s['name']}{suffix}" for s in summaries]
    adjusted = "2-sided p (" + (comparison["adjustment"].split(",")[0] if comparison else "") + ")"
    for pair in pairs:
        headers += (
            ["Δ [2-sided 95% CI]", adjusted]
            if len(pairs) == 1
            else [f"Δ {pair['b']} [2-sided 95% CI]", f"{adjusted} {pair['b']}"]
        )
    # Failed rows side by side too (rollout errors/judge errors/undecided), when there are any.
    show_failed = any(
        s["overall"]["errors"] + s["overall"]["judge_errors"] + s["overall"]["undecided"] for s in summaries
    )
    if show_failed:
        headers += [f"{s['name']} err/judge/und" for s in summaries]
    rows, levels = [], []
    for level, label, group, _ in ordered_groups(summaries[0]):
        cells = [_find(s, level, label) for s in summaries]
        counts = [str(c["n"]) if c else "–" for c in cells]
        row = [label, counts[0] if len(set(counts)) == 1 else "/".join(counts)]  # one n when they agree
        row += [accuracy_text(c, detail) if c else "–" for c in cells]
        for pair in pairs:
            diff = group_difference(pair, level, group)
            row += [difference_text(diff), "–" if diff is None else p_beside(diff["p_adjusted"], SIGNIFICANT)]
        if show_failed:
            row += [failures_text(c) if c else "–" for c in cells]
        rows.append(row)
        levels.append(level)
    return headers, rows, levels


def _find(summary: Summary, level: str, label: str) -> Figures | None:
    for lvl, lab, _, cell in ordered_groups(summary):
        if lvl == level and lab == label:
            return cell
    return None


def summaries_of(report: Built) -> list[Summary]:
    """One summary per input (or --by group)."""
    return report["inputs"] if "inputs" in report else [report]


def comparison_of(report: Built) -> Comparison | None:
    """How the inputs compare; None for one input."""
    return report["comparison"] if "inputs" in report else None
