"""bv.reporting.render in process: the four formats of one report agree with each other and with figures
worked out by hand, and names from the data never act as markup, escape codes or CSV formulas."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from support.rows import HOSTILE, results

from bv.core.terminal import printable
from bv.reporting.export import csv_cell
from bv.reporting.render import render_csv, render_json, render_markdown, render_table
from bv.reporting.report import build_report


def rendered(render, report) -> str:
    out = io.StringIO()
    render(report, out)
    return out.getvalue()


@pytest.fixture(scope="module")
def report():
    built, _ = build_report([("run-a", results())])
    return built


def test_json_has_the_figures_worked_out_by_hand(report):
    data = json.loads(rendered(render_json, report))
    [summary] = data["inputs"]
    assert data["comparison"] is None and summary["name"] == "run-a"
    overall = summary["overall"]
    assert (overall["correct"], overall["rows"], overall["errors"], overall["judge_errors"]) == (5, 10, 1, 1)
    assert overall["accuracy"] == pytest.approx(0.5)
    subtypes = summary["by_subtype"]
    assert subtypes["S1"]["accuracy"] == pytest.approx(0.75) and subtypes["S1"]["n"] == 4
    assert subtypes["S2"]["accuracy"] == pytest.approx(1 / 3) and subtypes["S2"]["errors"] == 1
    assert subtypes[HOSTILE]["accuracy"] == pytest.approx(1 / 3) and subtypes[HOSTILE]["judge_errors"] == 1
    assert summary["by_type"]["T"]["accuracy"] == pytest.approx(4 / 7)


def test_csv_markdown_and_table_show_the_same_figures_as_json(report):
    data = json.loads(rendered(render_json, report))["inputs"][0]
    groups = {("overall", "Overall"): data["overall"]}
    groups.update({("type", name): cell for name, cell in data["by_type"].items()})
    groups.update({("subtype", name): cell for name, cell in data["by_subtype"].items()})
    lines = list(csv.DictReader(io.StringIO(rendered(render_csv, report))))
    by_group = {(line["level"], line["group"]): line for line in lines}
    markdown = rendered(render_markdown, report)
    table = rendered(render_table, report)
    for (level, name), cell in groups.items():
        line = by_group[(level, csv_cell(printable(name)))]  # names as a spreadsheet may show them
        assert float(line["accuracy"]) == pytest.approx(cell["accuracy"]), name
        assert (int(line["correct"]), int(line["errors"]), int(line["judge_errors"])) == (
            cell["correct"],
            cell["errors"],
            cell["judge_errors"],
        )
        shown = f"{100 * cell['accuracy']:.1f}"
        assert shown in markdown and shown in table, (name, shown)
    assert {line["input"] for line in lines} == {"run-a"}
    assert "| errors | judge err | undecided |" in markdown  # failures in columns of their own


def test_names_from_the_data_stay_data_in_every_format(report):
    table = rendered(render_table, report)
    markdown = rendered(render_markdown, report)
    data = json.loads(rendered(render_json, report))["inputs"][0]
    assert "[red]x[/red]" in table and "\x1b" not in table  # markup shown, not applied; no escapes
    assert "\x1b" not in markdown and "| [red]x[/red] \\x1b[2J\\|y |" in markdown  # one cell, visible
    cells = [len(re.split(r"(?<!\\)\|", line)) for line in markdown.splitlines() if line.startswith("|")]
    assert len(cells) == 9 and len(set(cells)) == 1  # no name breaks a row into more columns
    groups = [line["group"] for line in csv.DictReader(io.StringIO(rendered(render_csv, report)))]
    # One field each, read back whole: escapes visible, the formula defused by a leading '.
    assert printable(HOSTILE) in groups and "'=cmd|' /C calc'!A0" in groups
    assert HOSTILE in data["by_subtype"]  # JSON keeps the name exactly


def test_report_csv_defuses_escapes_and_formulas_as_bv_export_does(report):
    """Everything from outside is hostile: a spreadsheet runs a cell starting with =, a terminal
    acts on ESC. The report's CSV defuses both, as bv export's does."""
    text = rendered(render_csv, report)
    assert "\x1b" not in text
    assert not any(line["group"].startswith("=") for line in csv.DictReader(io.StringIO(text)))


def test_two_inputs_side_by_side_with_their_difference():
    a = results()
    b = [dict(r, hard=1, decided_by="rules") if r["id"] == "4" else r for r in results()]  # one more right
    built, _ = build_report([("a", a), ("b", b)])
    markdown = rendered(render_markdown, built)
    header = markdown.splitlines()[0]
    assert "| a % | b % | Δ [2-sided 95% CI] | 2-sided p (Holm) |" in header and "a err/judge/und" in header
    overall = next(line for line in markdown.splitlines() if "**Overall**" in line)
    assert "| 50.0 [18.7–81.3] | 60.0 [26.2–87.8] | +10.0 [" in overall and "1/1/0" in overall
    data = json.loads(rendered(render_json, built))
    assert [s["name"] for s in data["inputs"]] == ["a", "b"]
    paired = data["comparison"]["paired"]
    # Per item, every row counting as the accuracy counts it (a failed row is wrong).
    assert (paired["improved"], paired["regressed"], paired["n_items"]) == (1, 0, 10)
    assert "b vs a: no significant difference, +10.0 points" in markdown
    assert "on 10 items: 1 improved, 0 regressed, 9 unchanged" in markdown
