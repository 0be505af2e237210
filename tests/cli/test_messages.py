"""What a new user reads on stderr: no silent waits, capped repeats, plain words, one judge notice."""

from __future__ import annotations

import json
import re

from support.commands import BIN, bv_inproc, jsonl
from support.fakeopenai import Reply
from support.judging import judge_cmd, rollout_rows
from support.terminal import on_terminal


def test_a_stage_reading_a_terminal_says_so_once(sample_dir, tmp_path):
    items = (sample_dir / "meta_data.jsonl").read_bytes().splitlines()[0]
    status, shown, out = on_terminal(
        [BIN / "bv", "prompt", "--image-root", sample_dir], input_bytes=items + b"\n", stdout_terminal=False
    )
    assert status == 0, shown
    assert shown.count("bv: reading items from stdin; pipe a file or Ctrl-D") == 1, shown
    assert len(jsonl(out.decode())) == 1
    status, shown, _ = on_terminal([BIN / "bv", "rollout", "--backend", "chance"], input_bytes=b"")
    assert status == 0 and shown.count("reading prompt records from stdin; pipe a file or Ctrl-D") == 1
    status, shown, _ = on_terminal([BIN / "bv", "judge", "-q"], input_bytes=b"")
    assert status == 0 and shown == "", shown  # -q: nothing at all
    # A pipe or a file on stdin: nothing to say.
    piped = bv_inproc(
        f"bv prompt < {sample_dir}/meta_data.jsonl --image-root {sample_dir} | bv rollout --backend chance"
    )
    assert piped.returncode == 0 and "reading" not in piped.stderr


def test_rollout_counts_a_file_on_stdin_and_shows_an_eta(sample_dir, server, tmp_path):
    server.responder = lambda seen: Reply(content="\\boxed{A}", delay=0.25)
    prompts = tmp_path / "p.jsonl"
    assert bv_inproc(f"bv prompt {sample_dir}/meta_data.jsonl > {prompts}").returncode == 0
    result = bv_inproc(
        f"bv rollout --base-url {server.base_url} -m m -j 4 --no-cache < {prompts}",
        env={"BV_PROGRESS_EVERY_S": "0.2"},
    )
    lines = [line for line in result.stderr.splitlines() if line.startswith("bv rollout:")]
    assert result.returncode == 0 and any("/12 done, ETA " in line for line in lines), lines
    # On a terminal the bar has the total too.
    status, shown, _ = on_terminal(
        [BIN / "bv", "rollout", "--base-url", server.base_url, "-m", "m", "-j", "2", "--no-cache"],
        80,
        stdin_terminal=False,
        stdin=prompts.open("rb"),
        stdout_terminal=False,
    )
    assert status == 0 and "ETA" in shown and re.search(r"\d+/12 0:00:\d\d ETA", shown), shown  # uncut at 80


def test_repeated_messages_are_capped_and_items_get_one_hint(sample_dir):
    result = bv_inproc(f"bv rollout --backend chance {sample_dir}/meta_data.jsonl")
    per_line = [line for line in result.stderr.splitlines() if "meta_data.jsonl:" in line]
    assert result.returncode == 1 and len(per_line) == 3, result.stderr
    assert "bv: … and 9 more lines like this (not a prompt record" in result.stderr
    assert result.stderr.count("run them through bv prompt first") == 1
    assert "bv rollout: 12 bad input lines" in result.stderr


def test_a_missing_file_is_not_a_bad_line(tmp_path):
    result = bv_inproc(f"bv judge --mode rules {tmp_path}/nope.jsonl")
    assert result.returncode == 1
    assert f"bv: error: {tmp_path}/nope.jsonl: file not found" in result.stderr
    assert "bad input line" not in result.stderr


