"""The report table in a pipe or a file is bv's own plain text (bv.reporting.text_table), and it is
byte for byte what rich renders for the same stream (bv.reporting.table_fit.print_table, which
terminals and FORCE_COLOR still get): over reports of one, two and three inputs, failures,
several runs, long, wide (CJK, emoji, full-width), combining and zero-width names, rich markup,
backslashes and control characters in names, and a stream that cannot encode the box."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.rows import results, row

from bv.reporting.render import render_table
from bv.reporting.report import build_report
from bv.reporting.table_fit import print_table
from bv.reporting.text_table import _NARROW, cell_len, title_lines


@pytest.fixture(autouse=True)
def no_forced_colour(monkeypatch):
    """rich treats a pipe as a terminal under these; the plain table is for every other pipe."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)


def both(report, stream_factory=io.StringIO) -> tuple[str, str]:
    """(bv's plain table, rich's rendering) of one report, each into a stream of its own."""
    from bv.reporting.render import notes, verdicts

    ours, theirs = stream_factory(), stream_factory()
    render_table(report, ours)
    print_table(report, notes(report, with_verdicts=False), theirs, verdicts(report))
    return _text(ours), _text(theirs)


def _text(stream) -> str:
    if isinstance(stream, io.StringIO):
        return stream.getvalue()
    stream.flush()
    return stream.buffer.getvalue().decode("ascii")


def test_the_plain_characters_are_one_cell_for_rich_too():
    from rich.cells import cell_len as rich_cell_len

    assert all(rich_cell_len(ch) == 1 for ch in _NARROW)
    assert cell_len("日本") == 4 and cell_len("e\u0301") == 1 and cell_len("–±Δ…") == 4


def test_the_hostile_report_is_rich_s_table_and_acts_on_nothing():
    built, _ = build_report([("run-a", results())])
    ours, theirs = both(built)
    assert ours == theirs
    assert "[red]x[/red] \\x1b[2J|y" in ours and "\x1b" not in ours  # markup shown, escape visible
    header, overall = ours.splitlines()[2], ours.splitlines()[4]
    assert "errors" in header and "judge err" in header and "undecided" in header  # columns of their own
    assert "Overall" in overall and " 5/10 " in overall and " 50.0 " in overall  # failed rows count wrong


def test_comparisons_and_runs_are_rich_s_table():
    a = results()
    b = [dict(r, hard=1, decided_by="rules") if r["id"] == "4" else r for r in results()]
    c = [dict(r, run=1) for r in a] + a
    for inputs in ([("a", a), ("b", b)], [("a", a), ("b", b), ("long name " * 12, b)], [("c", c)]):
        built, _ = build_report(inputs)
        ours, theirs = both(built)
        assert ours == theirs, inputs[0][0]


def test_a_stream_that_cannot_write_the_box_gets_rich_s_ascii_box():
    built, _ = build_report([("a", results())])

    def ascii_stream():
        return io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="backslashreplace")

    ours, theirs = both(built, ascii_stream)
    assert ours == theirs and ours.splitlines()[1].startswith("+---")


def test_a_long_title_wraps_as_rich_wraps_it():
    assert title_lines("bv report: " + "x" * 25, 10) == [
        "bv report:",
        "xxxxxxxxxx",
        "xxxxxxxxxx",
        "xxxxx     ",
    ]
    assert title_lines("ab  cd", 3) == ["ab ", "cd "]
    assert title_lines("日本語の長い名前", 5) == ["日本 ", "語の ", "長い ", "名前 "]


@settings(max_examples=200, deadline=None)
@given(
    title=st.text(alphabet=st.sampled_from([*"ab  -,", "日", "😀", "\u3000", "\u0301"])),
    width=st.integers(2, 12),
)
def test_titles_wrap_as_rich_wraps_them(title, width):
    from rich.console import Console
    from rich.text import Text

    expected = [line.plain for line in Text(title).wrap(Console(), width, justify="left", overflow="fold")]
    assert title_lines(title, width) == expected


NAMES = st.text(
    alphabet=st.sampled_from(
        [
            *"abcXYZ019 -_.,:;%=/|[]\\@#",
            *"\x1b\x07\t\n\r\x9b\u202e\u200b\ufeff\u3000\xa0",  # controls, bidi, zero-width, spaces
            *"日本語😀🐈Ａé\u0301ßΩ–…Δ",  # wide, emoji, full-width, accents, a combining mark
        ]
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(
    names=st.lists(NAMES, min_size=1, max_size=3),
    labels=st.lists(NAMES.filter(bool), min_size=1, max_size=3, unique=True),
    long_label=st.booleans(),
    runs=st.integers(1, 2),
)
def test_any_names_give_rich_s_table_byte_for_byte(names, labels, long_label, runs):
    rows = []
    for i in range(6):
        for run in range(runs):
            kind = names[i % len(names)]
            extra = {"error": "HTTP 500", "response": None, "decided_by": None} if i == 5 and run else {}
            rows.append(row(str(i), run, kind, names[(i + 1) % len(names)] + kind, (i + run) % 2, **extra))
    if long_label:
        labels = [labels[0] * 8, *labels[1:]]
    built, _ = build_report([(label, rows) for label in labels])
    ours, theirs = both(built)
    assert ours == theirs
    assert "\x1b" not in ours and "\x07" not in ours and "\u202e" not in ours


def test_a_pipe_rich_is_told_to_colour_gets_rich_s_colours(monkeypatch):
    """FORCE_COLOR (or TTY_COMPATIBLE=1) tells rich a pipe is a terminal: its table, as before."""
    built, _ = build_report([("a", results())])
    plain = io.StringIO()
    render_table(built, plain)
    monkeypatch.setenv("FORCE_COLOR", "1")
    coloured = io.StringIO()
    render_table(built, coloured)
    assert "\x1b[1mOverall\x1b[0m" in coloured.getvalue() and "\x1b" not in plain.getvalue()
    monkeypatch.setenv("TTY_COMPATIBLE", "0")  # rich's own rule: this one wins
    again = io.StringIO()
    render_table(built, again)
    assert again.getvalue() == plain.getvalue()
