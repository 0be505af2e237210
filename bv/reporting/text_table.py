"""The report table as plain text, for a pipe or a file: the layout rich gives it on a terminal
(the same box, padding, alignment and title, byte for byte: tests/test_text_table.py holds it to
rich's own rendering), without importing rich, whose import and rendering were most of
`bv report`'s start-up (docs/performance.md). The table is as wide as its cells and never cut.

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
# Characters one cell wide that a report is made of (tests/test_text_table.py checks each with rich).
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


def write_table(
    stream: Any, title: str, headers: list[str], rows: list[list[str]], levels: list[str], notes: list[str]
) -> None:
    """The title, the table (groups left, figures right, a rule under the overall row) and the
    notes under it, every text from data escaped (`printable`), never read as markup."""
    encoding = (getattr(stream, "encoding", None) or "utf-8").lower()
    top, head, head_rule, body, section, bottom = _BOX if encoding.startswith("utf") else _ASCII_BOX
    labels = [
        ("  " if level == "subtype" else "") + printable(row[0])
        for row, level in zip(rows, levels, strict=True)
    ]
    table = [[printable(h) for h in headers]]
    table += [
        [label, *(printable(cell) for cell in row[1:])] for label, row in zip(labels, rows, strict=True)
    ]
    widths = [max(cell_len(cell) for cell in column) for column in zip(*table, strict=True)]

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
