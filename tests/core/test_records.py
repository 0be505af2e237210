"""Record schemas: the field lists come from the TypedDicts in bv/core/records.py, docs/formats.md
lists exactly those, and each stage's re-run drops exactly its own and later fields."""

from __future__ import annotations

import json
import re

import pytest
from support.paths import ROOT

from bv.core import records
from bv.core.records import (
    ITEM_FIELDS,
    JUDGE_FIELDS,
    PROMPT_FIELDS,
    ROLLOUT_FIELDS,
    JudgedRow,
    natural_key,
    without_stage,
)
from bv.reporting.html_items import natural

FORMATS = ROOT / "docs" / "formats.md"


def _documented() -> dict[str, tuple[str, ...]]:
    """The `adds` column of formats.md's table, by the row's first cell."""
    rows = {}
    for line in FORMATS.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("stage", "---"):
            rows[cells[0]] = tuple(re.findall(r"`(\w+)`", cells[2]))
    return rows


@pytest.mark.parametrize(
    "row, fields",
    [
        ("items (input of `bv prompt`)", ITEM_FIELDS),
        ("`bv prompt`", PROMPT_FIELDS),
        ("`bv rollout`", ROLLOUT_FIELDS),
        ("`bv judge`", JUDGE_FIELDS),
    ],
)
def test_formats_md_lists_exactly_the_fields(row, fields):
    assert _documented()[row] == fields


def test_every_field_has_its_paragraph_in_formats_md():
    text = FORMATS.read_text()
    for name in PROMPT_FIELDS + ROLLOUT_FIELDS + JUDGE_FIELDS:
        assert f"`{name}`" in text.split("## Prompt records", 1)[1], name


def test_field_lists_come_from_the_typeddicts():
    assert set(JudgedRow.__annotations__) == set(ITEM_FIELDS + PROMPT_FIELDS + ROLLOUT_FIELDS + JUDGE_FIELDS)
    assert len(set(ITEM_FIELDS + PROMPT_FIELDS + ROLLOUT_FIELDS + JUDGE_FIELDS)) == len(
        JudgedRow.__annotations__
    )
    assert records.STAGE_FIELDS["judge"] is JUDGE_FIELDS


def test_rerunning_a_stage_drops_its_fields_and_later_ones_only():
    row = {name: 1 for name in JudgedRow.__annotations__} | {"source": "mine"}
    rejudged = without_stage(row, "judge")
    assert set(rejudged) == set(ITEM_FIELDS + PROMPT_FIELDS + ROLLOUT_FIELDS) | {"source"}
    rerolled = without_stage(row, "rollout")
    assert set(rerolled) == set(ITEM_FIELDS + PROMPT_FIELDS) | {"source"}
    assert set(without_stage(row, "prompt")) == set(ITEM_FIELDS) | {"source"}


def test_one_natural_sort_key():
    """The viewer sorts by records.natural_key: item 2 before item 10, and a non-ASCII digit
    (`int("²")` raises) is text, not a crash."""
    assert natural is natural_key
    ids = ["item10", "item2", "item1²", "item1", "b", "a3"]
    assert sorted(ids, key=natural) == ["a3", "b", "item1", "item1²", "item2", "item10"]
    assert natural("item1²") == [(1, 0, "item", ""), (0, 1, "1", "1"), (1, 0, "²", "")]
    big = ["9" * 5000, "1" + "0" * 4999, "445", "0445", "44"]  # never through int(): 5,000 digits
    assert sorted(big, key=natural) == ["44", "0445", "445", "1" + "0" * 4999, "9" * 5000]


def test_run_must_be_a_non_negative_integer(tmp_path):
    """Issue 33: `run: -1` was accepted; it costs its line with a clear message, file and line."""
    from support.commands import bv_inproc

    rows = [
        {"id": "1", "run": 0, "hard": 1, "decided_by": "rules"},
        {"id": "2", "run": -1, "hard": 1, "decided_by": "rules"},
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = bv_inproc(f"bv report --format json {path}")
    assert f"{path}:2" in result.stderr and "'run' must be a non-negative integer, not -1" in result.stderr
    assert json.loads(result.stdout)["inputs"][0]["overall"]["n"] == 1 and result.returncode == 1
