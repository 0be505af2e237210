"""The report table on a terminal, by rich, fitted to the window: figures are never cut, group
names give way (a pipe or a file gets bv.reporting.text_table, the same table uncut).

rich shrinks every column alike when a table is too wide, so at 80 columns it cut `100.0` to
`10…`. Here each figure column gets the width of its widest cell (its header may wrap
between words), the group column gets what is left and ends with `…`, and when even that
leaves too little, the box is dropped for a compact one-space layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bv.core.errors import StdoutClosed
from bv.core.terminal import printable
from bv.reporting.grid import grid, summaries_of
from bv.reporting.report_types import Built
from bv.reporting.text_table import cell_len

MIN_LABEL = 16  # below this, the compact layout buys room for the group names


@dataclass(frozen=True)
class Fit:
    widths: list[int]  # per column, without padding
    compact: bool  # no box and no padding: one space between columns


def _cells(text: str) -> int:
    """The cells `text` takes as the table shows it: escaped, a wide character two cells."""
    return cell_len(printable(text))


def _overhead(columns: int, compact: bool) -> int:
    """Characters a table of `columns` spends on borders and padding."""
    return columns - 1 if compact else 3 * columns + 1


def _natural(headers: list[str], rows: list[list[str]]) -> list[int]:
    """Each column's width uncut: its widest cell or header."""
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in headers]
    return [max([_cells(h), *(_cells(c) for c in col)]) for h, col in zip(headers, columns, strict=True)]


def _figure_width(header: str, cells: list[str]) -> int:
    words = max((cell_len(word) for word in printable(header).split()), default=1)
    return max([words, *(_cells(cell) for cell in cells)])


def fit_columns(headers: list[str], rows: list[list[str]], width: int) -> Fit | None:
    """Column widths for a table of these cells in `width` terminal cells (the first column holds
    the group names, the others figures); None when the table fits as it is."""
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in headers]
    natural = _natural(headers, rows)
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
    """The cells the table takes uncut, its texts escaped: what a pipe or a file is given, however wide."""
    labels = [("  " if level == "subtype" else "") + row[0] for row, level in zip(rows, levels, strict=True)]
    cells = [[label, *row[1:]] for label, row in zip(labels, rows, strict=True)]
    return sum(_natural(headers, cells)) + _overhead(len(headers), compact=False)


def fitted_table(title: Any, headers: list[str], rows: list[list[str]], levels: list[str], width: int) -> Any:
    """An empty rich Table with the report's columns laid out for `width` characters."""
    from rich.box import SIMPLE_HEAD
    from rich.table import Table
    from rich.text import Text

    labels = [("  " if level == "subtype" else "") + row[0] for row, level in zip(rows, levels, strict=True)]
    fit = fit_columns(headers, [[label, *row[1:]] for label, row in zip(labels, rows, strict=True)], width)
    if fit is not None and fit.compact:
        table = Table(title=title, title_justify="left", box=SIMPLE_HEAD, show_edge=False, padding=0)
    else:
        table = Table(title=title, title_justify="left")
    for i, header in enumerate(headers):
        table.add_column(
            Text(printable(header)),  # input names are data: never markup, never escapes
            justify="left" if i == 0 else "right",
            no_wrap=i == 0,
            width=None if fit is None else fit.widths[i],
            overflow="ellipsis",
        )
    return table


def print_table(report: Built, notes: list[str], stream: Any) -> None:
    """The report table and the notes under it, by rich: fitted to a terminal's window, or (a
    stream rich is told to colour though it is no terminal) as wide as it needs, never cut.
    No emoji codes: a `:name:` in a file or group name is data, shown as written."""
    from rich.console import Console
    from rich.text import Text

    class QuietConsole(Console):
        def on_broken_pipe(self) -> None:  # rich would exit 1; a closed stdout ends bv quietly
            raise StdoutClosed()

    summaries = summaries_of(report)
    headers, rows, levels = grid(report)
    terminal = stream.isatty()
    brief = False
    if terminal:
        console = QuietConsole(file=stream, emoji=False)
        brief = len(summaries) > 1 and not fits(headers, rows, console.width)
        if brief:
            headers, rows, levels = grid(report, brief=True)
    else:
        console = QuietConsole(file=stream, emoji=False, width=max(240, natural_width(headers, rows, levels)))
    # Every text is a rich Text, never markup: names from the data are shown as written.
    title = Text("bv report: " + ", ".join(printable(s["name"]) for s in summaries), style="table.title")
    table = fitted_table(title, headers, rows, levels, console.width)
    for row, level in zip(rows, levels, strict=True):
        name = printable(row[0])
        label = {
            "overall": Text.assemble((name, "bold")),
            "type": Text.assemble((name, "bold")),
            "subtype": Text(f"  {name}"),
            "ans_type": Text.assemble((name, "dim")),
        }[level]
        table.add_row(label, *(Text(printable(cell)) for cell in row[1:]), end_section=level == "overall")

    console.print(table)
    if brief:
        console.print(
            "Each input's own interval is left out to fit the terminal (the Markdown format shows it)."
        )
    for line in notes:  # whole lines in a pipe or file, as the table is
        console.print(printable(line), markup=False, highlight=False, soft_wrap=not terminal)
