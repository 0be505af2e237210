"""An MkDocs hook: a link from a page to a file of the repository outside docs/
(`[bench/README.md](../bench/README.md)`, which works when the page is read on GitHub) becomes
the file's path in code on the site, which does not hold that file. A link to a file that is not
in the repository is a warning, and so an error under `mkdocs build --strict`."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.repo_links")

# [text](target) with a relative target; images (![...]) and links inside code are left alone.
_LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\((\.\./[^)\s#]+)(#[^)\s]*)?\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """The page's Markdown, each link that leaves docs/ written as the repository path it names."""
    docs = Path(config["docs_dir"]).resolve()
    root = docs.parent
    source = (docs / page.file.src_uri).parent

    def path_of(match: re.Match[str]) -> str:
        text, target = match.group(1), match.group(2)
        where = (source / target).resolve()
        if where.is_relative_to(docs):
            return match.group(0)  # a page of the site: MkDocs checks it
        if not where.is_relative_to(root) or not where.exists():
            log.warning("%s links to %s, which is not a file of the repository", page.file.src_uri, target)
            return match.group(0)
        path = where.relative_to(root).as_posix()
        shown = text.strip("`")
        return f"`{path}`" if shown == path else f"{text} (`{path}`)"

    pieces: list[str] = []
    last = 0
    for fence in _FENCE.finditer(markdown):  # code blocks are shown as written
        pieces += [_LINK.sub(path_of, markdown[last : fence.start()]), fence.group(0)]
        last = fence.end()
    pieces.append(_LINK.sub(path_of, markdown[last:]))
    return "".join(pieces)
