"""Typed readers: a misspelt key in the code that reads rows and report summaries is a type error
(mypy with the project's setup.cfg, its plugin included), and the report's types, its documentation
(docs/formats.md) and the report bv really writes have the same keys."""

from __future__ import annotations

import inspect
import json
import re
import textwrap
from types import UnionType
from typing import Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest
from support.paths import ROOT

from bv import api
from bv.core.records import JudgedRow
from bv.reporting import export, grid, html_items, html_parts, render, report, tally
from bv.reporting.report_types import (
    CalibrationSummary,
    Comparison,
    Difference,
    Figures,
    Paired,
    PanelSummary,
    Power,
    Provenance,
    ReportData,
    ShardsSeen,
    StartedAt,
    SubtypeFigures,
    Summary,
    UsageTotals,
)

# (reader, key as the reader spells it, a misspelling): a row reader and summary readers, with
# `.get("key")` (which mypy alone lets pass) and `["key"]`.
MISSPELT = [
    (html_items.verdict, 'row.get("decided_by")', 'row.get("decided_bye")'),
    (html_parts.input_facts, "summary.get('models')", "summary.get('modles')"),
    (html_parts.input_facts, "overall['judge_errors']", "overall['judge_erors']"),
    (grid.difference_text, "diff['diff']", "diff['dif']"),
    (tally.chance_of, 'row.get("ans_type")', 'row.get("anstype")'),
]
HEADER = """\
from bv.reporting.html_items import ShownRow
from bv.core.records import JudgedRow
from bv.reporting.report_types import Difference, Paired, Summary
from bv.reporting.grid import interval_text
from bv.core.stats import counted, points
"""


def test_a_misspelt_key_in_a_reader_is_a_type_error(tmp_path):
    mypy_api = pytest.importorskip("mypy.api", reason="mypy is installed with the test extra")
    parts, misspelt_lines = [HEADER], {}
    for number, (reader, right, wrong) in enumerate(MISSPELT):
        source = textwrap.dedent(inspect.getsource(reader))
        assert source.count(right) == 1, (reader.__name__, right)
        for variant, text in (("as_is", source), ("misspelt", source.replace(right, wrong))):
            first = sum(part.count("\n") for part in parts) + 2  # the line after the blank one
            parts.append("\n" + text.replace(f"def {reader.__name__}(", f"def {variant}_{number}(", 1))
            if variant == "misspelt":
                line = first + text.splitlines().index(next(x for x in text.splitlines() if wrong in x))
                misspelt_lines[line] = re.search(r"""["'](\w+)["']""", wrong).group(1)
    module = tmp_path / "readers.py"
    module.write_text("".join(parts))
    out, err, status = mypy_api.run(
        [
            "--config-file",
            str(ROOT / "setup.cfg"),
            "--cache-dir",
            str(tmp_path / "mypy_cache"),
            "--no-incremental",
            str(module),
        ]
    )
    errors: dict[int, str] = {}
    for m in re.finditer(r"^\S*readers\.py:(\d+): error: (.*)$", out, re.M):
        errors[int(m.group(1))] = errors.get(int(m.group(1)), "") + m.group(2)
    assert status == 1, out + err
    # Exactly the misspelt lines fail (the readers as they are type-check), each naming its key.
    assert set(errors) == set(misspelt_lines), out
    for line, key in misspelt_lines.items():
        assert f'has no key "{key}"' in errors[line], out


def _documented_report_fields() -> dict[str, tuple[str, ...]]:
    text = (ROOT / "docs" / "formats.md").read_text().split("## Reports", 1)[1]
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 2 and cells[0] not in ("object", "---"):
            rows[cells[0]] = tuple(re.findall(r"`(\w+)`", cells[1]))
    return rows


SUBTYPE_ONLY = tuple(SubtypeFigures.__annotations__)[len(Figures.__annotations__) :]


