"""The exec backend: an external agent CLI per turn, in a fresh workspace (tests/support/fake_agent.py
plays it)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shlex
import sys
import time
from pathlib import Path

import pytest
from PIL import Image
from support.commands import bv_inproc, jsonl, read_items
from support.paths import SUPPORT

from bv.core import redaction
from bv.core.errors import BadConfig, Fatal, ItemFailure, Transient
from bv.core.records import message_text
from bv.engine.backends import make_backend
from bv.engine.backends.exec_agent import ExecBackend
from bv.stages.prompt import PromptOptions, Skill, build_prompt

FAKE = SUPPORT / "fake_agent.py"
PY = shlex.quote(sys.executable)


def agent_cmd(mode: str, *extra: str) -> str:
    """The --exec-cmd template that runs the fake agent in `mode`."""
    return (
        f"{PY} {shlex.quote(str(FAKE))} --mode {mode} --workdir {{workdir}} --last {{last_message}}"
        " --prompt {prompt} --image {image} --model {model} " + " ".join(shlex.quote(e) for e in extra)
    )


@pytest.fixture
def record(tmp_path: Path) -> dict:
    """A prompt record whose question holds quotes, braces and a placeholder's name, with a skill."""
    Image.new("RGB", (32, 24), "teal").save(tmp_path / "pic.png")
    item = {
        "id": "q1",
        "question": "Which of 'these' is \"teal\"? Not {workdir} or {model}, not \\boxed{Z}.",
        "ans_type": "choice",
        "choices": [{"label": "A", "text": "red"}, {"label": "B", "text": "teal"}],
        "answer": ["B"],
        "images": ["pic.png"],
    }
    skill = Skill("counting", "Look twice.\n\n## Step two\n\nCount again.")
    return build_prompt(item, tmp_path, PromptOptions(skill=skill))


def complete(backend, messages, **params):
    return asyncio.run(backend.complete(messages, **params))


def dumped(dump: Path) -> Path:
    (workspace,) = dump.iterdir()
    return workspace


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def pids_gone(piddir: Path, expected_files: int) -> list[int]:
    """The pids the sleeping agents wrote; asserts every one of them is dead (within a second)."""
    files = sorted(piddir.glob("*.pids"))
    assert len(files) == expected_files
    pids = [int(p) for f in files for p in f.read_text().split()]
    deadline = time.monotonic() + 1.0
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [p for p in pids if alive(p)], "agent or its grandchild outlived the timeout"
    return pids


def test_workspace_layout_and_reply(record, tmp_path):
    backend = make_backend("exec", exec_cmd=agent_cmd("ok", "--dump", str(tmp_path / "dump")), model="m")
    reply = complete(backend, record["messages"], run=0)
    assert (reply.content, reply.finish_reason, reply.model) == ("I see it.\n\n\\boxed{B}", "stop", "m")

    space = dumped(tmp_path / "dump")
    argv = json.loads((space / "argv.json").read_text())
    workdir = Path(argv[argv.index("--workdir") + 1])
    assert not workdir.exists()  # removed after the turn
    assert argv[argv.index("--last") + 1] == str(workdir / "last_message.txt")
    assert argv[argv.index("--model") + 1] == "m"
    # The prompt is one argument, exactly task.md: nothing in it was substituted or split.
    task = (space / "task.md").read_text()
    assert argv[argv.index("--prompt") + 1] == task
    assert task.startswith(record["messages"][1]["content"][0]["text"] + "\n\n## Workspace")
    assert "Not {workdir} or {model}, not \\boxed{Z}." in task and "`attachments/image-1.png`" in task

    skill = (space / ".agents/skills/babyvision/SKILL.md").read_text()
    assert (space / ".claude/skills/babyvision/SKILL.md").read_text() == skill  # where Claude looks
    assert skill.startswith("---\nname: babyvision\ndescription: '")
    assert skill.rstrip().endswith("## Skill\n\nLook twice.\n\n## Step two\n\nCount again.")
    assert "## Answer Format" in skill  # the rest of the system prompt is the preamble
    assert (space / "attachments/image-1.png").read_bytes() == (tmp_path / "pic.png").read_bytes()
    assert "`attachments/image-1.png`" in (space / "ATTACHMENTS.md").read_text()


