"""The command line as users meet it: help, streams, exit codes, merge and report formats."""

from __future__ import annotations

import csv
import io
import json
import shutil

import pytest
from support.commands import bv_inproc, jsonl, sh

COMMANDS = ["prompt", "rollout", "judge", "merge", "report", "synth", "import", "cache"]


def test_help_lists_every_stage():
    result = bv_inproc("bv --help")
    assert result.returncode == 0
    for command in COMMANDS:
        assert f"  {command} " in result.stdout


def _every_command() -> list[str]:
    """Every command bv lists, and each subcommand of a group (`cache list`, ...)."""
    import importlib

    import click

    from bv.cli.app import COMMANDS as LISTED

    names = []
    for name, (where, _) in LISTED.items():
        module, _, attribute = where.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        names.append(name)
        if isinstance(command, click.Group):
            names += [f"{name} {sub}" for sub in command.commands]
    return names


@pytest.mark.parametrize("command", _every_command())
def test_every_help_shows_an_example(command):
    """The README's promise: `bv COMMAND --help` shows every option with an example."""
    result = bv_inproc(f"bv {command} --help")
    assert result.returncode == 0
    assert "Example" in result.stdout and f"bv {command}" in result.stdout


def test_prompt_into_head_exits_quietly(sample_dir):
    result = sh(f"bv prompt {sample_dir}/meta_data.jsonl | head -1")
    assert result.returncode == 0 and result.stderr == ""
    assert len(jsonl(result.stdout)) == 1


