"""Hostile text (optimizer edits, replies, server errors) put into Markdown so that, rendered, it
reads as the text itself: in a table cell `&`, `<` and `>` become entities (no raw HTML: no
`<script>`, `<img onerror>`, `<svg onload>`), `[`, `]`, `|` and `\\` are backslash-escaped and
backquotes become quotes (no link, no remote image, no code span, no new cell), newlines become
spaces; a fenced block's fence is longer than any run of backquotes in it.

A link is broken twice over, for renderers that honour backslash escapes and for those that do
not: the `(` after a `]` is escaped too, so no `](` is left, and the colon of a script scheme
(`javascript:`, `vbscript:`) is escaped, so report.md holds no such target at all. Each escape
renders as the character itself: the text reads the same."""

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


# A script scheme's name and its colon, spaces between them allowed (a browser drops tabs and
# newlines from a URL): the colon is escaped, which renders as itself.
_SCRIPT_SCHEME = re.compile(r"((?:java|vb)\s*script\s*):", re.IGNORECASE)


def cell(text: Any, limit: int = 160) -> str:
    """Hostile text as one Markdown table cell, bounded to `limit` characters."""
    escaped = quote(str(text), limit).translate(_MARKUP).replace("\\](", "\\]\\(")
    return _SCRIPT_SCHEME.sub(r"\1\\:", escaped)


def fenced(lines: Sequence[str]) -> list[str]:
    """Lines as one fenced block no line of them can close: its fence is longer than any run of
    backquotes in them."""
    longest = max((len(run) for line in lines for run in re.findall("`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, *lines, fence]
