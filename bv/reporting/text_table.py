"""The report table as plain text, for a pipe or a file: the layout rich gives it on a terminal
(the same box, padding, alignment and title, byte for byte: tests/reporting/test_text_table.py holds it to
rich's own rendering), without importing rich, whose import and rendering were most of
`bv report`'s start-up (docs/performance.md). The table is as wide as its cells and never cut,
unless told a width ($COLUMNS): then, wider than it, it takes rich's compact layout.

Widths are terminal cells, as rich counts them: a CJK character takes two, a combining accent
none. Text of one-cell characters only (nearly all of a report) is measured by its length;
anything else by rich's own cell table (`rich.cells`, a small import), so the two never disagree.
"""

from __future__ import annotations

import re
from typing import Any

from bv.core.terminal import printable

# rich's HEAVY_HEAD box, and the ASCII box rich puts in its place on a stream that cannot encode
# it; each line is (left, horizontal, divider, right) for: top, header row, rule under the header,
# body row, rule between sections, bottom.
_BOX = (tuple("┏━┳┓"), tuple("┃ ┃┃"), tuple("┡━╇┩"), tuple("│ ││"), tuple("├─┼┤"), tuple("└─┴┘"))
_ASCII_BOX = (tuple("+--+"), tuple("| ||"), tuple("|-+|"), tuple("| ||"), tuple("|-+|"), tuple("+--+"))
# Characters one cell wide that a report is made of (tests/reporting/test_text_table.py checks each
# with rich).
_NARROW = frozenset(map(chr, range(0x20, 0x7F))) | frozenset("–±Δ…")
_WORD = re.compile(r"\s*\S+\s*")  # a word and the spaces around it, as rich wraps text
_TRAILING_SPACE = re.compile(r"\s+$")


def cell_len(text: str) -> int:
    """The cells `text` takes on a terminal."""
    if _NARROW.issuperset(text):
        return len(text)
    from rich.cells import cell_len as rich_cell_len

    return rich_cell_len(text)


def _chop(text: str, width: int) -> list[str]:
    """`text` cut into pieces of at most `width` cells."""
    if _NARROW.issuperset(text):
        return [text[i : i + width] for i in range(0, len(text), width)]
    from rich.cells import chop_cells

    return chop_cells(text, width)


def _crop(text: str, width: int) -> str:
    """`text` cut to `width` cells."""
    if _NARROW.issuperset(text):
        return text[:width]
    from rich.cells import set_cell_size

    return set_cell_size(text, width)


def _breaks(text: str, width: int) -> list[int]:
    """Where rich breaks `text` into lines of `width` cells: between words, a word longer than a
    line folded across lines (rich's `divide_line`, step for step)."""
    breaks: list[int] = []
    offset = 0
    for match in _WORD.finditer(text):
        start, word = match.start(), match.group()
        length = cell_len(word.rstrip())
        if width - offset >= length:
            offset += cell_len(word)
        elif length > width:
            pieces = _chop(word, width)
            for i, piece in enumerate(pieces):
                if start:
                    breaks.append(start)
                if i == len(pieces) - 1:
                    offset = cell_len(piece)
                else:
                    start += len(piece)
        elif offset and start:
            breaks.append(start)
            offset = cell_len(word)
    return breaks


def title_lines(title: str, width: int) -> list[str]:
    """The title wrapped to the table's width, each line padded to it, as rich shows a title."""
    ends = [*_breaks(title, width), len(title)]
    lines = []
    for begin, end in zip([0, *ends[:-1]], ends, strict=True):
        line = title[begin:end]
        if len(line) > width:  # rich drops the spaces that end a line beyond the width
            spaces = _TRAILING_SPACE.search(line)
            if spaces:
                line = line[: len(line) - min(len(spaces.group()), len(line) - width)]
        cells = cell_len(line)
        lines.append(_crop(line, width) if cells > width else line + " " * (width - cells))
    return lines


