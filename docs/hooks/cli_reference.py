"""An MkDocs hook: docs/cli.md's marker becomes the command-line reference written from the click
commands (bv.cli.reference), at every build, so that the page cannot drift from `bv --help`."""

from __future__ import annotations

from typing import Any

MARKER = "<!-- the reference of every command, written by bv.cli.reference -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """The page's Markdown, with the reference in place of the marker on docs/cli.md."""
    if page.file.src_uri != "cli.md":
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/cli.md lost its marker {MARKER!r}: the reference has nowhere to go")
    from bv.cli.reference import markdown as reference

    return markdown.replace(MARKER, reference())
