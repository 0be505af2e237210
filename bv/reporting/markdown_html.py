"""A small Markdown subset as HTML, for report pages made from bv's own report.md (bv optimize's
report.html): headings, paragraphs, `-` lists, pipe tables, fenced code, `code` and **bold**.

Every line is HTML-escaped before any Markdown is read, so text from outside (a skill, a model's
reply, a file name) can never become markup: the subset only adds bv's own tags around text
that is already escaped. One pass over the lines, linear in the text.
"""

from __future__ import annotations

import html
import re

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_HEADING = re.compile(r"(#{1,6}) +(.*)")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")  # a backslash before ASCII punctuation: the character
_RULE = re.compile(r"\|? *:?-{3,}:? *(\| *:?-{3,}:? *)*\|? *")


def _inline(text: str) -> str:
    """A line's `code` and **bold**, its text escaped first (code first: what it holds is not read
    further). An entity the Markdown holds (`&lt;`) and a backslash escape (`\\[`) show the
    character they stand for, still escaped for HTML."""
    pieces = _CODE.split(html.escape(html.unescape(text), quote=True))
    out = []
    for i, piece in enumerate(pieces):
        if i % 2:
            out.append(f"<code>{piece}</code>")
        else:
            out.append(_ESCAPED.sub(r"\1", _BOLD.sub(r"<strong>\1</strong>", piece)))
    return "".join(out)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def to_html(markdown: str) -> str:
    """The HTML of `markdown` (see the module's subset); anything else is a paragraph's text."""
    out: list[str] = []
    lines = markdown.split("\n")
    i = 0
    paragraph: list[str] = []
    items: list[str] = []

    def flush() -> None:
        if paragraph:
            out.append("<p>" + " ".join(_inline(t) for t in paragraph) + "</p>")
            paragraph.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{_inline(t)}</li>" for t in items) + "</ul>")
            items.clear()

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```")), len(lines)
            )
            out.append("<pre>" + html.escape("\n".join(lines[i + 1 : end])) + "</pre>")
            i = end + 1
            continue
        heading = _HEADING.fullmatch(stripped)
        if heading:
            flush()
            level = len(heading.group(1))
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif stripped.startswith("|") and i + 1 < len(lines) and _RULE.fullmatch(lines[i + 1].strip()):
            flush()
            head = "".join(f"<th>{_inline(c)}</th>" for c in _cells(stripped))
            rows, i = [], i + 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in _cells(lines[i])) + "</tr>")
                i += 1
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")
            continue
        elif stripped.startswith(("- ", "* ")):
            if paragraph:
                flush()
            items.append(stripped[2:])
        elif not stripped:
            flush()
        elif items and line.startswith("  "):
            items[-1] += " " + stripped  # a list item's continued line
        else:
            if items:
                flush()
            paragraph.append(stripped)
        i += 1
    flush()
    return "\n".join(out)