def _table(headers: list[str], rows: list[list[str]], levels: list[str]) -> list[list[str]]:
    """The header row and the body, every text escaped, subtypes indented under their type."""
    labels = [
        ("  " if level == "subtype" else "") + printable(row[0])
        for row, level in zip(rows, levels, strict=True)
    ]
    table = [[printable(h) for h in headers]]
    return table + [
        [label, *(printable(cell) for cell in row[1:])] for label, row in zip(labels, rows, strict=True)
    ]


# A header word longer than this and than its cells (a long input name) is folded; narrower
# still (down to its figures) when the group names' words would not fit their column otherwise.
FOLDS = (8, 6, 4)


def header_width(header: str, cells: list[int], fold: int = FOLDS[0]) -> int:
    """A figure column's width in a fitted table: its widest cell, or its header's longest word,
    folded past `fold` cells so that a long input name does not take the group names' room."""
    widest = max(cells, default=1)
    word = max((cell_len(word) for word in header.split()), default=1)
    return max(widest, min(word, max(widest, fold)))


def word_room(labels: list[str]) -> int:
    """The cells a group name needs to be wrapped between its words, none folded: its indent and
    its longest word."""
    return max(
        (
            len(label) - len(label.lstrip(" ")) + max(map(cell_len, label.split()), default=0)
            for label in labels
        ),
        default=0,
    )


def fold_widths(headers: list[str], cells: list[list[int]], labels: list[str], room: int) -> list[int]:
    """The figure columns' widths, their headers folded as little as lets the group column (what
    `room` leaves beside them) hold the names' words whole."""
    need = word_room(labels)
    for fold in FOLDS:
        figures = [header_width(h, c, fold) for h, c in zip(headers, cells, strict=True)]
        if room - sum(figures) >= need:
            break
    return figures


def _compact_widths(table: list[list[str]], width: int) -> list[int]:
    """The compact layout's columns in `width`: each figure as wide as its widest cell or header
    word (headers wrap between words), the group names what is left (whole when it is enough)."""
    columns = list(zip(*table, strict=True))
    room = width - (len(columns) - 1)
    cells = [[cell_len(c) for c in column[1:]] for column in columns[1:]]
    figures = fold_widths([column[0] for column in columns[1:]], cells, list(columns[0][1:]), room)
    label = room - sum(figures)
    return [min(max(label, 4), max(cell_len(c) for c in columns[0])), *figures]


def fits_in(width: int) -> Any:
    """Whether a block fits `width` with its figures and group names whole (boxed, or compact)."""

    def fits(headers: list[str], rows: list[list[str]], levels: list[str]) -> bool:
        table = _table(headers, rows, levels)
        natural = [max(cell_len(cell) for cell in column) for column in zip(*table, strict=True)]
        if sum(natural) + 3 * len(natural) + 1 <= width:
            return True
        return _compact_widths(table, width)[0] >= natural[0]

    return fits


def _wrapped(text: str, width: int) -> list[str]:
    """A header's words in lines of `width` cells (a longer word folded across lines)."""
    lines: list[str] = []
    for word in text.split():
        if lines and cell_len(lines[-1]) + 1 + cell_len(word) <= width:
            lines[-1] += " " + word
        else:
            lines += _chop(word, width)
    return lines or [""]


def name_lines(label: str, width: int) -> list[str]:
    """A group name too long for its column, in lines of `width` cells between its words (a
    longer word folded), a subtype's indent kept on every line: the name whole, never cut to
    `Find the s…` (the last resort of bv.reporting.table_shape, at 60 columns)."""
    if cell_len(label) <= width:
        return [label]
    indent = label[: len(label) - len(label.lstrip(" "))]
    room = max(width - len(indent), 1)
    return [indent + line for line in _wrapped(label.strip(), room)]


