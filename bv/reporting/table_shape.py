"""Which table a report is shown as in a given width, so that it reads at 80 columns: the group
names whole, the figures whole, less detail before anything is cut.

Steps, the first that fits is taken: every input side by side with its accuracy's interval
and spread; without the interval; with three or more inputs, one table per comparison
(baseline and one other input, stacked), with then without the interval; then bare accuracies
(no run-to-run spread either). One input drops its failure columns when they are all zero.
What was left out is said under the table; the Markdown and JSON formats keep all of it. The
width and what fits it are the renderer's (rich on a terminal, plain text in a pipe).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bv.reporting.grid import BARE, BRIEF, FULL, comparison_of, grid, summaries_of
from bv.reporting.report_types import Built

_FAILURES = ("errors", "judge err", "undecided")
_LEFT_OUT = {
    BRIEF: "Each input's own interval is left out to fit the width (the Markdown format shows it).",
    BARE: "Each input's own interval and run-to-run spread are left out to fit the width"
    " (the Markdown format shows them).",
}


@dataclass(frozen=True)
class Block:
    title: str | None  # "b vs a" when the comparisons are stacked
    headers: list[str]
    rows: list[list[str]]
    levels: list[str]


Fits = Callable[[list[str], list[list[str]], list[str]], bool]


def labels(rows: list[list[str]], levels: list[str]) -> list[str]:
    """The group names as the table shows them: subtypes indented under their type."""
    return [("  " if level == "subtype" else "") + row[0] for row, level in zip(rows, levels, strict=True)]


def _without_empty_failures(headers: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    keep = [i for i, h in enumerate(headers) if h not in _FAILURES or any(row[i] != "0" for row in rows)]
    return [headers[i] for i in keep], [[row[i] for i in keep] for row in rows]


def shape(report: Built, fits: Fits) -> tuple[list[Block], str | None]:
    """The blocks to show and the note that says what was left out (None: nothing)."""
    if len(summaries_of(report)) == 1:
        headers, rows, levels = grid(report)
        if not fits(headers, rows, levels):
            headers, rows = _without_empty_failures(headers, rows)
        return [Block(None, headers, rows, levels)], None
    comparison = comparison_of(report)
    pairs = comparison["pairs"] if comparison else []
    tries = [(False, FULL), (False, BRIEF)]
    tries += [(True, FULL), (True, BRIEF), (True, BARE)] if len(pairs) > 1 else [(False, BARE)]
    blocks: list[Block] = []
    for stacked, detail in tries:
        if stacked:
            blocks = [
                Block(f"{pair['b']} vs {pair['a']}", *grid(report, detail, only=i))
                for i, pair in enumerate(pairs)
            ]
        else:
            blocks = [Block(None, *grid(report, detail))]
        if all(fits(b.headers, b.rows, b.levels) for b in blocks):
            break
    return blocks, _LEFT_OUT.get(detail)
