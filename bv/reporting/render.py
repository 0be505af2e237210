"""Rendering report summaries as a terminal table, Markdown, CSV or JSON.

Table and Markdown share one layout (`grid`), for people; CSV is long and numeric, one line
per input and group, for spreadsheets and pandas; JSON holds every figure.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping
from typing import Any, cast

from bv.core.errors import StdoutClosed
from bv.core.stats import counted, human_count
from bv.core.terminal import markup_safe, printable
from bv.reporting.costs import cost_text, total_cost_text
from bv.reporting.report_types import (
    Built,
    Comparison,
    Difference,
    Figures,
    Paired,
    Provenance,
    ReportData,
    Summary,
)

FIGURES = (
    "n",
    "rows",
    "finished",
    "runs",
    "correct",
    "denominator",
    "accuracy",
    "std",
    "item_accuracy",
    "se",
    "ci_low",
    "ci_high",
    "chance",
    "errors",
    "judge_errors",
    "undecided",
    "refusals",
    "content_filtered",
    "cut_off",
    "answer_in_reasoning",
    "accuracy_over",
    "complete",
    "items_per_run",
)
# CSV: each input's difference from the baseline in the same group (empty for the baseline)
DIFFERENCE = (
    "vs",
    "diff",
    "diff_low",
    "diff_high",
    "p_value",
    "p_adjusted",
    "improved",
    "regressed",
    "unchanged",
)
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


def _groups(summary: Summary) -> list[tuple[str, str, str, Figures]]:
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
    return f"{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}" if sign else f"{pct(ci[0])}–{pct(ci[1])}"


def accuracy_text(cell: Figures, brief: bool = False) -> str:
    """`41.2 ± 2.1 [36.3–46.1]`: ± the run-to-run spread, [] the 95% interval over items
    (left out when `brief`, for a narrow terminal)."""
    if cell["accuracy"] is None:
        return "–"
    spread = f" ± {pct(cell['std'])}" if cell["std"] is not None else ""
    return f"{pct(cell['accuracy'])}{spread}" + ("" if brief else f" [{interval_text(cell.get('ci95'))}]")


def difference_text(diff: Difference | None) -> str:
    """`+7.5 [-2.1, +17.1]`: the mean per-item difference in points and its 95% interval."""
    if diff is None or diff["diff"] is None:
        return "–"
    return f"{100 * diff['diff']:+.1f} [{interval_text(diff['ci95'], sign=True)}]"


def finished_only(summaries: list[Summary]) -> bool:
    """Whether the accuracies are over finished rows only (--exclude-failed), which every format says."""
    return any(str(s.get("accuracy_over", "")).startswith("finished") for s in summaries)


def failures_text(cell: Figures) -> str:
    return f"{cell['errors']}/{cell['judge_errors']}/{cell['undecided']}"


def grid(report: Built, brief: bool = False) -> tuple[list[str], list[list[str]], list[str]]:
    """Headers, rows and each row's level, for the table and Markdown formats; `brief` leaves
    the inputs' own intervals out of a comparison (a narrow terminal keeps the difference's)."""
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
        for level, label, _, cell in _groups(s):
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
    suffix = " % (finished)" if finished_only(summaries) else " %"
    headers = ["group", "n"] + [f"{s['name']}{suffix}" for s in summaries]
    adjusted = "p (" + (comparison["adjustment"].split(",")[0] if comparison else "") + ")"
    for pair in pairs:
        headers += (
            ["Δ [95% CI]", adjusted]
            if len(pairs) == 1
            else [f"Δ {pair['b']} [95% CI]", f"{adjusted} {pair['b']}"]
        )
    # Failed rows side by side too (rollout errors/judge errors/undecided), when there are any.
    show_failed = any(
        s["overall"]["errors"] + s["overall"]["judge_errors"] + s["overall"]["undecided"] for s in summaries
    )
    if show_failed:
        headers += [f"{s['name']} err/judge/und" for s in summaries]
    rows, levels = [], []
    for level, label, group, _ in _groups(summaries[0]):
        cells = [_find(s, level, label) for s in summaries]
        row = [label, "/".join(str(c["n"]) if c else "–" for c in cells)]
        row += [accuracy_text(c, brief) if c else "–" for c in cells]
        for pair in pairs:
            diff = group_difference(pair, level, group)
            row += [difference_text(diff), "–" if diff is None else f"{diff['p_adjusted']:.2g}"]
        if show_failed:
            row += [failures_text(c) if c else "–" for c in cells]
        rows.append(row)
        levels.append(level)
    return headers, rows, levels


def _find(summary: Summary, level: str, label: str) -> Figures | None:
    for lvl, lab, _, cell in _groups(summary):
        if lvl == level and lab == label:
            return cell
    return None


def summaries_of(report: Built) -> list[Summary]:
    """One summary per input (or --by group)."""
    return report["inputs"] if "inputs" in report else [report]


def comparison_of(report: Built) -> Comparison | None:
    """How the inputs compare; None for one input."""
    return report["comparison"] if "inputs" in report else None


def notes(report: Built) -> list[str]:
    """The lines under the table: how each figure is computed, each input's provenance and cost,
    what a reader must know (incomplete runs, different items, other differences), and the
    answer of each comparison in one line."""
    from bv.reporting.compare import notices, power_lines, provenance_of

    summaries = summaries_of(report)
    several_runs = any(s["overall"]["runs"] > 1 for s in summaries)
    lines = [
        f"Brackets: the {summaries[0]['interval']}"
        + ("; ± the run-to-run spread (population std of the per-run accuracies)" if several_runs else "")
    ]
    for summary in summaries:
        usage, parts = summary["usage"], []
        made = provenance_of(summary)
        for name in ("model", "endpoint", "skill", "style", "prompts", "params", "judge", "judge_version"):
            if made[name]:
                parts.append(f"{name.replace('_', ' ')} {made[name]}")
        parts += provenance_parts(summary.get("provenance") or {})
        if usage["prompt_tokens"] or usage["completion_tokens"]:
            parts.append(
                f"{human_count(usage['prompt_tokens'])} prompt + {human_count(usage['completion_tokens'])}"
                " completion tokens"
            )
        if usage["cost_usd"] is not None:
            parts.append(cost_text(usage))
        if usage["latency_s_mean"] is not None:
            parts.append(f"mean latency {usage['latency_s_mean']:.2f} s per row")
        parts.append(f"{counted(usage['unboxed'], 'reply')} without \\boxed{{}}")
        for key, _, noun, rest in REPLY_COLUMNS:
            if reply_count(summary["overall"], key):
                parts.append(counted(reply_count(summary["overall"], key), noun) + rest)
        lines.append(f"{summary['name']}: " + "; ".join(parts))
    if total_cost_text(summaries):
        lines.append(total_cost_text(summaries) + ".")
    if finished_only(summaries):
        lines.append(
            "Accuracy over finished rows only: rollout errors, judge errors and"
            " undecided rows are left out of it, and counted in their own columns."
        )
    lines += [f"Note: {line}" for line in notices(report)]
    comparison = comparison_of(report)
    if comparison:
        if len(comparison["pairs"]) > 1 or comparison["pairs"][0]["by_type"]:
            lines.append(f"p-values adjusted by {comparison['adjustment']}.")
        lines += [pair["verdict"] + "." for pair in comparison["pairs"]]
    plans = report.get("power") if "inputs" in report else None
    if plans:
        lines += power_lines(plans)
    return lines


def provenance_parts(provenance: Provenance) -> list[str]:
    """Where and when an input's rows were made, as far as its rows say (older rows do not)."""
    parts = []
    if provenance.get("bv_versions"):
        parts.append("bv " + ", ".join(provenance["bv_versions"]))
    started = provenance.get("started_at")
    if started:
        first, last = started["first"], started["last"]
        parts.append(f"rows made {first}" + ("" if first == last else f" to {last}"))
    return parts


