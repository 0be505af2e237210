"""Text from data made safe to show on a terminal: the one helper every message goes through.

Ids, types, file names, server error bodies and model replies are hostile: an escape code
can move the cursor or retitle the window, a newline can forge a `bv:` line on stderr, a
bidirectional override can make text read backwards, and `[/]` or `[link=...]` in a label
is rich markup (a crash, or a hyperlink). `printable` escapes every such character as
`\\xNN` or `\\uNNNN` (`\\x1b`, `\\x0a`, `\\u202e`), so nothing is lost and nothing acts;
`markup_safe` also escapes rich markup, for text that rich will render. `stdin_notice` is the
line a command says before it waits for a terminal's stdin.
"""

from __future__ import annotations

import re
import sys

# C0 and C1 controls, DEL, bidirectional controls, line and paragraph separators, BOM / zero-width
# marks that hide text, and lone surrogates (which no terminal encoding can even write).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: object, limit: int | None = None) -> str:
    """`text` as one line with every control character escaped; cut to `limit` characters (…)."""
    text = str(text)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    return _UNSAFE.sub(_escape, text)


def markup_safe(text: object, limit: int | None = None) -> str:
    """`printable`, and with rich markup escaped, for text rich renders (tables, progress)."""
    from rich.markup import escape

    return escape(printable(text, limit))


def stdin_notice(inputs: tuple[str, ...] | list[str], what: str, quiet: bool = False) -> None:
    """Say once, on a terminal, that the stage waits for records typed on stdin, not silently
    (here, not in bv.engine.progress, which `bv report` and `bv merge` need not import)."""
    if quiet or (inputs and "-" not in inputs):
        return
    try:
        if sys.stdin.isatty():
            sys.stderr.write(f"bv: reading {what} from stdin; pipe a file or Ctrl-D\n")
            sys.stderr.flush()
    except (ValueError, OSError):  # stdin closed
        pass
