"""bv optimize's report.html renders its report.md (bv.reporting.markdown_html): headings, lists,
tables, code and bold become HTML, and text from outside never becomes markup."""

from __future__ import annotations

from bv.reporting.markdown_html import to_html


def test_the_subset_becomes_html():
    page = to_html("# Run\n\nSome **bold**, `x`.\n\n- one\n- two\n\n| a | b |\n|---|---:|\n| 1 | 2 |\n")
    assert "<h1>Run</h1>" in page and "<strong>bold</strong>" in page and "<code>x</code>" in page
    assert "<ul><li>one</li><li>two</li></ul>" in page
    assert "<thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td>2</td></tr>" in page


def test_hostile_text_stays_text():
    hostile = (
        "# <img src=x onerror=alert(1)>\n<script>alert(1)</script> &lt;svg onload=x&gt;"
        " \\[click\\](javascript:x)"
        " \\*\\*not bold\\*\\*\n\n| <b>x</b> | y |\n|---|---|\n| `<i>` | **<u>** |\n\n```\n<script>\n```\n"
    )
    page = to_html(hostile)
    for raw in ("<img", "<script", "<svg", "<b>", "<i>", "<u>", "<a "):
        assert raw not in page, (raw, page)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "[click](javascript:x)" in page
    assert "**not bold**" in page and "<strong>&lt;u&gt;</strong>" in page
