"""Rendering report summaries as a table, Markdown, CSV or JSON.

Table and Markdown share one layout (bv.reporting.grid), for people; CSV is long and numeric,
one line per input and group, for spreadsheets and pandas; JSON holds every figure.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

from bv.core.environment import colour_forced
from bv.core.stats import counted, human_count
from bv.core.terminal import printable
from bv.reporting.costs import cost_text, total_cost_text
from bv.reporting.grid import (
    REPLY_COLUMNS,
    comparison_of,
    finished_only,
    grid,
    group_difference,
    ordered_groups,
    reply_count,
    summaries_of,
)
from bv.reporting.report_types import Built, Provenance, ReportData

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


def verdicts(report: Built) -> list[str]:
    """Each comparison's answer in one line (the table says it first, Markdown last)."""
    comparison = comparison_of(report)
    return [pair["verdict"] + "." for pair in comparison["pairs"]] if comparison else []


def notes(report: Built, with_verdicts: bool = True) -> list[str]:
    """The lines under the table: how each figure is computed, each input's provenance and cost,
    what a reader must know (incomplete runs, different items, other differences), and (unless
    said first) the answer of each comparison in one line."""
    from bv.reporting.compare import notices, power_lines, provenance_of
    from bv.reporting.judges import calibration_lines, panel_lines

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
        lines += panel_lines(summary) + calibration_lines(summary)
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
            lines.append(f"Two-sided p-values adjusted by {comparison['adjustment']}.")
        lines += verdicts(report) if with_verdicts else []
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
    shards = provenance.get("shards")
    if shards:
        from bv.core.shards import described

        parts.append(described(dict(shards)))
    return parts


def render_table(report: Built, stream: Any) -> None:
    """The verdicts first, then the table and its notes. On a terminal, rich fits the table to
    the window (bv.reporting.table_fit); in a pipe or a file, bv writes the same table as plain
    text (bv.reporting.text_table) without rich's start-up: as wide as it needs, or, with
    $COLUMNS set, shaped to fit it as a terminal's is (bv.reporting.table_shape). A pipe that
    rich is told to treat as a terminal (FORCE_COLOR, TTY_COMPATIBLE=1) keeps rich's colours."""
    if stream.isatty() or colour_forced():
        from bv.reporting.table_fit import print_table

        print_table(report, notes(report, with_verdicts=False), stream, verdicts(report))
        return
    from bv.core.environment import columns
    from bv.reporting.table_shape import shape
    from bv.reporting.text_table import fits_in, write_table

    width = columns()
    blocks, left_out = shape(report, (lambda *_: True) if width is None else fits_in(width))
    title = "bv report: " + ", ".join(s["name"] for s in summaries_of(report))
    stream.write("".join(printable(line) + "\n" for line in verdicts(report)))
    for i, block in enumerate(blocks):
        heading = title if block.title is None else f"{title}: {block.title}"
        last = i == len(blocks) - 1
        below = ([left_out] if left_out else []) + notes(report, with_verdicts=False) if last else []
        write_table(stream, heading, block.headers, block.rows, block.levels, below, width)


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
        for level, label, group, cell in ordered_groups(summary):
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
