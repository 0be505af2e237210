"""The report table fits the terminal: figures are never cut, group names give way."""

from __future__ import annotations

import json

import pytest
from support.commands import BIN
from support.terminal import on_terminal

LONG_TYPE = "Fine-grained Discrimination"


def _rows(path):
    """388 items in two types; one subtype all right (100.0), the overall count 310/388."""
    rows = []
    for i in range(388):
        kind, sub = (LONG_TYPE, "Find the same one among many") if i < 200 else ("Visual Tracking", "Maze")
        right = i < 200 or i < 310
        rows.append({"id": str(i), "hard": int(right), "type": kind, "subtype": sub, "ans_type": "choice"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("columns", [80, 100, 120])
def test_figures_are_never_cut(tmp_path, columns):
    results = tmp_path / "results.jsonl"
    _rows(results)
    status, shown, _ = on_terminal([BIN / "bv", "report", results], columns)
    assert status == 0, shown
    table = [line for line in shown.splitlines() if "Overall" in line or "Maze" in line or "Find" in line]
    assert len(table) == 3, shown
    overall, same, maze = table
    for figure in ("388", "310/388", "79.9", "75.6–83.8"):
        assert figure in overall, (figure, shown)
    assert "200/200" in same and "100.0" in same and "98.2–100.0" in same, shown
    assert "110/188" in maze and "58.5" in maze, shown
    assert all(len(line.rstrip()) <= columns for line in shown.splitlines()), shown
    # The long group name is whole: the empty failure columns and the box give way first.
    assert LONG_TYPE in shown and "…" not in shown, shown


def test_comparison_at_80_columns(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _rows(a)
    _rows(b)
    status, shown, _ = on_terminal([BIN / "bv", "report", f"{'x' * 30}={a}", f"y={b}"], 80)
    assert status == 0, shown
    overall = next(line for line in shown.splitlines() if "Overall" in line)
    assert " 388 " in overall and overall.count("79.9") == 2 and "+0.0" in overall, shown
    assert all(len(line.rstrip()) <= 80 for line in shown.splitlines()), shown


def test_a_pipe_gets_the_whole_table(tmp_path):
    results = tmp_path / "results.jsonl"
    _rows(results)
    status, _, out = on_terminal([BIN / "bv", "report", results], 80, stdout_terminal=False)
    assert status == 0 and LONG_TYPE in out.decode() and "…" not in out.decode()


@pytest.mark.parametrize("columns", [80, 120])
def test_wide_and_escaped_names_are_measured_as_shown(tmp_path, columns):
    """A CJK name takes two cells a character and an escaped ESC four: the fit counts what the
    terminal shows, so no line overflows and no figure is cut."""
    from rich.cells import cell_len

    results = tmp_path / "results.jsonl"
    _rows(results)
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    for r in rows:
        if r["type"] == LONG_TYPE:
            r["type"], r["subtype"] = "視覚の細かい識別" * 3, "\x1b[2J" * 6
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    status, shown, _ = on_terminal([BIN / "bv", "report", results], columns)
    assert status == 0, shown
    assert all(cell_len(line.rstrip()) <= columns for line in shown.splitlines()), shown
    maze = next(line for line in shown.splitlines() if "Maze" in line)
    assert "110/188" in maze and "58.5" in maze, shown
    assert "\x1b[2J" not in shown and "\\x1b[2J" in shown.replace("…", ""), shown