def render_table(report: Built, stream: Any) -> None:
    from rich.console import Console

    from bv.reporting.table_fit import fits, fitted_table, natural_width

    class QuietConsole(Console):
        def on_broken_pipe(self) -> None:  # rich would exit 1; a closed stdout ends bv quietly
            raise StdoutClosed()

    # On a terminal the table fits the window (bv.reporting.table_fit); in a pipe or a file it is
    # as wide as it needs, never cut (long group names, many side-by-side columns). No emoji
    # codes: a `:name:` in a file or group name is data, shown as written.
    summaries = summaries_of(report)
    headers, rows, levels = grid(report)
    brief = False
    if stream.isatty():
        console = QuietConsole(file=stream, emoji=False)
        brief = len(summaries) > 1 and not fits(headers, rows, console.width)
        if brief:
            headers, rows, levels = grid(report, brief=True)
    else:
        console = QuietConsole(file=stream, emoji=False, width=max(240, natural_width(headers, rows, levels)))
    title = "bv report: " + ", ".join(markup_safe(s["name"]) for s in summaries)
    table = fitted_table(title, headers, rows, levels, console.width)
    for row, level in zip(rows, levels, strict=True):
        name = markup_safe(row[0])  # a type or subtype comes from data: never markup, never escapes
        label = {
            "overall": f"[bold]{name}[/]",
            "type": f"[bold]{name}[/]",
            "subtype": f"  {name}",
            "ans_type": f"[dim]{name}[/]",
        }[level]
        table.add_row(label, *(markup_safe(cell) for cell in row[1:]), end_section=level in ("overall",))

    console.print(table)
    if brief:
        console.print(
            "Each input's own interval is left out to fit the terminal (the Markdown format shows it)."
        )
    for line in notes(report):  # whole lines in a pipe or file, as the table is
        console.print(printable(line), markup=False, highlight=False, soft_wrap=not stream.isatty())


