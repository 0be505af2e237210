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
from bv.reporting.report_types import Built, Comparison, Figures, Paired, Provenance, ReportData, Summary

FIGURES = (
    "n",
    "rows",
    "finished",
    "runs",
    "correct",
    "denominator",
    "accuracy",
    "std",
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
)
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


def _groups(summary: Summary) -> list[tuple[str, str, Figures]]:
    """(level, label, cell) in display order: overall, then each type followed by its subtypes."""
    out = [("overall", "Overall", summary["overall"])]
    for type_name, cell in summary["by_type"].items():
        out.append(("type", type_name, cell))
        for subtype, sub in summary["by_subtype"].items():
            if sub.get("type") == type_name:
                out.append(("subtype", subtype, sub))
    for answer_type, cell in summary["by_ans_type"].items():
        out.append(("ans_type", f"{answer_type} items", cell))
    return out


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def accuracy_text(cell: Figures) -> str:
    if cell["accuracy"] is None:
        return "–"
    if cell["std"] is not None:
        return f"{pct(cell['accuracy'])} ± {pct(cell['std'])}"
    return pct(cell["accuracy"])


def finished_only(summaries: list[Summary]) -> bool:
    """Whether the accuracies are over finished rows only (--exclude-failed), which every format says."""
    return any(str(s.get("accuracy_over", "")).startswith("finished") for s in summaries)


def failures_text(cell: Figures) -> str:
    return f"{cell['errors']}/{cell['judge_errors']}/{cell['undecided']}"


def grid(summaries: list[Summary]) -> tuple[list[str], list[list[str]], list[str]]:
    """Headers, rows and each row's level, for the table and Markdown formats."""
    accuracy_label = "accuracy % (finished rows)" if finished_only(summaries) else "accuracy %"
    if len(summaries) == 1:
        s = summaries[0]
        spread = "± std" if s["overall"]["runs"] > 1 else "95% CI"
        headers = [
            "group",
            "n",
            "correct",
            accuracy_label,
            spread,
            "chance %",
            "errors",
            "judge err",
            "undecided",
        ]
        shown = [(key, head) for key, head, _, _ in REPLY_COLUMNS if reply_count(s["overall"], key)]
        headers += [head for _, head in shown]
        rows, levels = [], []
        for level, label, cell in _groups(s):
            ci = cell.get("ci95")
            spread_text = (
                pct(cell["std"]) if cell["std"] is not None else (f"{pct(ci[0])}–{pct(ci[1])}" if ci else "–")
            )
            rows.append(
                [
                    label,
                    str(cell["n"]),
                    f"{cell['correct']}/{cell.get('denominator', cell['rows'])}",
                    pct(cell["accuracy"]),
                    spread_text,
                    pct(cell["chance"]),
                    str(cell["errors"]),
                    str(cell["judge_errors"]),
                    str(cell["undecided"]),
                    *(str(reply_count(cell, key)) for key, _ in shown),
                ]
            )
            levels.append(level)
        return headers, rows, levels
    suffix = " % (finished)" if finished_only(summaries) else " %"
    headers = ["group", "n"] + [f"{s['name']}{suffix}" for s in summaries]
    if len(summaries) == 2:
        headers.append("Δ")
    # Failed rows side by side too (rollout errors/judge errors/undecided), when there are any.
    show_failed = any(
        s["overall"]["errors"] + s["overall"]["judge_errors"] + s["overall"]["undecided"] for s in summaries
    )
    if show_failed:
        headers += [f"{s['name']} err/judge/und" for s in summaries]
    rows, levels = [], []
    for level, label, _ in _groups(summaries[0]):
        cells = [_find(s, level, label) for s in summaries]
        row = [label, "/".join(str(c["n"]) if c else "–" for c in cells)]
        row += [accuracy_text(c) if c else "–" for c in cells]
        if len(summaries) == 2:
            a, b = cells
            delta = (
                (b["accuracy"] - a["accuracy"])
                if a and b and a["accuracy"] is not None and b["accuracy"] is not None
                else None
            )
            row.append("–" if delta is None else f"{100 * delta:+.1f}")
        if show_failed:
            row += [failures_text(c) if c else "–" for c in cells]
        rows.append(row)
        levels.append(level)
    return headers, rows, levels


