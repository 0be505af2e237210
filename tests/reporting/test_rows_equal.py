"""Fast paths give what the plain ones gave: bv report (parsed by orjson, streamed) equals a
summary of the same rows read with json.loads, whole, sharded and merged, or piped; bv judge's
rows (written by orjson) are the values json.dumps wrote; and the numbers orjson would let
through are refused where bv reads them (docs/safety.md)."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.commands import sh

from bv.core.jsonl import Problems, _parse_stream, fitting_bytes, fitting_line
from bv.reporting.report import summarize
from bv.stages.judge import judge_by_rules, judge_version, run_judge
from bv.stages.judge_config import JudgeConfig


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict:
    """Rollout rows and judged rows made by bv itself (3 runs of 30 synthetic items)."""
    folder = tmp_path_factory.mktemp("rows")
    assert sh(f"bv synth --n 30 --seed 3 --out {folder}/data").returncode == 0
    rollout = folder / "rollout.jsonl"
    made = sh(
        f"bv prompt {folder}/data/meta_data.jsonl | bv rollout --backend chance --seed 1 --repeats 3"
        f" --quiet --no-cache > {rollout}"
    )
    assert made.returncode == 0, made.stderr
    judged = folder / "judged.jsonl"
    result = sh(f"bv judge --mode rules --quiet {rollout} > {judged}")
    assert result.returncode == 0, result.stderr
    return {"folder": folder, "rollout": rollout, "judged": judged}


def figures(report: dict) -> dict:
    """A report's figures without its name."""
    return {k: v for k, v in report.items() if k != "name"}


def test_judged_rows_are_what_json_dumps_wrote(made):
    """Each row bv judge wrote is, value for value, the row judge_by_rules makes in-process."""
    version = judge_version()
    rollout = [json.loads(line) for line in made["rollout"].read_text().splitlines()]
    written = made["judged"].read_text().splitlines()
    assert len(written) == len(rollout) == 90
    for line, record in zip(written, rollout, strict=True):
        expected = json.loads(json.dumps(judge_by_rules(record, version), ensure_ascii=False))
        assert json.loads(line) == expected


def test_judging_in_place_writes_the_rows_a_copy_would(made):
    """`run_judge(in_place=True)` (bv optimize's re-scoring) judges into the records: the same
    rows, fields and order as the copies bv judge wrote, a rejudged row's old judge fields
    dropped and written again at the end, and a failed rollout's row not judged."""
    config = JudgeConfig(mode="rules", quiet=True)
    rollout = [json.loads(line) for line in made["rollout"].read_text().splitlines()]
    rollout[1] = {**rollout[1], "response": None, "error": "HTTP 500"}
    copied: list = []
    run_judge([dict(row) for row in rollout], config, copied.append)
    old = {"judge_reason": "stale", "hard": 1, "judge_usage": {"prompt_tokens": 1}}
    stale = [{**old, **row} for row in rollout]  # judge fields first: the copy writes them last
    for source in (rollout, stale):
        records = [dict(row) for row in source]
        out: list = []
        outcome = run_judge(records, config, out.append, in_place=True)
        assert all(a is b for a, b in zip(out, records, strict=True))
        assert [list(row.items()) for row in out] == [list(row.items()) for row in copied]
        assert (outcome.rows, outcome.carried) == (90, 1)
    assert copied[1]["decided_by"] == "rollout_error" and "judge_usage" not in copied[0]


def test_report_equals_a_json_loads_summary_whole_sharded_merged_and_piped(made):
    folder, judged = made["folder"], made["judged"]
    rows = [json.loads(line) for line in judged.read_text().splitlines()]
    plain = figures(summarize(rows))
    lines = judged.read_text().splitlines(keepends=True)
    (folder / "s0.jsonl").write_text("".join(lines[::2]))
    (folder / "s1.jsonl").write_text("".join(lines[1::2]))
    assert sh(f"cd {folder} && bv merge s1.jsonl s0.jsonl -o merged.jsonl").returncode == 0
    reports = [
        sh(f"bv report --format json {judged}"),
        sh(f"bv report --format json {folder}/merged.jsonl"),
        sh(f"cat {folder}/s1.jsonl {folder}/s0.jsonl | bv report --format json"),
    ]
    for result in reports:
        assert result.returncode == 0, result.stderr
        assert figures(json.loads(result.stdout)["inputs"][0]) == plain


def test_a_run_beyond_2_63_is_refused_by_report(tmp_path):
    """orjson reads 2^63 as an int and 10^30 as a float; report refuses both, by line, as every
    other reader does (the fast reader reads what the plain one does)."""
    good = {"id": "1", "run": 0, "hard": 1, "type": "T", "subtype": "S", "ans_type": "blank"}
    lines = [json.dumps(good)]
    for item, run in (("2", "9223372036854775808"), ("3", "1" + "0" * 30)):
        lines.append(json.dumps({**good, "id": item}).replace('"run": 0', f'"run": {run}'))
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = sh(f"bv report --format json {path}")
    assert result.returncode == 1
    assert f"{path}:2: a number too large for bv" in result.stderr
    assert f"{path}:3: a number too large for bv" in result.stderr
    assert json.loads(result.stdout)["inputs"][0]["overall"]["rows"] == 1


def test_what_orjson_refuses_reads_as_before():
    """Lines orjson refuses go the json way: the same values, warnings and messages."""
    lines = [
        b'{"id": "a", "text": "\\ud800 lone"}\n',  # replaced, with a warning
        b'{"id": "b", "x": NaN}\n',
        b'{"id": "c", "x": 1e999}\n',
        b"[1, 2]\n",
        b"\n",
        b'{"id": "d", "x": "\\ud83d\\ude00"}\n',  # a pair: one character
        b'{"id": "e"',  # torn
    ]
    out = {}
    for fast in (False, True):
        problems = Problems(stream=io.StringIO())
        values = [v for _, v in _parse_stream(io.BytesIO(b"".join(lines)), "<t>", None, problems, fast)]
        out[fast] = (values, problems.count, problems.stream.getvalue())
    assert out[True] == out[False]
    values, count, messages = out[True]
    assert values[1] == [1, 2]  # not an object: read_records refuses it, as before
    assert [values[0]["id"], values[2]["id"]] == ["a", "d"] and values[2]["x"] == "\U0001f600"
    assert values[0]["text"] == "\ufffd lone"
    assert count == 3 and "lone surrogate" in messages and "a number too large for bv" in messages
    assert "torn last line" in messages


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, database=None)
@given(st.dictionaries(st.text(max_size=5), JSON, max_size=5))
def test_orjson_lines_hold_what_json_lines_held(record):
    """fitting_bytes (orjson, falling back to fitting_line for what it refuses: lone surrogates,
    integers beyond 64 bits) writes the value fitting_line writes, read back by bv's reader."""
    line = fitting_bytes(record)
    assert json.loads(line) == json.loads(fitting_line(record))
    problems = Problems(stream=io.StringIO())
    read = [v for _, v in _parse_stream(io.BytesIO(line + b"\n"), "<t>", None, problems)]
    if problems.count == 0:  # an integer beyond ±2^63 is written as it is, and refused when read
        assert read == [json.loads(fitting_line(record))]
