"""The report table on a terminal, by rich, fitted to the window: figures are never cut, group
names give way (a pipe or a file gets bv.reporting.text_table, the same table uncut).

rich shrinks every column alike when a table is too wide, so at 80 columns it cut `100.0` to
`10…`. Here each figure column gets the width of its widest cell (its header may wrap
between words), the group column gets what is left, the box is dropped for a compact
one-space layout when the names would not be whole in it, and bv.reporting.table_shape takes
detail out (or stacks the comparisons) before a name is cut; only then does it end with `…`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bv.core.errors import StdoutClosed
from bv.core.terminal import printable
from bv.reporting.grid import grid, summaries_of
from bv.reporting.report_types import Built
from bv.reporting.table_shape import Fits, labels, shape
from bv.reporting.text_table import cell_len, fold_widths, header_width, name_lines


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


def fit_columns(headers: list[str], rows: list[list[str]], width: int) -> Fit | None:
    """Column widths for a table of these cells in `width` terminal cells (the first column holds
    the group names, the others figures); None when the table fits as it is."""
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in headers]
    natural = _natural(headers, rows)
    if sum(natural) + _overhead(len(headers), compact=False) <= width:
        return None
    heads = [printable(h) for h in headers[1:]]
    cells = [[_cells(cell) for cell in col] for col in columns[1:]]
    names = [printable(cell) for cell in columns[0]]
    for compact in (False, True):
        room = width - _overhead(len(headers), compact)
        figures = (
            fold_widths(heads, cells, names, room)
            if compact
            else [header_width(h, c) for h, c in zip(heads, cells, strict=True)]
        )
        label = room - sum(figures)
        if label >= natural[0] or compact:  # the box only while the names stay whole
            return Fit([min(max(label, 4), natural[0]), *figures], compact)
    raise AssertionError("unreachable")


def fits(headers: list[str], rows: list[list[str]], width: int) -> bool:
    """Whether the table fits `width` with every figure and every group name whole (at worst in
    the compact layout); `rows` carry the names as shown (subtypes indented)."""
    fit = fit_columns(headers, rows, width)
    return fit is None or fit.widths[0] >= _natural(headers, rows)[0]


def fits_in(width: int) -> Fits:
    """`fits` at `width`, over a block's headers, rows and levels (what table_shape asks)."""
    return lambda headers, rows, levels: fits(
        headers, [[label, *row[1:]] for label, row in zip(labels(rows, levels), rows, strict=True)], width
    )


def natural_width(headers: list[str], rows: list[list[str]], levels: list[str]) -> int:
    """The cells the table takes uncut, its texts escaped: what a pipe or a file is given, however wide."""
    cells = [[label, *row[1:]] for label, row in zip(labels(rows, levels), rows, strict=True)]
    return sum(_natural(headers, cells)) + _overhead(len(headers), compact=False)


def fitted_table(title: Any, headers: list[str], rows: list[list[str]], levels: list[str], width: int) -> Any:
    """An empty rich Table with the report's columns laid out for `width` characters."""
    from rich.box import SIMPLE_HEAD
    from rich.table import Table
    from rich.text import Text

    shown = labels(rows, levels)
    fit = fit_columns(headers, [[label, *row[1:]] for label, row in zip(shown, rows, strict=True)], width)
    if fit is not None and fit.compact:
        table = Table(title=title, title_justify="left", box=SIMPLE_HEAD, show_edge=False, padding=0)
    else:
        table = Table(title=title, title_justify="left")
    for i, header in enumerate(headers):
        table.add_column(
            Text(printable(header), overflow="fold"),  # input names are data: never markup
            justify="left" if i == 0 else "right",
            no_wrap=i == 0,
            width=None if fit is None else fit.widths[i],
            overflow="ellipsis",
        )
    return table


def print_table(report: Built, notes: list[str], stream: Any, verdicts: list[str]) -> None:
    """The verdicts, the report table and the notes under it, by rich: fitted to a terminal's
    window (bv.reporting.table_shape: less detail, or the comparisons stacked, before a group
    name is cut), or (a stream rich is told to colour though it is no terminal) as wide as it
    needs, never cut. No emoji codes: a `:name:` in a file or group name is data, shown as written."""
    from rich.console import Console
    from rich.text import Text

    class QuietConsole(Console):
        def on_broken_pipe(self) -> None:  # rich would exit 1; a closed stdout ends bv quietly
            raise StdoutClosed()

    summaries = summaries_of(report)
    terminal = stream.isatty()
    if terminal:
        console = QuietConsole(file=stream, emoji=False, force_jupyter=False)
        blocks, left_out = shape(report, fits_in(console.width))
    else:
        headers, rows, levels = grid(report)
        width = max(240, natural_width(headers, rows, levels))
        # force_jupyter=False: in a notebook's kernel rich would display the table itself and
        # write nothing to `stream` (bv.api.Report.render returned no table there)
        console = QuietConsole(file=stream, emoji=False, width=width, force_jupyter=False)
        blocks, left_out = shape(report, lambda *_: True)
    for line in verdicts:  # the answer first
        console.print(Text(printable(line), style="bold"), soft_wrap=not terminal)
    names = "bv report: " + ", ".join(printable(s["name"]) for s in summaries)
    for block in blocks:
        # Every text is a rich Text, never markup: names from the data are shown as written.
        heading = names if block.title is None else f"{names}: {printable(block.title)}"
        table = fitted_table(
            Text(heading, style="table.title"), block.headers, block.rows, block.levels, console.width
        )
        room = table.columns[0].width  # None: the names fit as they are
        for row, level in zip(block.rows, block.levels, strict=True):
            name = ("  " if level == "subtype" else "") + printable(row[0])
            if room is not None:  # too long even with less detail: over more lines, never cut
                name = "\n".join(name_lines(name, room))
            style = {"overall": "bold", "type": "bold", "ans_type": "dim"}.get(level, "")
            label = Text.assemble((name, style)) if style else Text(name)  # the style on the name alone
            table.add_row(label, *(Text(printable(cell)) for cell in row[1:]), end_section=level == "overall")
        console.print(table)
    if left_out:
        console.print(left_out, markup=False, highlight=False)
    for line in notes:  # whole lines in a pipe or file, as the table is
        console.print(printable(line), markup=False, highlight=False, soft_wrap=not terminal)