def _find(summary: Summary, level: str, label: str) -> Figures | None:
    for lvl, lab, cell in _groups(summary):
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
    """The lines under the table: what each input cost, and how inputs compare."""
    lines = []
    for summary in summaries_of(report):
        usage, parts = summary["usage"], []
        if summary.get("models"):
            parts.append("model " + ", ".join(summary["models"]))
        parts += provenance_parts(summary.get("provenance") or {})
        if usage["prompt_tokens"] or usage["completion_tokens"]:
            parts.append(
                f"{human_count(usage['prompt_tokens'])} prompt + {human_count(usage['completion_tokens'])}"
                " completion tokens"
            )
        if usage["latency_s_mean"] is not None:
            parts.append(f"mean latency {usage['latency_s_mean']:.2f} s per row")
        parts.append(f"{counted(usage['unboxed'], 'reply')} without \\boxed{{}}")
        for key, _, noun, rest in REPLY_COLUMNS:
            if reply_count(summary["overall"], key):
                parts.append(counted(reply_count(summary["overall"], key), noun) + rest)
        lines.append(f"{summary['name']}: " + "; ".join(parts))
    if finished_only(summaries_of(report)):
        lines.append(
            "Accuracy over finished rows only (--exclude-failed): rollout errors, judge errors and"
            " undecided rows are left out of it, and counted in their own columns."
        )
    comparison = comparison_of(report)
    if comparison:
        if any(comparison["left_out"].values()):
            left = ", ".join(f"{name} {n}" for name, n in comparison["left_out"].items())
            lines.append(
                f"Compared on the {comparison['common_items']} items ({comparison['common_rows']} rows)"
                f" every input has; rows left out: {left}."
            )
        pair = comparison.get("paired")
        if pair:
            lines.append(paired_sentence(pair))
    return lines


def provenance_parts(provenance: Provenance) -> list[str]:
    """Where and when an input's rows were made, as far as its rows say (older rows do not)."""
    parts = []
    if provenance.get("endpoints"):
        parts.append("endpoint " + ", ".join(provenance["endpoints"]))
    if provenance.get("bv_versions"):
        parts.append("bv " + ", ".join(provenance["bv_versions"]))
    started = provenance.get("started_at")
    if started:
        first, last = started["first"], started["last"]
        parts.append(f"rows made {first}" + ("" if first == last else f" to {last}"))
    return parts


def paired_sentence(pair: Paired) -> str:
    """The paired comparison in one sentence, the same in the terminal and the HTML viewer."""
    return (
        f"{pair['b']} vs {pair['a']}, paired by (id, run) over {counted(pair['pairs'], 'row')}:"
        f" {pair['improved']} improved, {pair['regressed']} regressed,"
        f" {pair['both_right']} right in both, {pair['both_wrong']} wrong in both;"
        f" exact McNemar p = {pair['p_value']:.3g}."
    )


def render_table(report: Built, stream: Any) -> None:
    from rich.console import Console

    from bv.reporting.table_fit import fitted_table

    class QuietConsole(Console):
        def on_broken_pipe(self) -> None:  # rich would exit 1; a closed stdout ends bv quietly
            raise StdoutClosed()

    # On a terminal the table fits the window (bv.reporting.table_fit); in a pipe or file nothing
    # needs wrapping.
    console = QuietConsole(file=stream) if stream.isatty() else QuietConsole(file=stream, width=240)
    summaries = summaries_of(report)
    headers, rows, levels = grid(summaries)
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
    for line in notes(report):
        console.print(printable(line), markup=False, highlight=False)


def render_markdown(report: Built, stream: Any) -> None:
    headers, rows, levels = grid(summaries_of(report))
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
    writer.writerow(["input", "level", "group", *FIGURES])
    for summary in summaries_of(report):
        for level, label, cell in _groups(summary):
            ci = cell.get("ci95")
            figures = {
                **cell,
                "ci_low": ci[0] if ci else None,
                "ci_high": ci[1] if ci else None,
                "accuracy_over": summary.get("accuracy_over"),
            }
            writer.writerow(
                [
                    csv_cell(printable(summary["name"])),
                    level,
                    csv_cell(printable(label)),
                    *("" if figures.get(f) is None else figures[f] for f in FIGURES),
                ]
            )
    stream.write(buffer.getvalue())


def report_json(report: Built) -> ReportData:
    """The one shape of `bv report --format json`, whatever the number of inputs: `inputs`, one
    summary per input (or --by group), and `comparison`, null for one input (docs/formats.md)."""
    return {"inputs": summaries_of(report), "comparison": comparison_of(report)}


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