def test_judge_without_a_model_says_so_once_and_how(tmp_path):
    path = rollout_rows(tmp_path, ["(2,3)", "row 2 column 3", "somewhere"])
    result = bv_inproc(f"bv judge {path}")
    notices = [line for line in result.stderr.splitlines() if "no LLM judge is configured" in line]
    assert result.returncode == 0 and len(notices) == 1 and "--judge-model" in notices[0]
    assert "bv judge: 4 rows, 2 by rules, 2 undecided, 0 judge errors" in result.stderr
    assert bv_inproc(f"bv judge -q {path}").stderr == ""


def test_judge_progress_says_who_decided(server, tmp_path):
    path = rollout_rows(tmp_path, ["(2,3)", "row 2 column 3", "somewhere"])
    server.responder = lambda seen: Reply(content="True" if "row 2" in json.dumps(seen.body) else "yes?")
    result = bv_inproc(judge_cmd(server, path))
    assert "bv judge: 4 rows, 2 by rules, 1 by LLM, 1 judge error, 0 cache hits, 2 requests" in result.stderr


def test_plurals_and_errored_rows_are_not_unboxed(tmp_path):
    base = {"type": "T", "subtype": "S", "ans_type": "blank", "answer": ["1"], "decided_by": "rules"}
    rows = [
        {**base, "id": "a", "hard": 0, "response": "no box", "error": None},
        {**base, "id": "b", "hard": 0, "response": None, "error": "timeout after 600 s"},
        {**base, "id": "c", "hard": 1, "response": "\\boxed{1}", "error": None},
    ]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = bv_inproc(f"bv report {tmp_path}/r.jsonl")
    footer = next(line for line in result.stdout.splitlines() if line.startswith("r: "))
    assert footer.endswith("; 1 reply without \\boxed{}"), result.stdout


def test_a_missing_image_from_stdin_mentions_image_root(sample_dir, tmp_path):
    result = bv_inproc(f"bv prompt < {sample_dir}/meta_data.jsonl", cwd=tmp_path)
    assert result.returncode == 1 and "give --image-root DIR" in result.stderr, result.stderr
    assert bv_inproc(f"bv prompt {sample_dir}/meta_data.jsonl > /dev/null", cwd=tmp_path).returncode == 0


def test_judge_shows_its_total_and_an_eta(server, tmp_path):
    path = rollout_rows(tmp_path, [f"row {i} column 3" for i in range(9)])
    server.responder = lambda seen: Reply(content="True", delay=0.15)
    result = bv_inproc(
        judge_cmd(server, path).replace("bv judge", "bv judge -j 1"), env={"BV_PROGRESS_EVERY_S": "0.2"}
    )
    lines = [line for line in result.stderr.splitlines() if line.startswith("bv judge:")]
    assert result.returncode == 0 and any("/10 done, ETA " in line and "by LLM" in line for line in lines), (
        lines
    )


def test_optimize_without_an_optimizer_model_names_the_option_that_fixes_it(data_dir, tmp_path):
    """Issue 43: `--backend chance --dry-run` said "no model given: use -m/--model" (the
    optimizer's endpoint, in the target's words); given -m, "the chance backend does not use
    -m/--model". Each message now names the option that fixes it."""
    base = f"bv optimize {data_dir}/meta_data.jsonl --skill {data_dir / 'seed.md'} --out {tmp_path / 'o'}"
    for extra in ("--backend chance --dry-run", "--backend chance --dry-run -m x", "--backend chance"):
        done = bv_inproc(f"{base} {extra}")
        assert done.returncode == 2, done.stderr
        assert "give --optimizer-model (or set BV_OPTIMIZER_MODEL)" in done.stderr, done.stderr
        assert "-m/--model" not in done.stderr, done.stderr
    assert not (tmp_path / "o").exists()
    unused = bv_inproc(f"{base} --backend chance --dry-run -m x --optimizer-model writer")
    assert unused.returncode == 2 and "the chance backend does not use -m/--model" in unused.stderr
    planned = bv_inproc(f"{base} --backend chance --dry-run --optimizer-model writer")
    assert planned.returncode == 0, planned.stderr