def test_without_a_skill_the_skill_file_says_so(tmp_path):
    Image.new("RGB", (8, 8), "red").save(tmp_path / "pic.png")
    item = {
        "id": "1",
        "question": "What colour?",
        "ans_type": "blank",
        "answer": ["red"],
        "images": ["pic.png"],
    }
    messages = build_prompt(item, tmp_path, PromptOptions())["messages"]
    backend = make_backend("exec", exec_cmd=agent_cmd("ok", "--dump", str(tmp_path / "dump")), model="m")
    complete(backend, messages)
    skill = (dumped(tmp_path / "dump") / ".agents/skills/babyvision/SKILL.md").read_text()
    assert "## Skill\n\nThere is no extra guidance" in skill
    assert "You are an expert visual reasoning agent" in skill


def test_a_later_turn_shows_the_previous_attempt(record, tmp_path):
    messages = [
        *record["messages"],
        {"role": "assistant", "content": "It might be the left one."},
        {"role": "user", "content": "Your previous answer was: It might be the left one.\n\nReview it."},
    ]
    backend = make_backend("exec", exec_cmd=agent_cmd("ok", "--dump", str(tmp_path / "dump")), model="m")
    complete(backend, messages, run=0)
    task = (dumped(tmp_path / "dump") / "task.md").read_text()
    first = task.index("## Question")
    previous = task.index("## Your Previous Attempt\n\nIt might be the left one.")
    follow_up = task.index("## Follow-up\n\nYour previous answer was")
    assert first < previous < follow_up < task.index("## Workspace")


def test_reply_falls_back_to_stdout(record):
    backend = make_backend("exec", exec_cmd=agent_cmd("stdout"), model="m")
    assert complete(backend, record["messages"]).content == "thinking about it...\nI see it. \\boxed{B}"


def test_an_agent_that_says_nothing_gives_an_empty_reply(record):
    backend = make_backend("exec", exec_cmd=agent_cmd("silent"), model="m")
    assert complete(backend, record["messages"]).content == ""


def test_nonzero_exit_is_an_item_failure_with_the_redacted_stderr_tail(record, monkeypatch):
    secret = "sk-fake-agent-secret-0123456789"
    redaction.register(secret)
    monkeypatch.setenv("FAKE_AGENT_LEAK", secret)
    backend = make_backend("exec", exec_cmd=agent_cmd("fail"), model="m")
    with pytest.raises(ItemFailure) as caught:
        complete(backend, record["messages"])
    message = str(caught.value)
    assert "exited with code 3" in message and "boom: the agent broke ***" in message
    assert secret not in message
    assert len(message) < 600  # the tail of stderr, not all of it


def test_a_failure_quotes_the_tail_of_stdout_too(record):
    """Claude Code writes its errors (a refused key, an unknown model) on stdout, not stderr."""
    backend = make_backend("exec", exec_cmd=agent_cmd("stdout-error"), model="m")
    with pytest.raises(ItemFailure) as caught:
        complete(backend, record["messages"])
    message = str(caught.value)
    assert message.startswith("agent exited with code 1; stdout: \\x1b[31mAPI Error: 401")  # escaped
    assert "invalid x-api-key" in message and "\x1b" not in message


def test_stdin_is_an_empty_pipe(sample_dir):
    """An agent that reads its stdin into the task, as `codex exec` does, reads nothing: bv's own
    stdin (here the prompt records) never reaches it, and it is a pipe, not a path."""
    result = bv_inproc(pipeline(sample_dir, agent_cmd("stdin"), "-j 3", items=3))
    assert result.returncode == 0, result.stderr
    rows = jsonl(result.stdout)
    assert len(rows) == 3 and all(r["error"] is None for r in rows)
    assert all(r["response"].endswith("\\boxed{B}") and "stdin held" not in r["response"] for r in rows)


def test_an_agent_that_reads_skills_only_from_claude_skills_gets_the_skill(record, tmp_path):
    item = {"id": "1", "question": "Which?", "ans_type": "blank", "answer": ["C"], "images": ["pic.png"]}
    skill = Skill("steady", "Look twice.\n\nAlways answer C.")
    messages = build_prompt(item, tmp_path, PromptOptions(skill=skill))["messages"]
    backend = make_backend("exec", exec_cmd=agent_cmd("claude"), model="m")
    assert complete(backend, messages).content == "As the skill says. \\boxed{C}"
    bare = build_prompt(item, tmp_path, PromptOptions())["messages"]
    assert complete(backend, bare).content == "\\boxed{none}"  # the skill, not the rest, said C


