"""bv report on a folder of runs (bv/reporting/runs.py): one row per run, fitted to 80 columns,
a run whose bv eval is writing said to be running, a stopped one skipped from the comparisons."""

from __future__ import annotations

import json
import os
import signal
import subprocess

from support.commands import BIN, bv_inproc, sh
from support.evaluating import SECRET
from support.fakeopenai import Reply
from support.waiting import wait_for

SKILLS = {
    "gpt-4o-mini-with-the-counting-hint": "Count the objects twice before answering.",
    "gpt-4o-mini-with-the-symmetry-hint": "Check whether the figure is symmetric.",
    "gpt-4o-mini-seed": "Look carefully.",
    "gpt-4o-mini-no-skill": "",
}


def _finished_runs(sample_dir, tmp_path):
    for name, text in SKILLS.items():
        skill = ""
        if text:
            (tmp_path / f"{name}.md").write_text(text)
            skill = f"--skill {tmp_path / name}.md"
        done = bv_inproc(
            f"bv eval {sample_dir}/meta_data.jsonl --backend chance {skill} --repeats 2 -q --no-cache"
            f" -o {tmp_path / 'runs' / name}"
        )
        assert done.returncode == 0, done.stderr


def test_a_folder_of_runs_is_one_row_per_run_in_80_columns_and_says_which_is_running(
    sample_dir, tmp_path, server
):
    _finished_runs(sample_dir, tmp_path)
    server.responder = lambda seen: Reply(content="\\boxed{A}", delay=60)  # the fifth run sits in its rollout
    running = tmp_path / "runs" / "gpt-4o-the-slow-one"
    command = (
        f"{BIN}/bv eval {sample_dir}/meta_data.jsonl -m gpt-4o --base-url {server.base_url}"
        f" --api-key {SECRET} --mode rules --no-cache --retries 0 -q -o {running}"
    )
    writer = subprocess.Popen(command.split(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: "rollout" in _stage(running))
        shown = sh(f"bv report {tmp_path / 'runs'}", env={"COLUMNS": ""})
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert all(len(line) <= 80 for line in lines), shown.stdout
        rows = lines[2 : lines.index("")]  # under the header and its rule
        assert len(rows) == 5, shown.stdout
        assert "slow-one" in rows[-1] and rows[-1].endswith("running")
        assert " 12 " in rows[-1]  # its items, from its summary.json so far
        assert sum(row.endswith("finished") for row in rows[:4]) == 4
        skill_hash = json.loads((tmp_path / "runs/gpt-4o-mini-seed/config.json").read_text())["skill_sha256"]
        assert any(skill_hash[:8] in row for row in rows)
        assert "gpt-4o-the-slow-one: running (in its rollout), not compared" in shown.stdout
        assert "its bv eval is writing into it now" in shown.stderr
        assert "re-run its bv eval" not in shown.stderr + shown.stdout
        assert shown.stdout.count(" vs ") + shown.stdout.count(" than ") >= 3  # the verdicts, wrapped
    finally:
        writer.send_signal(signal.SIGTERM)
        writer.wait(timeout=30)
    stopped = sh(f"bv report {tmp_path / 'runs'}/* --sort name --format json")
    data = json.loads(stopped.stdout)
    states = {run["name"]: run["state"] for run in data["runs"]}
    assert states.pop("gpt-4o-the-slow-one") == "stopped" and set(states.values()) == {"finished"}
    assert "re-run its bv eval to finish it" in stopped.stderr
    assert [run["name"] for run in data["runs"]][:4] == sorted(SKILLS)


def _stage(folder) -> str:
    try:
        return json.loads((folder / "summary.json").read_text())["stage"]
    except (OSError, ValueError):
        return ""


def test_a_finished_run_s_summary_json_holds_what_the_table_reads(sample_dir, tmp_path):
    _finished_runs(sample_dir, tmp_path)
    folder = tmp_path / "runs" / "gpt-4o-mini-seed"
    summary = json.loads((folder / "summary.json").read_text())
    config = json.loads((folder / "config.json").read_text())
    assert summary["finished"] and summary["items"] == 12 and summary["runs"] == 2 and summary["rows"] == 24
    assert (
        summary["skill"]["sha256"] == config["skill_sha256"]
        and summary["items_sha256"] == config["items_sha256"]
    )
    assert (
        summary["ci95"][0] <= summary["accuracy"] <= summary["ci95"][1] and "interval" in summary["interval"]
    )
    os.remove(folder / "summary.json")  # a run folder of an older bv: the table reads its rows
    both = bv_inproc(f"bv report {tmp_path / 'runs'} --format json")
    runs = {run["name"]: run for run in json.loads(both.stdout)["runs"]}
    assert runs["gpt-4o-mini-seed"]["accuracy"] == summary["accuracy"]
    assert runs["gpt-4o-mini-seed"]["skill"] == f"gpt-4o-mini-seed@{config['skill_sha256'][:8]}"


def test_the_api_gives_the_table_a_notebook_shows(sample_dir, tmp_path):
    """bv.api.runs: the table `bv report runs/` prints, shown in a notebook as that text (escaped),
    one record per run; bad input is BadConfig in words."""
    import pytest

    from bv import api
    from bv.core.errors import BadConfig

    _finished_runs(sample_dir, tmp_path)
    folder = tmp_path / "runs"
    table = api.runs(folder)
    assert [r["name"] for r in table.records()] == [r.name for r in table.rows] and len(table.rows) == 4
    assert all(r["state"] == "finished" for r in table.records())
    shown = bv_inproc(f"bv report {folder}").stdout
    assert table.render(width=80).splitlines()[0] == shown.splitlines()[0]  # the header, as printed
    assert table._repr_html_().startswith("<pre") and "<script" not in table._repr_html_()
    assert api.runs(sorted(folder.iterdir())).records() == table.records()
    with pytest.raises(BadConfig, match="no bv eval run folder"):
        api.runs(tmp_path)
    with pytest.raises(BadConfig, match="`sort` is one of"):
        api.runs(folder, sort="speed")