def test_formats_md_lists_exactly_the_report_fields():
    documented = _documented_report_fields()
    figures = "figures (`overall`, and each group of `by_type`, `by_subtype`, `by_ans_type`)"
    assert documented == {
        "report": tuple(ReportData.__annotations__),
        "summary (each of `inputs`)": tuple(Summary.__annotations__),
        figures: tuple(Figures.__annotations__),
        "figures of a subtype, besides": SUBTYPE_ONLY,
        "`provenance`": tuple(Provenance.__annotations__),
        "`started_at` (`null` when no row says)": tuple(StartedAt.__annotations__),
        "`shards` (when some row records a shard)": tuple(ShardsSeen.__annotations__),
        "`usage`": tuple(UsageTotals.__annotations__),
        "`judge_calibration` (with `--calibrate`)": tuple(CalibrationSummary.__annotations__),
        "`judge_panel` (when a panel of judges judged some row)": tuple(PanelSummary.__annotations__),
        "`comparison` (`null` for one input)": tuple(Comparison.__annotations__),
        "a difference (each group of a pair's `by_type`, `by_subtype`, `by_ans_type`)": tuple(
            Difference.__annotations__
        ),
        "a pair (each of `pairs`; `paired` for exactly two inputs), a difference and": tuple(
            Paired.__annotations__
        )[len(Difference.__annotations__) :],
        "each of `power`": tuple(Power.__annotations__),
    }


def _conforms(value, hint, where="report"):
    """`value` is of type `hint`: each TypedDict with exactly its keys (NotRequired ones may be
    absent), each value of its type, all the way down."""
    origin, args = get_origin(hint), get_args(hint)
    if is_typeddict(hint):
        assert isinstance(value, dict), where
        assert set(hint.__required_keys__) <= set(value) <= set(hint.__annotations__), where
        hints = get_type_hints(hint)
        for key, inner in value.items():
            _conforms(inner, hints[key], f"{where}.{key}")
    elif origin in (Union, UnionType):
        if value is None:
            assert type(None) in args, where
        else:
            (kind,) = [a for a in args if a is not type(None)]
            _conforms(value, kind, where)
    elif origin is list:
        assert isinstance(value, list), where
        for index, inner in enumerate(value):
            _conforms(inner, args[0], f"{where}[{index}]")
    elif origin is dict:
        assert isinstance(value, dict), where
        for key, inner in value.items():
            _conforms(inner, args[1], f"{where}[{key!r}]")
    else:
        kinds = (int, float) if hint is float else hint
        assert isinstance(value, kinds) and (hint is bool or not isinstance(value, bool)), (where, value)


def test_a_real_report_has_exactly_the_typed_keys(sample_dir):
    """What bv.reporting.tally and bv.reporting.report build (one input; two, which adds the
    paired test) is the
    documented type, keys and values."""
    items = [json.loads(line) for line in (sample_dir / "meta_data.jsonl").read_text().splitlines()]
    prompts = list(api.prompt(items, image_root=sample_dir))
    a = api.judge(api.rollout(prompts, backend="chance", repeats=2, seed=1), mode="rules")
    b = api.judge(api.rollout(prompts[:-1], backend="chance", seed=2), mode="rules")
    for data in (api.report(a).data, api.report({"a": a, "b": b}).data):
        _conforms(data, ReportData)
    assert data["comparison"] is not None and set(data["comparison"]["paired"]) == set(Paired.__annotations__)


def test_keys_read_by_name_at_run_time_are_typed_keys():
    """The fields the report, the viewer, the CSV export and the CSV report pick by a name held in
    a string (which the type checker cannot follow)."""
    row, card = get_type_hints(JudgedRow), get_type_hints(html_items.CardRow)
    assert {name for _, name in tally.GROUPS} | set(tally._SEEN) <= set(row)
    assert {group for group, _ in tally.GROUPS} <= set(Summary.__annotations__)
    assert set(report._MADE_BY_FIELDS) | set(report.BY_FIELDS) - {"prompts"} <= set(row)
    assert set(card) <= set(row)
    assert {name: card[name] for name in card} == {name: row[name] for name in card}
    assert set(html_items.CARD_FIELDS + html_items.LONG_FIELDS + ("images",)) == set(card)
    assert set(export.CSV_COLUMNS) - {"gold"} <= set(row)
    assert set(render.FIGURES) - {"ci_low", "ci_high", "accuracy_over", "complete", "items_per_run"} <= set(
        Figures.__annotations__
    )
    assert set(render.DIFFERENCE) - {"vs", "diff_low", "diff_high"} <= set(Difference.__annotations__)


def test_formats_md_lists_exactly_the_run_summary_fields():
    """summary.json's table in docs/formats.md names exactly RunSummary's fields, in its order."""
    from bv.core.run_summary import RunSummary

    text = (ROOT / "docs" / "formats.md").read_text().split("## A run's summary", 1)[1].split("\n## ", 1)[0]
    named = [
        name
        for line in text.splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`(\w+)`", line.split("|")[1])
    ]
    assert tuple(named) == tuple(RunSummary.__annotations__)