def test_the_system_text_on_the_command_line(record, tmp_path):
    """{system} as Claude's --append-system-prompt takes it, {system_toml} as Codex's
    `-c developer_instructions=` parses it (TOML): both the system prompt exactly."""
    cmd = agent_cmd("ok", "--dump", str(tmp_path / "dump"))
    cmd += " --developer {system_toml} --append-system-prompt {system}"
    backend = make_backend("exec", exec_cmd=cmd, model="m")
    system = record["messages"][0]
    system["content"] = message_text(system["content"]) + '\n\nQuotes "x", a backslash \\ and \x7f, {model}.'
    complete(backend, record["messages"])
    space = dumped(tmp_path / "dump")
    argv = json.loads((space / "argv.json").read_text())
    expected = system["content"].strip()
    assert argv[argv.index("--append-system-prompt") + 1] == expected
    assert (space / "developer.txt").read_text(encoding="utf-8") == expected
    assert "## Skill\n\nLook twice." in expected


def test_timeout_kills_the_agent_and_its_grandchild(record, tmp_path):
    backend = make_backend(
        "exec", exec_cmd=agent_cmd("sleep", "--piddir", str(tmp_path / "pids")), model="m", timeout=1
    )
    started = time.monotonic()
    with pytest.raises(Transient, match="agent timed out after 1 s"):
        complete(backend, record["messages"])
    assert time.monotonic() - started < 5
    assert len(pids_gone(tmp_path / "pids", 1)) == 2


def test_cancellation_kills_the_agent_and_its_grandchild(record, tmp_path):
    """The engine cancels a call on its own timeout; the agent's process group dies with it."""
    backend = make_backend(
        "exec", exec_cmd=agent_cmd("sleep", "--piddir", str(tmp_path / "pids")), model="m", timeout=60
    )

    async def cancelled() -> None:
        task = asyncio.ensure_future(backend.complete(record["messages"]))
        while not list((tmp_path / "pids").glob("*.pids")):
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(cancelled(), 10))
    pids_gone(tmp_path / "pids", 1)


def test_missing_program_is_refused_and_one_gone_since_is_fatal(record):
    with pytest.raises(BadConfig, match=r"no-such-agent-xyz.*from `exec_cmd` cannot be run"):
        make_backend("exec", exec_cmd="no-such-agent-xyz {prompt}", model="m")
    # Found when bv started, gone when the item runs: fatal, as no item can succeed.
    backend = ExecBackend("gone {prompt}", ["/nonexistent/gone-agent", "{prompt}"], "m")
    with pytest.raises(Fatal, match=r"gone-agent.*cannot be run"):
        complete(backend, record["messages"])


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"exec_cmd": None, "model": "m"}, "needs `exec_cmd`"),
        ({"exec_cmd": "  ", "model": "m"}, "needs `exec_cmd`"),
        ({"exec_cmd": "agent 'unclosed", "model": "m"}, "cannot be split"),
        (
            {"exec_cmd": "true {prompt} {last-message}", "model": "m"},
            r"unknown placeholder.*\{last-message\}",
        ),
        ({"exec_cmd": "true -m {model} {prompt}", "model": None}, "uses {model} but no model"),
    ],
)
def test_a_template_that_cannot_run_is_refused_before_any_work(config, match):
    with pytest.raises(BadConfig, match=match):
        make_backend("exec", **config)


def test_the_endpoint_names_the_program_and_hashes_the_template():
    one = make_backend("exec", exec_cmd="true --effort low {prompt}", model="m")
    two = make_backend("exec", exec_cmd="true --effort high {prompt}", model="m")
    assert one.endpoint.startswith("true ") and "low" not in one.endpoint
    assert one.endpoint != two.endpoint  # other flags, other replies: other cache keys
    assert make_backend("exec", exec_cmd="true {prompt}").model == "true"  # no -m: the program's name


# The command line, as a pipeline


def answers_file(sample_dir: Path, tmp_path: Path) -> Path:
    """The gold answer of each sample image, by the image's sha256, for the fake agent to look up."""
    answers = {}
    for item in read_items(sample_dir):
        gold = "ABCDEFGH"[item["choiceAns"]] if item["ansType"] == "choice" else item["blankAns"]
        answers[hashlib.sha256((sample_dir / item["image"]).read_bytes()).hexdigest()] = gold
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(answers))
    return path


def pipeline(sample_dir: Path, exec_cmd: str, *options: str, items: int | None = None) -> str:
    source = f"bv prompt {sample_dir}/meta_data.jsonl" + (f" | head -{items}" if items else "")
    return (
        f"{source} | bv rollout --backend exec --exec-cmd {shlex.quote(exec_cmd)} -m fake --no-cache"
        f" {' '.join(options)} | bv judge --mode rules"
    )


