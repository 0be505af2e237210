"""The docs site (mkdocs.yml, docs/; `make docs` builds it with warnings as errors): every page is
in the nav, and the code blocks titled "runs offline" run as written, in order, in a fresh folder,
printing what the page says they print. `make test` checks this without MkDocs installed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from support.commands import BIN, sh
from support.paths import ROOT

DOCS = ROOT / "docs"
RUNNABLE = re.compile(r'^```(sh|python) title="runs offline"\n(.*?)^```$', re.M | re.S)


def runnable(page: Path) -> list[tuple[str, str]]:
    """The page's blocks titled "runs offline": (language, code), in page order."""
    return RUNNABLE.findall(page.read_text(encoding="utf-8"))


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = config.split("\nnav:\n", 1)[1]
    listed = re.findall(r"^\s+- (?:[^:\n]+: )?(\S+\.md)$", nav, re.M)
    assert len(listed) == len(set(listed)), "a page listed twice"
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    assert set(listed) == pages


PAGES = [page for page in sorted(DOCS.glob("*.md")) if runnable(page)]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[str, subprocess.CompletedProcess]]]:
    """Each page's offline blocks, run once in a folder of the page's own: (code, its run)."""
    done: dict[str, list[tuple[str, subprocess.CompletedProcess]]] = {}
    for page in PAGES:
        folder = tmp_path_factory.mktemp(page.stem)
        runs = done.setdefault(page.name, [])
        for language, code in runnable(page):
            if language == "python":
                (folder / "example.py").write_text(code)
                code = f"{BIN}/python example.py"
            runs.append((code, sh(code, cwd=folder, env={"XDG_CACHE_HOME": str(folder / "cache")})))
    return done


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_the_pages_offline_examples_run(page, ran):
    assert ran[page.name]
    for code, done in ran[page.name]:
        assert done.returncode == 0, f"{page.name}: {code}\n{done.stderr}"


def test_getting_started_prints_the_verdict_it_shows(ran):
    """The page's verdict is the one its commands print, from the shell and from Python."""
    text = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    shown = re.search(r"^```text\n(v2 vs v1: .*)\n```$", text, re.M).group(1)
    outputs = [done.stdout for _, done in ran["getting-started.md"]]
    assert "no significant difference" in shown
    assert any(out.splitlines()[:1] == [shown] for out in outputs), "bv report printed another verdict"
    assert outputs[-1].strip() == shown.rstrip("."), "the Python example printed another verdict"


@pytest.mark.parametrize(("page", "limit"), [("README.md", 150), ("docs/performance.md", 200)])
def test_the_short_pages_stay_short(page, limit):
    """The README is read in two minutes, and performance.md is a page, not a log (bench/HISTORY.md):
    what grows past these goes to its docs page."""
    lines = len((ROOT / page).read_text(encoding="utf-8").splitlines())
    assert lines < limit, f"{page}: {lines} lines; move the detail to the page it belongs to"
