"""The comparison reads at 60, 80, 100 and 200 columns, with long group and input names, on a
terminal (rich, bv.reporting.table_fit) and in a pipe told a width by $COLUMNS (plain text,
bv.reporting.text_table): the verdict first, figures whole, group names whole (at 60 columns over
two lines, between their words, never cut to `Find the s…`), and three inputs stacked by
comparison."""

from __future__ import annotations

import json
import re

import pytest
from support.commands import BIN, sh
from support.terminal import on_terminal

LONG_TYPE, LONG_SUB = "Fine-grained Discrimination", "Find the same one among many"
NAMES = ("baseline-skill-version-one", "candidate-two", "candidate-three")


def _rows(path, shift: int) -> None:
    """388 items in two types, several runs; `shift` moves which items are right."""
    rows = []
    for i in range(388):
        kind, sub = (LONG_TYPE, LONG_SUB) if i < 200 else ("Visual Tracking", "Maze")
        for run in range(2):
            right = (i + shift + run) % 3 != 0
            rows.append(
                {
                    "id": str(i),
                    "run": run,
                    "hard": int(right),
                    "type": kind,
                    "subtype": sub,
                    "ans_type": "choice",
                }
            )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("shape")
    specs = []
    for k, name in enumerate(NAMES):
        _rows(root / f"{k}.jsonl", k)
        specs.append(f"{name}={root / f'{k}.jsonl'}")
    return specs


def _shown(where: str, columns: int, specs: list[str]) -> str:
    if where == "terminal":
        status, shown, _ = on_terminal([BIN / "bv", "report", *specs], columns)
        assert status == 0, shown
        return shown.split("bv report: warning")[0]
    done = sh(" ".join(["bv", "report", *specs]), env={"COLUMNS": str(columns)})
    assert done.returncode == 0, done.stderr
    return done.stdout


def _table_lines(shown: str) -> list[str]:
    """The table's body rows, box characters blanked (a wide table keeps its box)."""
    rows = [re.sub("[│┃]", " ", line).rstrip() for line in shown.splitlines()]
    return [row for row in rows if re.search(r"\d$", row) and not row.startswith(NAMES)]


def _names(shown: str) -> list[str]:
    """The group names as read down the table: a name's later lines (at 60 columns a long name
    takes two, beside no figures) joined to its first."""
    names: list[str] = []
    lines = [re.sub("[│┃]", " ", line).rstrip() for line in shown.splitlines()]
    width = None
    for line in lines:
        row = re.match(r"(\s*\S.*?)\s+\d", line)
        if row and re.search(r"\d$", line) and not line.startswith(NAMES):
            names.append(row.group(1).strip())
            width = re.search(r"\d", line).start() - 1  # the group column, up to the first figure
        elif names and width and line.strip() and len(line) <= width and not re.search(r"\d", line):
            names[-1] += " " + line.strip()  # the same name, its next line
        else:
            width = None
    return names


@pytest.mark.parametrize("where", ["terminal", "pipe"])
@pytest.mark.parametrize("columns", [60, 80, 100, 200])
@pytest.mark.parametrize("count", [2, 3])
def test_the_comparison_reads_at_this_width(inputs, where, columns, count):
    shown = _shown(where, columns, inputs[:count])
    lines = shown.splitlines()
    # The verdict comes first, naming both inputs.
    assert lines[0].startswith(f"{NAMES[1]} vs {NAMES[0]}:"), shown
    table = _table_lines(shown)
    assert table and all(len(line) <= columns for line in table), shown
    if where == "terminal":
        assert all(len(line.rstrip()) <= columns for line in lines), shown
    overall = next(line for line in table if line.strip().startswith("Overall"))
    assert re.search(r"\s388\s", overall), overall  # one n: the inputs agree
    assert "[" in overall and "…" not in overall, overall  # the difference's interval, whole
    labels = _names(shown)
    assert LONG_TYPE in labels and LONG_SUB in labels and "Visual Tracking" in labels, (labels, shown)
    assert "…" not in "".join(labels), shown
    if count == 3:  # each comparison has its difference, whatever the width
        assert shown.index(f"{NAMES[2]} vs {NAMES[0]}:") < shown.index("bv report:"), shown
        assert len([line for line in table if line.strip().startswith("Overall")]) in (1, 2), shown
        if columns < 200:  # stacked: one table per comparison, titled by it
            assert " ".join(shown.split()).count(f"{NAMES[2]} vs {NAMES[0]}") == 2, shown


def test_a_pipe_without_columns_gets_the_whole_table(inputs):
    done = sh(" ".join(["bv", "report", *inputs]))
    assert done.returncode == 0, done.stderr
    assert "┃" in done.stdout and "…" not in done.stdout  # boxed, every interval in
    assert re.search(r"\d+\.\d ± \d+\.\d \[\d", done.stdout), done.stdout
