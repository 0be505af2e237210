"""The smaller hostile cases of issue 25: base URLs with a query or fragment, skills and templates
that are FIFOs, devices or huge, and an error reply with a huge body."""

from __future__ import annotations

import os

import pytest
from support.commands import bv_inproc, jsonl, sh
from support.fakeopenai import Reply


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/v1?x=1",
        "http://127.0.0.1:9/v1#frag",
        "http://127.0.0.1:9/v1?",
        "https://h/v1?key=s3cr3tvalue9",
    ],
)
@pytest.mark.parametrize("option", ["--base-url", "--judge-base-url"])
def test_a_base_url_with_a_query_or_fragment_is_refused_at_start(tmp_path, url, option):
    (tmp_path / "p.jsonl").write_text("")
    command = (
        f"bv rollout -m m --base-url '{url}' {tmp_path / 'p.jsonl'}"
        if option == "--base-url"
        else f"bv judge --judge-model j --judge-base-url '{url}' {tmp_path / 'p.jsonl'}"
    )
    result = sh(command)
    assert result.returncode == 2, result.stderr
    assert "has a query or fragment" in result.stderr and option in result.stderr
    assert "s3cr3tvalue9" not in result.stderr  # a query value may be a key


def _skill_cases(tmp_path):
    fifo = tmp_path / "skill.md"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.md"
    with open(huge, "wb") as f:
        f.truncate(300 * 1024 * 1024)  # sparse: 300 MB that take no disk
    return {
        "fifo": (fifo, "not a regular file"),
        "device": ("/dev/zero", "not a regular file"),  # only read, never written
        "huge": (huge, "over 1024 KiB"),
    }


@pytest.mark.parametrize("kind", ["fifo", "device", "huge"])
def test_a_skill_that_is_not_a_small_text_file_is_refused_plainly(sample_dir, tmp_path, kind):
    path, why = _skill_cases(tmp_path)[kind]
    result = sh(f"bv prompt {sample_dir}/meta_data.jsonl --skill {path}", timeout=30)
    # a bad value of --skill exits 2 (docs/exit-status.md), as a bad template does (issue 34)
    assert result.returncode == 2 and result.stdout == ""
    assert f"--skill {path}: " in result.stderr and why in result.stderr, result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("kind", ["fifo", "huge"])
def test_a_template_that_is_not_a_small_text_file_is_refused_plainly(tmp_path, kind):
    folder = tmp_path / "prompts"
    folder.mkdir()
    path = folder / "judge.md"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(b"x" * (300 * 1024))
    result = sh(f"bv templates --prompts {folder}", timeout=30)
    assert result.returncode == 2
    assert ("not a regular file" if kind == "fifo" else "over 256 KiB") in result.stderr
    assert "not one of bv's templates" not in result.stderr and "internal error" not in result.stderr


@pytest.fixture
def one_prompt(sample_dir, tmp_path):
    path = tmp_path / "prompts.jsonl"
    assert bv_inproc(f"bv prompt {sample_dir}/meta_data.jsonl --limit 1 > {path}").returncode == 0
    return path


def test_a_500_with_a_huge_body_is_retried_and_shows_its_status(one_prompt, server):
    huge = Reply(status=500, body=b"x" * (9 * 1024 * 1024))
    replies = iter([huge, huge, Reply(content="\\boxed{A}")])
    server.responder = lambda seen: next(replies)
    command = f"bv rollout --base-url {server.base_url} -m m --no-cache --retries 3 {one_prompt}"
    result = bv_inproc(command, env={"BV_RETRY_BASE_S": "0.01"})
    assert result.returncode == 0, result.stderr
    assert jsonl(result.stdout)[0]["error"] is None and len(server.seen) == 3
    server.responder = lambda seen: huge
    result = bv_inproc(command.replace("--retries 3", "--retries 1"), env={"BV_RETRY_BASE_S": "0.01"})
    assert result.returncode == 1
    assert "HTTP 500" in jsonl(result.stdout)[0]["error"]


def judged_row(i: int, subtype: str = "S", response: str = "\\boxed{1}") -> dict:
    return {
        "id": str(i),
        "run": 0,
        "question": "q",
        "ans_type": "blank",
        "choices": [],
        "answer": ["1"],
        "type": "T",
        "subtype": subtype,
        "model": "m",
        "response": response,
        "error": None,
        "extracted": "1",
        "hard": 1,
        "decided_by": "rules",
    }


def test_the_report_table_in_a_file_is_never_cut(tmp_path):
    import json

    long_name = "Subtype " + "with a very long name " * 15 + "END"
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(judged_row(i, long_name if i % 2 else "S")) + "\n" for i in range(6)))
    out = tmp_path / "report.txt"
    result = sh(f"bv report {rows} > {out}")
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert long_name in text and "…" not in text


def test_an_official_export_holds_ids_not_rows_in_memory(tmp_path):
    """1,000 rows of 100 kB: the export's peak memory stays far below the rows' size."""
    import json
    import re
    import subprocess
    import sys

    rows = tmp_path / "rows.jsonl"
    with open(rows, "w") as f:
        for i in range(1000):
            f.write(json.dumps(judged_row(i, response="x" * 100_000 + "\\boxed{1}")) + "\n")
    code = (
        "import re, sys\nfrom bv.cli.app import main\n"
        f"sys.argv = ['bv', 'export', {str(rows)!r}, '--format', 'official',"
        f" '--out', {str(tmp_path / 'off')!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) // 1024)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (tmp_path / "off" / "model_results_run_1.json").stat().st_size > 100_000_000, result.stderr
    peak_mb = int(result.stdout.strip().splitlines()[-1])
    assert peak_mb < 80, f"{peak_mb} MB of memory to export 100 MB of rows"
    assert re.search(r"wrote .*model_results_run_1.json \(1000 rows\)", result.stderr)
