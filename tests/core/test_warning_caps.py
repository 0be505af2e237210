"""Warnings said once per row are capped as bad input lines are (bv.core.jsonl.Problems): the first
few of a kind, then one count at the end, so 100k rows never flood stderr."""

from __future__ import annotations

import io
import json
from pathlib import Path

from support.commands import bv_inproc

from bv.core.jsonl import SHOWN_ALIKE, Problems, Source
from bv.stages.artifacts import Artifacts
from bv.stages.merge import merge_rows


def judged(item: str, run: int = 0, **fields) -> dict:
    """A row as bv merge reads it (an id and a run; who made it): merge never looks further."""
    return {"id": item, "run": run, "model": "m", "judge_version": "j1", "hard": 1, **fields}


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_merge_conflicts_shown_a_few_times_then_counted(tmp_path):
    ids = [f"item-{chr(97 + i % 26)}{i}" for i in range(200)]  # ids of any shape: one kind all the same
    a = write(tmp_path / "a.jsonl", [judged(i) for i in ids])
    b = write(tmp_path / "b.jsonl", [judged(i, model="other") for i in ids])
    c = write(tmp_path / "c.jsonl", [judged(i, model="other", judge_version="j2") for i in ids[:50]])
    result = bv_inproc(f"bv merge {a} {b} {c}")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    models = [line for line in lines if "model 'm' by one with 'other'" in line]
    versions = [line for line in lines if "judge_version 'j1' by one with 'j2'" in line]
    assert len(models) == len(versions) == SHOWN_ALIKE + 1  # the first few, then one count
    first = f"bv: {b}:1: id item-a0 run 0: warning: replaces a row with model 'm' by one with 'other'"
    assert models[0] == first
    assert models[-1].startswith(f"bv: … and {200 - SHOWN_ALIKE} more lines like this")
    assert versions[-1].startswith(f"bv: … and {50 - SHOWN_ALIKE} more lines like this")
    assert "450 rows in, 200 rows out, 250 duplicates replaced" in result.stderr
    assert len(lines) == 2 * (SHOWN_ALIKE + 1) + 1
    assert len(result.stdout.splitlines()) == 200


def test_merge_conflicts_counted_even_when_bad_lines_stop_the_output(tmp_path):
    a = write(tmp_path / "a.jsonl", [judged(str(i)) for i in range(20)])
    b = write(tmp_path / "b.jsonl", [judged(str(i), model="other") for i in range(20)])
    with b.open("a") as stream:
        stream.write("not json\n")
    out = tmp_path / "all.jsonl"
    result = bv_inproc(f"bv merge {a} {b} -o {out}")
    assert result.returncode == 1 and not out.exists()
    assert f"bv: … and {20 - SHOWN_ALIKE} more lines like this" in result.stderr
    assert f"1 bad input line(s): {out} not written" in result.stderr


def test_merge_rows_warns_through_problems_and_lists_nothing():
    stream = io.StringIO()
    problems = Problems(stream=stream)
    rows = [(Source("a", n, None), judged("1", model=f"model-{n}")) for n in range(1, 101)]
    result = merge_rows(rows, problems)
    assert result.conflicts == [] and problems.count == 0  # warnings, not bad lines
    problems.finish()
    lines = stream.getvalue().splitlines()
    assert len(lines) == SHOWN_ALIKE + 1 and lines[-1].startswith(f"bv: … and {99 - SHOWN_ALIKE} more")
    first = "bv: a:2: id 1 run 0: warning: replaces a row with model 'model-1' by one with 'model-2'"
    assert lines[0] == first


def test_merge_rows_without_problems_lists_every_conflict():
    """bv.api.merge holds its rows in memory and warns through `warnings`: it gets the list."""
    rows = [(Source("input 1", 0, None), judged("1", model=f"m{n}")) for n in range(5)]
    assert len(merge_rows(rows).conflicts) == 4


def rolled(item: str, run: int) -> dict:
    return {
        "id": item,
        "run": run,
        "messages": [{"role": "user", "content": "q"}],
        "backend": "chance",
        "model": "chance",
        "params": {},
        "turns": [],
        "response": "\\boxed{A}",
        "error": None,
        "usage": {},
        "latency_s": 0.0,
    }


def test_unwritable_artifacts_shown_a_few_times_then_counted(tmp_path, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the folder should be")
    artifacts = Artifacts(blocker / "runs")
    for n in range(100):
        artifacts.write(rolled(f"id-{n}", n % 3), [])
    artifacts.finish()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == SHOWN_ALIKE + 1
    assert lines[0] == "bv: artifacts of id 'id-0' run 0: warning: not written: Not a directory"
    assert lines[-1] == (
        f"bv: … and {100 - SHOWN_ALIKE} more lines like this (warning: not written: Not a directory)"
    )


def test_written_artifacts_say_nothing(tmp_path, capsys):
    artifacts = Artifacts(tmp_path / "runs")
    artifacts.write(rolled("7", 1), [{"role": "user", "content": "q"}])
    artifacts.finish()
    assert capsys.readouterr().err == ""
    assert json.loads((tmp_path / "runs" / "1" / "7" / "conversation.json").read_text())["id"] == "7"


def test_bv_rollout_counts_the_artifacts_it_could_not_write(sample_dir, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl"
        f" | bv rollout --backend chance --repeats 4 --artifacts {blocker}/runs -q"
    )
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 48  # every row kept
    notes = [line for line in result.stderr.splitlines() if "not written" in line]
    assert len(notes) == SHOWN_ALIKE + 1 and f"… and {48 - SHOWN_ALIKE} more" in notes[-1]
