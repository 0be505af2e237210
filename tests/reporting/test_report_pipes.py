"""A reader that leaves early (`| head`) never changes what a command that reads its whole input
first (report, merge, export) says or how it exits: quiet on the broken pipe, and still 1 when
rows failed or lines were bad, through real pipes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.commands import BIN, sh

OUTPUTS = ["--html -", "--format json", "--format table", "--format markdown", "--format csv"]
# (with --html, images from outside --image-root are refused and counted as the page is written:
# a page cut short cannot say how many, so here every image is inside it)


@pytest.fixture(scope="module")
def results(sample_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(judged rows that all succeeded, the same rows with two rollout errors), 3 runs of the sample."""
    folder = tmp_path_factory.mktemp("report-pipes")
    ok, failed = folder / "ok.jsonl", folder / "failed.jsonl"
    made = sh(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --backend chance --repeats 3 --quiet"
        f" | bv judge --mode rules --quiet > {ok}"
    )
    assert made.returncode == 0, made.stderr
    rows = [json.loads(line) for line in ok.read_text().splitlines()]
    for row in rows[:2]:
        row.update(error="HTTP 500 from the server", response=None)
    failed.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return ok, failed


def run_with_stdout_closed(command: str) -> subprocess.CompletedProcess:
    """Run a command whose stdout is a pipe nobody reads any more: its first write breaks the pipe."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            ["bash", "-c", command],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"},
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("output", OUTPUTS)
def test_a_report_of_failed_rows_exits_1_when_its_reader_leaves(sample_dir, results, output):
    _, failed = results
    output += f" --image-root {sample_dir}"
    kept = sh(f"bv report {failed} {output} > /dev/null")
    assert kept.returncode == 1 and "2 rollout error(s)" in kept.stderr
    left = run_with_stdout_closed(f"bv report {failed} {output}")
    assert left.returncode == 1, left.stderr
    assert left.stderr == kept.stderr  # the same warnings, and nothing about the pipe
    head = sh(f"bv report {failed} {output} | head -c 10")  # pipefail: bv's own status
    assert head.returncode == 1 and len(head.stdout) == 10
    assert head.stderr == kept.stderr


@pytest.mark.parametrize("output", OUTPUTS)
def test_a_report_of_good_rows_exits_0_quietly_when_its_reader_leaves(results, output):
    ok, _ = results
    left = run_with_stdout_closed(f"bv report {ok} {output}")
    assert left.returncode == 0 and left.stderr == ""


def test_the_html_page_still_written_when_the_reports_reader_leaves(results, tmp_path):
    _, failed = results
    page = tmp_path / "report.html"
    left = run_with_stdout_closed(f"bv report {failed} --html {page}")
    assert left.returncode == 1 and f"wrote {page}" in left.stderr
    assert page.read_text().rstrip().endswith("</html>")


def test_fail_under_holds_when_the_reader_leaves(results):
    ok, _ = results
    left = run_with_stdout_closed(f"bv report {ok} --fail-under 1")
    assert left.returncode == 1 and "below" in left.stderr


@pytest.mark.parametrize("command", ["bv merge {rows}", "bv export {rows} --format csv"])
def test_bad_lines_still_exit_1_when_the_reader_leaves(results, tmp_path, command):
    ok, _ = results
    rows = tmp_path / "rows.jsonl"
    rows.write_text(ok.read_text() + "not json\n")
    left = run_with_stdout_closed(command.format(rows=rows))
    assert left.returncode == 1, left.stderr
    assert f"{rows}:{len(ok.read_text().splitlines()) + 1}: invalid JSON" in left.stderr
    assert "Traceback" not in left.stderr and "Broken pipe" not in left.stderr