def test_pipeline_answers_every_item(sample_dir, tmp_path):
    cmd = agent_cmd("ok", "--answers", str(answers_file(sample_dir, tmp_path)))
    result = bv_inproc(pipeline(sample_dir, cmd, "-j 4"))
    assert result.returncode == 0, result.stderr
    rows = jsonl(result.stdout)
    assert len(rows) == len(read_items(sample_dir))
    for row in rows:
        assert row["error"] is None, row["error"]
        assert (row["backend"], row["model"]) == ("exec", "fake")
        assert row["response"].endswith("\\boxed{" + row["extracted"] + "}")
        assert row["hard"] == 1, row["judge_reason"]


def test_pipeline_failing_agent_gives_error_rows(sample_dir):
    result = bv_inproc(pipeline(sample_dir, agent_cmd("fail"), items=2))
    assert result.returncode == 1, result.stderr  # rows failed; each is still written
    rows = jsonl(result.stdout)
    assert len(rows) == 2
    for row in rows:
        assert "exited with code 3" in row["error"] and "boom: the agent broke" in row["error"]
        assert row["response"] is None and row["hard"] == 0


def test_pipeline_stops_when_the_first_agent_runs_fail_alike(sample_dir):
    result = bv_inproc(pipeline(sample_dir, agent_cmd("stdout-error"), "-j 1"))
    assert result.returncode == 1
    assert "the first 3 requests were all refused the same way" in result.stderr
    assert "API Error: 401" in result.stderr and "check its login or API key" in result.stderr
    rows = jsonl(result.stdout)
    assert len(rows) == 3 and all("API Error: 401" in r["error"] for r in rows)  # not 12 failures


def test_pipeline_timeout_gives_error_rows_and_leaves_no_process(sample_dir, tmp_path):
    cmd = agent_cmd("sleep", "--piddir", str(tmp_path / "pids"))
    started = time.monotonic()
    # 2 s, not 1: at a load of ~10 on 2 cores the agent (a Python start) once took over a second to
    # write its pids, and was killed before it had a grandchild to leave behind.
    result = bv_inproc(pipeline(sample_dir, cmd, "--timeout 2 --retries 0", items=2))
    assert result.returncode == 1, result.stderr  # rows failed; each is still written
    assert time.monotonic() - started < 10
    rows = jsonl(result.stdout)
    assert len(rows) == 2
    for row in rows:
        # The engine's timeout and the agent's own race; either way the row says so.
        assert "gave up after 1 tries" in row["error"] and "time" in row["error"], row["error"]
        assert row["hard"] == 0
    pids_gone(tmp_path / "pids", 2)


@pytest.mark.parametrize(
    ("template", "said"),
    [
        ("no-such-agent-xyz {prompt}", "'no-such-agent-xyz' from --exec-cmd cannot be run"),
        ("agent 'unclosed", "--exec-cmd cannot be split into arguments"),
        ("true {prompt} {promt}", "--exec-cmd has unknown placeholder(s) {promt}"),
    ],
)
def test_pipeline_with_an_agent_command_that_cannot_run_is_a_usage_error(sample_dir, template, said):
    """Refused before any row, as any other option that cannot work: exit 2, in the options' words."""
    result = bv_inproc(pipeline(sample_dir, template, items=1))
    assert result.returncode == 2, result.stderr
    assert (
        said in result.stderr and "Usage:" in result.stderr and "`" not in result.stderr.split("Error:")[-1]
    )
    assert "Traceback" not in result.stderr


def test_relative_program_path_is_taken_from_where_bv_runs(sample_dir, tmp_path):
    """The agent runs in its workspace, but ./agent.sh means the one next to the user."""
    script = tmp_path / "agent.sh"
    script.write_text('#!/bin/sh\nprintf "%s" "from the script \\boxed{A}" > "$1"\n')
    script.chmod(0o755)
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | head -1"
        " | bv rollout --backend exec --exec-cmd './agent.sh {last_message}' --no-cache",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    (row,) = jsonl(result.stdout)
    assert (row["error"], row["response"], row["model"]) == (None, "from the script \\boxed{A}", "agent.sh")


def test_finished_agent_runs_are_cached(sample_dir, tmp_path):
    cache = tmp_path / "cache.sqlite"
    dump = tmp_path / "dump"  # one copy of the workspace per agent run
    cmd = agent_cmd("stdout", "--dump", str(dump))
    rollout = (
        f"bv prompt {sample_dir}/meta_data.jsonl | head -2"
        f" | bv rollout --backend exec --exec-cmd {shlex.quote(cmd)} -m fake --cache {cache}"
    )
    first = bv_inproc(rollout)
    second = bv_inproc(rollout)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert [r["turns"][0]["cached"] for r in jsonl(first.stdout)] == [False, False]
    assert [r["turns"][0]["cached"] for r in jsonl(second.stdout)] == [True, True]
    assert len(list(dump.iterdir())) == 2  # the agent ran twice in all, not four times
