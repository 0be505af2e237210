"""Issue 35's walk, as a user types it: two skills evaluated by bv eval into runs/a and runs/b
(bv synth items, the chance backend, the rules judge), then `bv report runs/a runs/b --baseline
a`: a verdict naming a and b, a table whose group names are whole at 80 columns, and an HTML
page that at 1280 px shows every image and overflows nothing (headless Chromium)."""

from __future__ import annotations

import re

import pytest
from support.browser import Browser, find_chromium
from support.commands import BIN, sh
from support.paths import ROOT
from support.terminal import on_terminal

GROUPS = (
    "Fine-grained Discrimination",
    "Visual Pattern Recognition",
    "Find the different",
    "Count 3D blocks",
)
BUILD = ROOT / "build"
SCREENSHOTS = (BUILD / "walk-compare.png", BUILD / "walk-compare-items.png", BUILD / "walk-compare-3.png")
_WIDE = (
    "[...document.querySelectorAll('table, svg, .card')].filter(e => e.getBoundingClientRect().right > 1280)"
    ".map(e => e.tagName + '.' + (e.className.baseVal ?? e.className))"
)


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    root = tmp_path_factory.mktemp("walk35")
    (root / "v1.md").write_text("# v1\nLook carefully at every cell.\n")
    (root / "v2.md").write_text("# v2\nCount the cells twice.\n")
    run = "bv eval data/meta_data.jsonl --backend chance --repeats 3 --mode rules -q"
    made = sh(
        f"bv synth --out data && {run} --skill v1.md -o runs/a && {run} --skill v2.md -o runs/b"
        f" && {run} --skill v2.md -o runs/c --seed 9 --label v2-seed-9-with-a-long-label",
        cwd=root,
    )
    assert made.returncode == 0, made.stderr
    return root


def test_the_verdict_names_the_runs_and_the_table_reads_at_80_columns(walk):
    status, shown, _ = on_terminal(
        [BIN / "bv", "report", walk / "runs/a", walk / "runs/b", "--baseline", "a"], 80
    )
    assert status == 0, shown
    lines = shown.splitlines()
    assert lines[0].startswith("b vs a: "), shown  # the answer first, in the runs' names
    assert all(len(line.rstrip()) <= 80 for line in lines), shown
    for group in GROUPS:
        assert re.search(rf"^\s*{group}\s+\d", shown, re.M), (group, shown)
    assert "…" not in "".join(line for line in lines if re.search(r"\d$", line.rstrip()))
    piped = sh("bv report runs/a runs/b --baseline a", cwd=walk, env={"COLUMNS": "80"})
    assert piped.returncode == 0 and piped.stdout.startswith("b vs a: "), piped.stderr
    table = [line for line in piped.stdout.splitlines() if re.search(r"\d$", line)]
    assert all(len(line) <= 80 for line in table) and all(g in piped.stdout for g in GROUPS), piped.stdout


@pytest.mark.skipif(find_chromium() is None, reason="Chromium not installed (apt-get install chromium)")
def test_the_comparison_page_shows_the_images_and_fits_1280_px(walk, tmp_path):
    page = tmp_path / "pages" / "compare.html"  # away from the runs and the items
    done = sh(f"bv report runs/a runs/b --baseline a --html {page}", cwd=walk)
    assert done.returncode == 0, done.stderr
    assert "not embedded" not in done.stderr, done.stderr
    with Browser() as browser:
        browser.open(page, width=1280, height=1400)
        width = browser.evaluate("document.documentElement.scrollWidth")
        images = browser.evaluate("[...document.images].map(i => i.naturalWidth)")
        wide = browser.evaluate(_WIDE)
        verdict = browser.evaluate("document.querySelector('p.verdict').innerText")
        browser.screenshot(SCREENSHOTS[0])
        browser.evaluate("document.querySelector('.card').scrollIntoView()")
        browser.screenshot(SCREENSHOTS[1])  # the first items' cards, with their images
        assert not browser.errors, browser.errors
    assert width <= 1280, width
    assert not wide, wide
    assert len(images) >= 40 and all(w > 0 for w in images), images
    assert verdict.startswith("b vs a:"), verdict


@pytest.mark.skipif(find_chromium() is None, reason="Chromium not installed (apt-get install chromium)")
def test_three_runs_share_one_difference_axis_and_fit_1280_px(walk, tmp_path):
    page = tmp_path / "compare3.html"
    done = sh(f"bv report runs/a runs/b runs/c --html {page}", cwd=walk)
    assert done.returncode == 0, done.stderr
    with Browser() as browser:
        browser.open(page, width=1280, height=1600)
        width = browser.evaluate("document.documentElement.scrollWidth")
        wide = browser.evaluate(_WIDE)
        axes = browser.evaluate(
            "[...document.querySelectorAll('svg.diffplot')].map(s => [...s.querySelectorAll('text.tick')]"
            ".map(t => t.textContent).join(' '))"
        )
        browser.screenshot(SCREENSHOTS[2])
    assert width <= 1280 and not wide, (width, wide)
    assert len(axes) == 2 and axes[0] == axes[1], axes  # one Δ axis for both comparisons
    assert axes[0].split()[-1] in ("+5", "+10", "+20", "+25", "+50", "+100"), axes  # round points


def test_a_single_run_page_leads_with_its_headline(walk):
    text = (walk / "runs/a/report.html").read_text()
    first = re.search(r'<p class="verdict headline">([^<]*)</p>', text)
    assert first and re.fullmatch(
        r"a: accuracy \d+\.\d% \(95% CI [\d.]+–[\d.]+\) on 40 items, 3 runs each; chance [\d.]+%\.",
        first.group(1),
    ), first
    assert text.index("headline") < text.index("<svg")
