"""A table of runs (bv.reporting.runs) as text fitted to a width (80 columns in a pipe), Markdown,
CSV or JSON; each comparison's verdict under it, wrapped to the same width."""

from __future__ import annotations

import csv
import json
import textwrap
from typing import IO

from bv.core.stats import dollars
from bv.core.terminal import printable
from bv.reporting.grid import interval_text, pct
from bv.reporting.runs import RunRow, Verdict

HEADERS = ["run", "model", "skill", "items", "accuracy [95% CI]", "errors", "cost", "state"]
NAMES = 3  # the first columns hold names, which give way; the others figures, never cut
SMALLEST = (12, 6, 8)  # a skill keeps its hash (8 characters) when its name goes
COST = HEADERS.index("cost")


def _state(row: RunRow) -> str:
    return "unreadable" if row.problem else row.state


def cells(row: RunRow) -> list[str]:
    accuracy = "–" if row.accuracy is None else f"{pct(row.accuracy)} [{interval_text(row.ci95)}]"
    return [
        row.name,
        row.model or "–",
        row.skill,
        "–" if row.items is None else str(row.items),
        accuracy,
        "–" if row.errors is None else str(row.errors),
        "–" if row.cost_usd is None else dollars(row.cost_usd),
        _state(row),
    ]


def _cut(text: str, width: int, column: int) -> str:
    """A name cut to `width` in its middle (runs of one study share a beginning and differ at the
    end), with `…`; a skill loses its name before its hash."""
    if len(text) <= width:
        return text
    if column == 2 and "@" in text:
        name, _, sha = text.rpartition("@")
        room = width - len(sha) - 2
        return f"{name[:room]}…@{sha}" if room > 0 else sha[:width]
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def fitted(table: list[list[str]], width: int) -> tuple[list[list[str]], int]:
    """The header and rows with the name columns cut until the table fits `width` (the skill's
    first: its hash stays; the run's last), and the gap
    between columns (two spaces, one when two do not fit); figures are never cut."""
    natural = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    for gap in (2, 1):
        widths = list(natural)
        for i in (2, 1, 0):  # the skill's name goes first, then the model's, the run's last
            over = sum(widths) + gap * (len(widths) - 1) - width
            widths[i] -= max(0, min(over, widths[i] - SMALLEST[i]))
        if sum(widths) + gap * (len(widths) - 1) <= width:
            break
    cut = [[_cut(cell, widths[i], i) if i < NAMES else cell for i, cell in enumerate(line)] for line in table]
    return cut, gap


def _text_table(body: list[list[str]], width: int) -> list[str]:
    """Names left, figures right, the state left; a header ruled off."""
    table, gap = fitted(body, width)
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    out = []
    for n, line in enumerate(table):
        cells = [
            cell.ljust(w) if i < NAMES or i == len(line) - 1 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        ]
        out.append((" " * gap).join(cells).rstrip())
        if n == 0:
            out.append((" " * gap).join("-" * w for w in widths))
    return out


def render_runs(rows: list[RunRow], verdicts: list[Verdict], fmt: str, stream: IO[str], width: int) -> None:
    """The table in `fmt` (table, markdown, csv, json)."""
    if fmt == "json":
        data = {
            "runs": [row.as_json() for row in rows],
            "baseline": verdicts[0].baseline if verdicts else None,
            "comparisons": [{"run": v.run, "line": v.line, "paired": v.pair} for v in verdicts],
        }
        json.dump(data, stream, indent=2, ensure_ascii=False)
        stream.write("\n")
        return
    body = [[printable(cell) for cell in cells(row)] for row in rows]
    if fmt == "csv":
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(["folder", *(h.replace(" [95% CI]", "") for h in HEADERS), "ci_low", "ci_high"])
        for row in rows:
            ci: list[float | None] = list(row.ci95) if row.ci95 else [None, None]
            writer.writerow([row.folder, row.name, row.model, row.skill, row.items, row.accuracy, row.errors,
                             row.cost_usd, _state(row), ci[0], ci[1]])  # fmt: skip
        return
    if fmt == "markdown":
        stream.write("| " + " | ".join(HEADERS) + " |\n|" + "---|" * len(HEADERS) + "\n")
        for line in body:
            stream.write("| " + " | ".join(cell.replace("|", "\\|") for cell in line) + " |\n")
    else:
        costs = any(row.cost_usd is not None for row in rows)  # no prices: no cost column
        table = [[cell for i, cell in enumerate(line) if costs or i != COST] for line in [HEADERS, *body]]
        stream.write("\n".join(_text_table(table, width)) + "\n")
    methods = sorted({row.interval for row in rows if row.interval})
    notes: list[str] = [f"accuracy: Avg@k over runs; {'; '.join(methods)}."] if methods else []
    notes += [v.line for v in verdicts]
    stream.write("\n")
    for note in notes:
        text = printable(note)
        wrapped = textwrap.wrap(text, width, subsequent_indent="  ") if fmt == "table" else [f"- {text}"]
        stream.write("\n".join(wrapped) + "\n")
