"""The HTML viewer as a user meets it: the paired comparison in words and a table (also in
headless Chromium), failure counts, `--html -`, a new folder, and a bounded page."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from support.browser import Browser, find_chromium
from support.commands import bv_inproc, sh
from support.paths import ROOT


def _rows(right: set[int], n: int = 30, **extra) -> list[dict]:
    return [
        {
            "id": str(i),
            "run": 0,
            "question": f"Which one? ({i})",
            "ans_type": "blank",
            "answer": ["1"],
            "type": "Visual Tracking",
            "subtype": "Maze",
            "model": "m",
            "response": "\\boxed{1}" if i in right else "\\boxed{2}",
            "extracted": "1" if i in right else "2",
            "hard": int(i in right),
            "decided_by": "rules",
            "undecided": False,
            "error": None,
            **extra,
        }
        for i in range(n)
    ]


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def pair(tmp_path):
    """a right on 0..24; b right on 0..2 and 25: 1 improved, 22 regressed, 3 right and 4 wrong in both."""
    a = _write(tmp_path / "a.jsonl", _rows(set(range(25))))
    b_rows = _rows({0, 1, 2, 25})
    b_rows[29].update(hard=None, decided_by="error", judge_error="judge request failed: timeout")
    b = _write(tmp_path / "b.jsonl", b_rows)
    return a, b


def test_comparison_reads_like_the_terminal(pair, tmp_path):
    a, b = pair
    page = tmp_path / "new" / "folder" / "page.html"  # made as merge -o makes its folder
    result = bv_inproc(f"bv report v1={a} v2={b} --html {page}")
    assert page.is_file(), result.stderr
    sentence = next(line for line in result.stdout.splitlines() if "improved" in line)
    assert "v2 is worse than v1 by 70.0 points" in sentence and "two-sided p = 7.86e-08" in sentence
    assert "on 30 items: 1 improved, 22 regressed, 7 unchanged (Newcombe's paired score interval" in sentence
    text = page.read_text()
    section = text[text.index('id="paired"') : text.index('id="items"')]
    assert html.unescape(re.search(r'<p class="cmp">(.*?)</p>', section)[1]) == sentence  # word for word
    assert "<th>improved</th><th>regressed</th>" in section and "<td>22 (v1 better)</td>" in section
    assert '<a href="#item-25">25</a>' in section  # the improved item, linked to its card
    top = text[text.index('id="overview"') : text.index('id="paired"')]
    assert f'<p class="verdict">{html.escape(sentence)}</p>' in top  # the answer first, word for word
    assert "{" not in section and '"' + "improved_ids" not in section  # never raw JSON
    assert "v2: 30 items, 1 run, model m; 0 rollout errors, 1 judge error, 0 undecided" in text


def test_page_to_stdout(pair):
    a, b = pair
    result = sh(f"bv report {a} {b} --html - | head -c 15")
    assert result.stdout == "<!DOCTYPE html>", result.stdout
    # 1 for b's judge error, whether head left before the page was written or after (quietly)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    whole = bv_inproc(f"bv report {a} --html -")
    assert whole.stdout.startswith("<!DOCTYPE html>") and whole.stdout.rstrip().endswith("</html>")
    assert "bv report: a" not in whole.stdout.split("<title>")[0]  # no table before the page
    assert "wrote" not in whole.stderr


def test_a_big_input_shows_failures_first_with_a_note(tmp_path):
    long = "step " * 3000  # 15 000 characters: shortened on the card
    rows = _rows(set(range(0, 40)) - {7, 31, 33}, n=40, cot=long)
    rows += [{**r, "run": 1} for r in rows]  # two runs per item
    results = _write(tmp_path / "r.jsonl", rows)
    page = tmp_path / "r.html"
    result = sh(f"bv report {results} --html {page}", env={"BV_HTML_MAX_ITEMS": "5"})
    assert result.returncode == 0, result.stderr
    text = page.read_text()
    cards = re.findall(r'<article class="card" id="item-(\d+)"', text)
    assert cards == ["0", "1", "7", "31", "33"], cards  # the failures kept, shown by id
    assert "Showing 5 of 40 items" in text and "BV_HTML_MAX_ITEMS" in text
    assert "0/2 right" in text and "2/2 right" in text
    assert "more characters not shown" in text and long not in text
    assert len(text) < 200_000


@pytest.mark.skipif(find_chromium() is None, reason="Chromium not installed (apt-get install chromium)")
def test_comparison_in_headless_chromium(pair):
    a, b = pair
    build = ROOT / "build"  # not /tmp, which a snap-packaged Chromium cannot read
    build.mkdir(exist_ok=True)
    page = build / "report-compare.html"
    assert bv_inproc(f"bv report v1={a} v2={b} --html {page}").returncode == 1  # b has a judge error
    with Browser() as browser:
        browser.open(page, width=1280, height=1200)
        sentence = browser.evaluate("document.querySelector('p.cmp').innerText")
        assert "v2 is worse than v1 by 70.0 points" in sentence and "p = 7.86e-08" in sentence
        table = browser.evaluate(
            "[...document.querySelectorAll('table.cmp tr')].map(r => [...r.cells].map(c => c.innerText))"
        )
        assert table[0][:4] == ["items", "improved", "regressed", "unchanged"], table
        assert table[1][:4] == ["30", "1 (v2 better)", "22 (v1 better)", "7"], table
        # The improved item's link leads to its card, which says it differs.
        target = browser.evaluate("document.querySelector('p.moved a').getAttribute('href')")
        assert browser.evaluate(f"document.querySelector('{target}').innerText.includes('differs')")
        meta = browser.evaluate("document.querySelector('p.meta').innerText")
        assert "1 judge error" in meta and "0 rollout errors" in meta and "0 undecided" in meta
        section = browser.evaluate("document.querySelector('#paired').parentElement.innerText")
        assert "improved_ids" not in section and "p_value" not in section
        # The summary at the top, drawn: a bar per input and category (v1 25/30 wider than v2's
        # 4/30), an interval and a chance tick on each, and the difference per category around 0.
        drawn = browser.evaluate(
            "(() => { const box = e => e.getBoundingClientRect();"
            " const all = s => [...document.querySelectorAll(s)];"
            " const bars = all('#overview svg.bars rect.bar').map(e => box(e).width);"
            " return {bars, ci: document.querySelectorAll('#overview svg.bars line.ci').length,"
            " chance: document.querySelectorAll('#overview svg.bars line.chance').length,"
            " points: all('#overview svg.diffplot circle.point').map(e => box(e).width),"
            " top: box(document.getElementById('overview')).top,"
            " cards: box(document.querySelector('.card')).top,"
            " provenance: document.querySelector('#overview table.prov').innerText} })()"
        )
        assert len(drawn["bars"]) == 4 and all(w > 0 for w in drawn["bars"]), (
            drawn
        )  # overall + 1 type, 2 inputs
        assert drawn["bars"][0] > 4 * drawn["bars"][1], drawn
        assert drawn["ci"] == 4 and drawn["chance"] == 4 and len(drawn["points"]) == 2, drawn
        assert all(w > 0 for w in drawn["points"]) and drawn["top"] < drawn["cards"], drawn
        assert "judge version" in drawn["provenance"] and "v1" in drawn["provenance"], drawn
        browser.evaluate("document.getElementById('overview').scrollIntoView()")
        browser.screenshot(build / "report-compare.png")
        assert not browser.errors, browser.errors