def test_stdout_is_only_jsonl(sample_dir):
    result = sh(f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --backend chance | bv judge")
    assert result.returncode == 0
    assert all(line.startswith("{") for line in result.stdout.splitlines())
    assert "bv rollout:" in result.stderr  # the summary went to stderr


def test_bad_line_named_by_file_and_line_and_exit_1(sample_dir, tmp_path):
    lines = (sample_dir / "meta_data.jsonl").read_text().splitlines()
    bad = tmp_path / "items.jsonl"
    bad.write_text("\n".join([lines[0], "{not json", lines[1], "[1,2]"]) + "\n")
    shutil.copytree(sample_dir / "images", tmp_path / "images")
    result = bv_inproc(f"bv prompt {bad}")
    assert result.returncode == 1
    assert f"{bad}:2: invalid JSON" in result.stderr and f"{bad}:4: expected a JSON object" in result.stderr
    assert len(jsonl(result.stdout)) == 2  # the good lines still came through
    assert "Traceback" not in result.stderr
    assert bv_inproc(f"bv prompt --skip-bad {bad}").returncode == 0


def rows_for(run: int, ids: list[str], hard: int, model: str = "m") -> list[dict]:
    return [
        {
            "id": i,
            "run": run,
            "hard": hard,
            "model": model,
            "type": "T",
            "subtype": "S",
            "ans_type": "blank",
            "choices": [],
            "answer": ["1"],
            "decided_by": "rules",
            "error": None,
        }
        for i in ids
    ]


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_merge_later_file_wins_and_reports(tmp_path):
    write(tmp_path / "a.jsonl", rows_for(0, ["1", "2", "10"], 0))
    write(tmp_path / "b.jsonl", rows_for(0, ["2"], 1, model="other") + rows_for(1, ["1"], 1))
    result = bv_inproc(f"bv merge {tmp_path}/a.jsonl {tmp_path}/b.jsonl --sort")
    assert result.returncode == 0, result.stderr
    rows = jsonl(result.stdout)
    assert [(r["id"], r["run"]) for r in rows] == [("1", 0), ("1", 1), ("2", 0), ("10", 0)]
    assert next(r for r in rows if r["id"] == "2")["hard"] == 1
    assert "5 rows in, 4 rows out, 1 duplicates replaced" in result.stderr
    assert "model 'm' by one with 'other'" in result.stderr


def test_merge_output_file(tmp_path):
    write(tmp_path / "a.jsonl", rows_for(0, ["1", "2"], 1))
    result = bv_inproc(f"bv merge {tmp_path}/a.jsonl -o {tmp_path}/out/all.jsonl")
    assert result.returncode == 0 and result.stdout == ""
    assert len(jsonl((tmp_path / "out" / "all.jsonl").read_text())) == 2
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["all.jsonl"]  # no temp file left


def test_report_formats(tmp_path):
    write(tmp_path / "r.jsonl", rows_for(0, ["1", "2", "3", "4"], 1)[:3] + rows_for(0, ["4"], 0))
    as_json = json.loads(bv_inproc(f"bv report --format json {tmp_path}/r.jsonl").stdout)["inputs"][0]
    assert as_json["overall"]["n"] == 4 and as_json["overall"]["accuracy"] == 0.75
    assert as_json["by_type"]["T"]["correct"] == 3 and as_json["by_subtype"]["S"]["type"] == "T"
    markdown = bv_inproc(f"bv report --format markdown {tmp_path}/r.jsonl").stdout
    assert markdown.startswith("| group |") and "| **Overall** | 4 | 3/4 | 75.0 |" in markdown
    table = bv_inproc(f"bv report {tmp_path}/r.jsonl").stdout
    assert "Overall" in table and "75.0" in table
    rows = list(csv.DictReader(io.StringIO(bv_inproc(f"bv report --format csv {tmp_path}/r.jsonl").stdout)))
    overall = next(r for r in rows if r["level"] == "overall")
    assert overall["accuracy"] == "0.75" and overall["n"] == "4"


def test_report_side_by_side(tmp_path):
    write(tmp_path / "a.jsonl", rows_for(0, ["1", "2"], 0))
    write(tmp_path / "b.jsonl", rows_for(0, ["1", "2"], 1))
    report = json.loads(
        bv_inproc(f"bv report --format json v1={tmp_path}/a.jsonl v2={tmp_path}/b.jsonl").stdout
    )
    assert [s["name"] for s in report["inputs"]] == ["v1", "v2"]
    markdown = bv_inproc(f"bv report --format markdown v1={tmp_path}/a.jsonl v2={tmp_path}/b.jsonl").stdout
    assert "v1 %" in markdown and "v2 %" in markdown and "+100.0" in markdown


def test_shards_cover_every_item_once_and_merge_to_the_whole(sample_dir, tmp_path):
    base = f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --backend chance --repeats 2"
    for k in range(3):
        assert (
            bv_inproc(f"{base} --shard {k}/3 | bv judge --mode rules > {tmp_path}/part{k}.jsonl").returncode
            == 0
        )
    assert bv_inproc(f"{base} | bv judge --mode rules > {tmp_path}/whole.jsonl").returncode == 0
    parts = [jsonl((tmp_path / f"part{k}.jsonl").read_text()) for k in range(3)]
    assert all(parts)  # 12 items spread over 3 shards
    ids = [r["id"] for part in parts for r in part if r["run"] == 0]
    assert sorted(ids) == sorted({r["id"] for r in jsonl((tmp_path / "whole.jsonl").read_text())})
    merged = bv_inproc(
        f"bv merge {tmp_path}/part0.jsonl {tmp_path}/part1.jsonl {tmp_path}/part2.jsonl"
        " | bv report --format json"
    )
    whole = bv_inproc(f"bv report --format json {tmp_path}/whole.jsonl")
    assert (
        json.loads(merged.stdout)["inputs"][0]["overall"] == json.loads(whole.stdout)["inputs"][0]["overall"]
    )
    assert "is not K/N" in bv_inproc(f"{base} --shard 3/3").stderr


@pytest.mark.parametrize(
    "stage",
    ["bv rollout --backend chance --repeats 50", "bv judge --mode rules", "bv merge -", "bv import"],
)
def test_every_stage_ends_quietly_when_stdout_closes(sample_dir, tmp_path, stage):
    upstream = f"bv prompt {sample_dir}/meta_data.jsonl"
    if "judge" in stage or "merge" in stage:
        upstream += " | bv rollout --backend chance --repeats 50 --quiet"
    if "merge" in stage:
        upstream += " | bv judge --mode rules --quiet"
    command = (
        f"bv import {sample_dir}/meta_data.jsonl | head -1"
        if stage == "bv import"
        else (f"{upstream} | {stage} | head -1")
    )
    result = sh(command)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Error" not in result.stderr
    assert len(jsonl(result.stdout)) == 1


def test_merge_output_has_ordinary_permissions(tmp_path):
    write(tmp_path / "a.jsonl", rows_for(0, ["1"], 1))
    assert sh(f"umask 022 && bv merge {tmp_path}/a.jsonl -o {tmp_path}/all.jsonl").returncode == 0
    assert (tmp_path / "all.jsonl").stat().st_mode & 0o777 == 0o644


def test_lone_surrogates_survive_the_pipeline(tmp_path):
    row = rows_for(0, ["x"], 1)[0]
    (tmp_path / "r.jsonl").write_text(json.dumps({**row, "id": "\ud800-odd"}) + "\n")
    result = sh(f"bv merge {tmp_path}/r.jsonl | bv report --format json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["inputs"][0]["overall"]["n"] == 1


@pytest.mark.parametrize("fmt", ["table", "json", "markdown", "csv"])
def test_report_into_head_exits_quietly(tmp_path, fmt):
    rows = [
        {**row, "subtype": f"subtype {i}"}
        for i, row in enumerate(rows_for(0, [str(i) for i in range(1500)], 1))
    ]
    write(tmp_path / "r.jsonl", rows)  # a report bigger than a pipe's buffer, so the pipe surely breaks
    result = sh(f"bv report --format {fmt} {tmp_path}/r.jsonl | head -1")
    assert result.returncode == 0 and result.stderr == ""
