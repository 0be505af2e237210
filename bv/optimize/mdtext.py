"""Hostile text (optimizer edits, replies, server errors) put into Markdown so that, rendered, it
reads as the text itself: in a table cell `&`, `<` and `>` become entities (no raw HTML: no
`<script>`, `<img onerror>`, `<svg onload>`), `[`, `]`, `|` and `\\` are backslash-escaped and
backquotes become quotes (no link, no remote image, no code span, no new cell), newlines become
spaces; a fenced block's fence is longer than any run of backquotes in it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from bv.optimize.edits import quote

_MARKUP = str.maketrans(
    {
        "\\": "\\\\",
        "|": "\\|",
        "[": "\\[",
        "]": "\\]",
        "`": "'",
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        "\n": " ",
    }
)


def cell(text: Any, limit: int = 160) -> str:
    """Hostile text as one Markdown table cell, bounded to `limit` characters."""
    return quote(str(text), limit).translate(_MARKUP)


def fenced(lines: Sequence[str]) -> list[str]:
    """Lines as one fenced block no line of them can close: its fence is longer than any run of
    backquotes in them."""
    longest = max((len(run) for line in lines for run in re.findall("`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, *lines, fence]