def _write_compact(stream: Any, title: str, table: list[list[str]], levels: list[str], width: int) -> None:
    """The table without a box, one space between columns, in `width`: what a pipe gets when the
    boxed table is wider than $COLUMNS. A group name is cut (ending in `…`) only when even this
    leaves it too little room, which bv.reporting.table_shape avoids where it can: a group name
    then takes more lines (`name_lines`), its figures on its first."""
    utf = (getattr(stream, "encoding", None) or "utf-8").lower().startswith("utf")
    widths = _compact_widths(table, width)
    total = sum(widths) + len(widths) - 1

    def cut(text: str, room: int) -> str:
        if cell_len(text) <= room:
            return text
        return _crop(text, room - 1) + ("…" if utf else "~")

    out = [line.rstrip() + "\n" for line in title_lines(printable(title), total)]
    heads = [_wrapped(h, w) for h, w in zip(table[0], widths, strict=True)]
    for k in range(max(len(h) for h in heads)):
        cells = [h[k] if k < len(h) else "" for h in heads]
        line = [cut(cells[0], widths[0]).ljust(widths[0])]
        line += [" " * (w - cell_len(c)) + c for c, w in zip(cells[1:], widths[1:], strict=True)]
        out.append(" ".join(line).rstrip() + "\n")
    out.append(("─" if utf else "-") * total + "\n")
    for i, (cells, level) in enumerate(zip(table[1:], levels, strict=True)):
        label, *more = name_lines(cells[0], widths[0])
        line = [label + " " * (widths[0] - cell_len(label))]
        line += [" " * max(0, w - cell_len(c)) + c for c, w in zip(cells[1:], widths[1:], strict=True)]
        out.append(" ".join(line).rstrip() + "\n")
        out += [name.rstrip() + "\n" for name in more]
        if level == "overall" and i < len(levels) - 1:
            out.append("\n")
    stream.write("".join(out))


def write_table(
    stream: Any,
    title: str,
    headers: list[str],
    rows: list[list[str]],
    levels: list[str],
    notes: list[str],
    width: int | None = None,
) -> None:
    """The title, the table (groups left, figures right, a rule under the overall row) and the
    notes under it, every text from data escaped (`printable`), never read as markup; boxed,
    or in `width` the compact layout when the box would not fit."""
    encoding = (getattr(stream, "encoding", None) or "utf-8").lower()
    top, head, head_rule, body, section, bottom = _BOX if encoding.startswith("utf") else _ASCII_BOX
    table = _table(headers, rows, levels)
    widths = [max(cell_len(cell) for cell in column) for column in zip(*table, strict=True)]
    if width is not None and sum(widths) + 3 * len(widths) + 1 > width:
        _write_compact(stream, title, table, levels, width)
        stream.write("".join(printable(note) + "\n" for note in notes))
        return

    def rule(chars: tuple[str, ...]) -> str:
        left, horizontal, divider, right = chars
        return left + divider.join(horizontal * (width + 2) for width in widths) + right + "\n"

    def line(chars: tuple[str, ...], cells: list[str]) -> str:
        left, _, divider, right = chars
        label, *figures = cells
        shown = [label + " " * (widths[0] - cell_len(label))]  # left, padded (never cut: it fits)
        for width, cell in zip(widths[1:], figures, strict=True):
            cell = cell.rstrip()  # right-justified, as rich does: trailing spaces dropped
            shown.append(" " * (width - cell_len(cell)) + cell)
        return left + divider.join(f" {cell} " for cell in shown) + right + "\n"

    out = [line + "\n" for line in title_lines(printable(title), sum(widths) + 3 * len(widths) + 1)]
    out += [rule(top), line(head, table[0]), rule(head_rule)]
    for i, (cells, level) in enumerate(zip(table[1:], levels, strict=True)):
        out.append(line(body, cells))
        if level == "overall" and i < len(levels) - 1:
            out.append(rule(section))
    out.append(rule(bottom))
    out += [printable(note) + "\n" for note in notes]
    stream.write("".join(out))
