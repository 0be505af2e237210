"""How the report table fits a terminal: figures are never cut, group names give way.

rich shrinks every column alike when a table is too wide, so at 80 columns it cut `100.0` to
`10…`. Here each figure column gets the width of its widest cell (its header may wrap
between words), the group column gets what is left and ends with `…`, and when even that
leaves too little, the box is dropped for a compact one-space layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MIN_LABEL = 16  # below this, the compact layout buys room for the group names


@dataclass(frozen=True)
class Fit:
    widths: list[int]  # per column, without padding
    compact: bool  # no box and no padding: one space between columns


def _overhead(columns: int, compact: bool) -> int:
    """Characters a table of `columns` spends on borders and padding."""
    return columns - 1 if compact else 3 * columns + 1


def _figure_width(header: str, cells: list[str]) -> int:
    words = max((len(word) for word in header.split()), default=1)
    return max([words, *(len(cell) for cell in cells)])


def fit_columns(headers: list[str], rows: list[list[str]], width: int) -> Fit | None:
    """Column widths for a table of these cells in `width` characters (the first column holds the
    group names, the others figures); None when the table fits as it is."""
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in headers]
    natural = [max([len(h), *(len(c) for c in col)]) for h, col in zip(headers, columns, strict=True)]
    if sum(natural) + _overhead(len(headers), compact=False) <= width:
        return None
    figures = [_figure_width(h, list(col)) for h, col in zip(headers[1:], columns[1:], strict=True)]
    for compact in (False, True):
        label = width - sum(figures) - _overhead(len(headers), compact)
        if label >= min(natural[0], MIN_LABEL) or compact:
            return Fit([max(label, 4), *figures], compact)
    raise AssertionError("unreachable")


def fits(headers: list[str], rows: list[list[str]], width: int) -> bool:
    """Whether the figures fit `width` with room for the group names (at worst in the compact layout)."""
    fit = fit_columns(headers, rows, width)
    return fit is None or fit.widths[0] >= MIN_LABEL


def natural_width(headers: list[str], rows: list[list[str]], levels: list[str]) -> int:
    """The characters the table takes uncut: what a pipe or a file is given, however wide."""
    labels = [("  " if level == "subtype" else "") + row[0] for row, level in zip(rows, levels, strict=True)]
    cells = [[label, *row[1:]] for label, row in zip(labels, rows, strict=True)]
    columns = list(zip(*cells, strict=True)) if cells else [() for _ in headers]
    natural = [max([len(h), *(len(c) for c in col)]) for h, col in zip(headers, columns, strict=True)]
    return sum(natural) + _overhead(len(headers), compact=False)


def fitted_table(title: str, headers: list[str], rows: list[list[str]], levels: list[str], width: int) -> Any:
    """An empty rich Table with the report's columns laid out for `width` characters."""
    from rich.box import SIMPLE_HEAD
    from rich.table import Table

    labels = [("  " if level == "subtype" else "") + row[0] for row, level in zip(rows, levels, strict=True)]
    fit = fit_columns(headers, [[label, *row[1:]] for label, row in zip(labels, rows, strict=True)], width)
    if fit is not None and fit.compact:
        table = Table(title=title, title_justify="left", box=SIMPLE_HEAD, show_edge=False, padding=0)
    else:
        table = Table(title=title, title_justify="left")
    for i, header in enumerate(headers):
        table.add_column(
            header,
            justify="left" if i == 0 else "right",
            no_wrap=i == 0,
            width=None if fit is None else fit.widths[i],
            overflow="ellipsis",
        )
    return table