def render_markdown(report: Built, stream: Any) -> None:
    headers, rows, levels = grid(report)
    stream.write("| " + " | ".join(headers) + " |\n")
    stream.write("|" + "|".join(["---"] + ["---:"] * (len(headers) - 1)) + "|\n")
    for row, level in zip(rows, levels, strict=True):
        label = printable(row[0]).replace("|", "\\|")  # data: no escape codes, no column breaks
        label = f"**{label}**" if level in ("overall", "type") else label
        stream.write("| " + " | ".join([label, *row[1:]]) + " |\n")
    stream.write("\n" + "".join(f"- {printable(line)}\n" for line in notes(report)))


def render_csv(report: Built, stream: Any) -> None:
    """One line per input and group. Names come from the data: control characters are escaped
    and a name a spreadsheet would run as a formula is defused, as in `bv export --format csv`."""
    from bv.reporting.export import csv_cell

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["input", "level", "group", *FIGURES, *DIFFERENCE])
    comparison = comparison_of(report)
    pairs = {pair["b"]: pair for pair in comparison["pairs"]} if comparison else {}
    for summary in summaries_of(report):
        pair = pairs.get(summary["name"])
        for level, label, group, cell in _groups(summary):
            ci = cell.get("ci95")
            figures: dict[str, Any] = {
                **cell,
                "ci_low": ci[0] if ci else None,
                "ci_high": ci[1] if ci else None,
                "accuracy_over": summary.get("accuracy_over"),
                "complete": summary["complete"],
                "items_per_run": " ".join(f"{run}:{n}" for run, n in summary["items_per_run"].items()),
            }
            diff = group_difference(pair, level, group) if pair else None
            if pair and diff:
                figures |= {k: diff[k] for k in DIFFERENCE if k in diff}  # type: ignore[literal-required]
                ci_diff = diff["ci95"]
                figures |= {"vs": pair["a"], "diff_low": ci_diff[0] if ci_diff else None}
                figures["diff_high"] = ci_diff[1] if ci_diff else None
            writer.writerow(
                [
                    csv_cell(printable(summary["name"])),
                    level,
                    csv_cell(printable(label)),
                    *("" if figures.get(f) is None else figures[f] for f in FIGURES),
                    *(
                        "" if figures.get(f) is None else csv_cell(printable(str(figures[f])))
                        for f in DIFFERENCE
                    ),
                ]
            )
    stream.write(buffer.getvalue())


def report_json(report: Built) -> ReportData:
    """The one shape of `bv report --format json`, whatever the number of inputs: `inputs`, one
    summary per input (or --by group), and `comparison`, null for one input (docs/formats.md)."""
    if "inputs" in report:
        return report
    return {"inputs": [report], "comparison": None, "power": None}


def render_json(report: Built, stream: Any) -> None:
    stream.write(json.dumps(report_json(report), indent=2, ensure_ascii=False) + "\n")


# The formats of `bv report --format` and of bv.api.Report.render, one table for both faces.
RENDERERS: dict[str, Callable[[Any, Any], None]] = {
    "table": render_table,
    "markdown": render_markdown,
    "csv": render_csv,
    "json": render_json,
}


def render_as(fmt: str, report: Any, stream: Any) -> None:
    """Write the report (built, or the JSON shape bv.api.Report holds: the renderers read both)
    in format `fmt` (one of RENDERERS)."""
    RENDERERS[fmt](report, stream)
