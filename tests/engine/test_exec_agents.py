"""Agents named and bounded: exec rows name the agent's program and model (not `env`), read its
JSON transcript (Claude Code's stream-json, Codex's --json) for the answer, the model it ran and
whether it opened the image, and an agent's 429 is one item failure, not a wait."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from support.commands import bv_inproc, jsonl
from support.paths import SUPPORT

FAKE = SUPPORT / "fake_agent.py"


@pytest.fixture
def claude(tmp_path: Path) -> Path:
    """An agent program named `claude` (the fake agent behind it)."""
    program = tmp_path / "bin" / "claude"
    program.parent.mkdir()
    program.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} "$@"\n')
    program.chmod(0o755)
    return program


def rollout(sample_dir: Path, template: str, *options: str, items: int = 2):
    command = (
        f"bv prompt {sample_dir}/meta_data.jsonl | head -{items} | bv rollout --backend exec -q --no-cache"
        f" {' '.join(options)} --exec-cmd {shlex.quote(template)}"
    )
    return bv_inproc(command)


def test_rows_name_the_agent_and_its_model_not_env(sample_dir, claude):
    template = (
        "env ANTHROPIC_BASE_URL=http://127.0.0.1:9 CLAUDE_CODE_MAX_RETRIES=0"
        f" {claude} --mode stream-json --read --workdir {{workdir}} --prompt {{prompt}}"
        " --model claude-opus-4-8"
    )
    result = rollout(sample_dir, template)
    assert result.returncode == 0, result.stderr
    rows = jsonl(result.stdout)
    assert len(rows) == 2
    for row in rows:
        assert row["model"] == "claude-opus-4-8"  # the template's own --model, not `env`
        assert row["endpoint"].startswith("claude template:"), row["endpoint"]
        (turn,) = row["turns"]
        assert turn["model"] == "claude-opus-4-8-20261101"  # what the transcript says it ran
        assert turn["image_opened"] is True
        assert turn["usage"] == {"prompt_tokens": 830, "completion_tokens": 9}
        assert row["response"] == "It is teal. \\boxed{B}"  # the result event, not the transcript


def test_bv_model_wins_and_an_unopened_image_is_recorded(sample_dir, claude):
    template = f"{claude} --mode stream-json --workdir {{workdir}} --prompt {{prompt}} --model {{model}}"
    result = rollout(sample_dir, template, "-m", "sonnet")
    assert result.returncode == 0, result.stderr
    for row in jsonl(result.stdout):
        assert row["model"] == "sonnet" and row["turns"][0]["model"] == "sonnet-20261101"
        assert row["turns"][0]["image_opened"] is False  # answered without reading the attachment


def test_no_transcript_no_claim(sample_dir, claude):
    """Plain stdout, or Codex's --json (its image goes in with --image, no tool call to see): the
    row says nothing about opening the image, and without any model the program names it."""
    plain = rollout(sample_dir, f"{claude} --mode stdout --workdir {{workdir}} --prompt {{prompt}}")
    assert plain.returncode == 0, plain.stderr
    for row in jsonl(plain.stdout):
        assert row["model"] == "claude" and "image_opened" not in row["turns"][0]
    codex = rollout(
        sample_dir, f"{claude} --mode codex-json --workdir {{workdir}} --prompt {{prompt}} -m gpt-x"
    )
    assert codex.returncode == 0, codex.stderr
    for row in jsonl(codex.stdout):
        (turn,) = row["turns"]
        assert row["model"] == "gpt-x" and row["response"] == "\\boxed{B}"
        assert turn["usage"] == {"prompt_tokens": 900, "completion_tokens": 12}
        assert "image_opened" not in turn


def test_json_that_holds_no_answer_is_the_reply_as_printed(sample_dir, claude):
    result = rollout(sample_dir, f"{claude} --mode json-answer --workdir {{workdir}} --prompt {{prompt}}")
    assert result.returncode == 0, result.stderr
    for row in jsonl(result.stdout):
        assert row["response"] == '{"type": "answer", "text": "\\\\boxed{C}"}'


@pytest.mark.parametrize("status", ["429", "500"])
def test_an_agents_api_error_is_an_item_failure_not_a_wait(sample_dir, claude, tmp_path, status):
    runs = tmp_path / "runs"
    template = (
        f"env FAKE_AGENT_STATUS={status} {claude} --mode api-error --workdir {{workdir}} --prompt {{prompt}}"
        f" --piddir {runs}"
    )
    result = rollout(sample_dir, template, "-m", "opus", "-j", "1", items=2)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    rows = jsonl(result.stdout)
    assert [row["error"] is not None for row in rows] == [True, True]
    assert f"API Error: {status}" in rows[0]["error"]
    assert len((runs / "runs").read_text().splitlines()) == 2  # each item ran once: no retry, no wait
