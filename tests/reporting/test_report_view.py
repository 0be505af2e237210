"""bv.api.Report in a notebook (bv/reporting/report_view.py, report_frame.py): it shows as the
table and verdict `bv report` prints, escaped, and its rows come out in documented plain columns,
one per (input, id, run), the verdict as `correct`."""

from __future__ import annotations

import html
import importlib.util
import re

import pytest
from support.paths import ROOT

from bv import api
from bv.reporting.report_frame import COLUMNS


def _two_skills(sample_dir):
    prompts = list(api.prompt(sample_dir / "meta_data.jsonl"))[:4]
    rows = {}
    for name, seed in (("v1 <b>", 1), ("v2", 2)):
        rolled = api.rollout(prompts, backend="chance", seed=seed, repeats=2, cache=None)
        rows[name] = api.judge(rolled, mode="rules")
    return rows


def test_a_comparison_shows_in_a_notebook_as_the_terminal_table_and_verdict(sample_dir):
    """A report showed as `Report()` in a notebook (issue 44)."""
    report = api.report(_two_skills(sample_dir))
    shown = report._repr_html_()
    assert html.unescape(re.sub(r"</?pre[^>]*>", "", shown)) == report.render("table")
    assert "<b>" not in shown and "v1 &lt;b&gt;" in shown  # a name is data, never markup
    assert report.verdict() and report.verdict() in html.unescape(shown)
    assert report.verdict() in repr(report)


def test_records_are_one_plain_row_per_input_id_and_run(sample_dir):
    """to_pandas() gave 43 columns whose right/wrong column was `hard` (issue 44)."""
    rows = _two_skills(sample_dir)
    records = api.report(rows).records()
    assert [list(record) for record in records] == [list(COLUMNS)] * 16
    assert [(r["name"], r["id"], r["run"]) for r in records] == [
        (name, row["id"], row["run"]) for name, judged in rows.items() for row in judged
    ]
    by_key = {(name, row["id"], row["run"]): row["hard"] for name, judged in rows.items() for row in judged}
    assert all(r["correct"] == (by_key[r["name"], r["id"], r["run"]] == 1) for r in records)
    if importlib.util.find_spec("pandas") is not None:  # pandas is no dependency of bv's
        frame = api.report(rows).to_pandas()
        assert list(frame.columns) == list(COLUMNS) and len(frame) == 16


def test_the_docs_list_the_columns():
    docs = (ROOT / "docs" / "api.md").read_text()
    table = docs[docs.index("| column |") :].split("\n\n")[0]
    listed = re.findall(r"^\| `(\w+)` \|", table, re.M)
    assert listed == list(COLUMNS)


def test_to_pandas_without_pandas_says_what_to_install(sample_dir, monkeypatch):
    import sys

    from bv.core.errors import MissingPackage

    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(MissingPackage, match="pip install pandas"):
        api.report(_two_skills(sample_dir)["v2"]).to_pandas()
