"""A fake agent CLI for the exec backend's tests, run as `python fake_agent.py --mode MODE ...`.

Modes:
  ok      check the workspace bv prepared (exit 2 and say why on stderr if it is wrong), then
          write the answer to --last: `\\boxed{X}`, X looked up by the image's sha256 in
          --answers (a JSON file) or `B`
  stdout  print the answer to stdout; write nothing to --last
  fail    write a long stderr ending in `boom: the agent broke` and exit 3
  sleep   start a grandchild `sleep 60`, write both pids to a file in --piddir, then sleep
  silent  write nothing anywhere, exit 0
  stdin   as `codex exec` does, read stdin when it is not a terminal and append it to the task;
          exit 2 when stdin is not a pipe (a path such as /dev/null); answer `\\boxed{B}`, or
          `\\boxed{Z}` and what was read when anything was
  claude  as Claude Code does, find skills only in .claude/skills/<name>/SKILL.md (exit 2 when the
          front matter is not Claude's: name = folder, lowercase and hyphens, at most 64
          characters; a description of at most 1024), then answer as the skill says (`answer X`),
          `\\boxed{none}` without one
  stdout-error  as Claude does on a refused key: the error on stdout (with a terminal colour
          code), exit 1
  stream-json  as `claude -p --output-format stream-json --verbose` does (the event shapes of
          Claude Code 2.1's stream-json output): an init event naming the model (--model, dated),
          with --read a `Read` tool call of the image and its result (an over-1-MiB line, as an
          image read back is), then the result event with the answer and usage; nothing to --last
  codex-json  as `codex exec --json` does (thread.started, turn.started, item.completed with an
          agent_message, turn.completed with usage); nothing to --last
  json-answer  print the answer as a JSON object with a `type` (not a transcript: no result in it)
  api-error  as Claude Code does when its server answers 429 (or FAKE_AGENT_STATUS) and it has
          no retries left: `API Error: 429 ...` on stdout, exit 1; each run adds a line to
          --piddir/runs
With --dump DIR, a copy of the workspace (and argv.json) is left in DIR/<pid> before replying.
With --developer VALUE (as `codex -c developer_instructions=VALUE`), VALUE is parsed as TOML and
its string written to developer.txt in the dump.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import time
import tomllib
from pathlib import Path


def fail(why: str) -> None:
    print(f"fake agent: bad workspace: {why}", file=sys.stderr)
    sys.exit(2)


def front_matter(text: str) -> dict[str, str]:
    lines = text.splitlines()
    if not lines or lines[0] != "---" or "---" not in lines[1:]:
        fail("SKILL.md does not start with YAML front matter")
    fields = {}
    for line in lines[1 : lines.index("---", 1)]:
        key, sep, value = line.partition(": ")
        if not sep:
            fail(f"front matter line {line!r} is not `key: value`")
        if value.startswith("'"):
            if not value.endswith("'"):
                fail(f"unterminated quote in {line!r}")
            value = value[1:-1].replace("''", "'")
        fields[key] = value
    return fields


def check_workspace(workdir: Path, prompt: str, image: str | None) -> Path:
    """The checks of mode `ok`; returns the first attachment."""
    if Path.cwd().resolve() != workdir.resolve():
        fail(f"cwd {Path.cwd()} is not the workspace {workdir}")
    skill = workdir / ".agents" / "skills" / "babyvision" / "SKILL.md"
    if not skill.is_file():
        fail("no .agents/skills/babyvision/SKILL.md")
    fields = front_matter(skill.read_text(encoding="utf-8"))
    if fields.get("name") != "babyvision" or not fields.get("description"):
        fail(f"front matter {fields} lacks name babyvision or a description")
    if (workdir / "task.md").read_text(encoding="utf-8") != prompt:
        fail("task.md differs from the prompt argument")
    attached = sorted((workdir / "attachments").iterdir())
    if not attached:
        fail("attachments/ is empty")
    listing = (workdir / "ATTACHMENTS.md").read_text(encoding="utf-8")
    for path in attached:
        if f"attachments/{path.name}" not in listing:
            fail(f"ATTACHMENTS.md does not list {path.name}")
    if image is not None and Path(image) != workdir / "attachments" / attached[0].name:
        fail(f"--image {image} is not the first attachment")
    head = attached[0].read_bytes()[:12]
    kinds = {".png": head.startswith(b"\x89PNG"), ".jpg": head.startswith(b"\xff\xd8\xff")}
    kinds[".webp"] = head.startswith(b"RIFF") and head[8:12] == b"WEBP"
    if not kinds.get(attached[0].suffix):
        fail(f"{attached[0].name} is not an image named by its format")
    return attached[0]


def claude_answer(workdir: Path) -> str:
    """What the `claude` mode answers: from the first skill under .claude/skills, as it says."""
    skills = sorted((workdir / ".claude" / "skills").glob("*/SKILL.md"))
    for skill in skills:
        text = skill.read_text(encoding="utf-8")
        fields = front_matter(text)
        name = fields.get("name", "")
        if name != skill.parent.name or not re.fullmatch(r"[a-z0-9-]{1,64}", name):
            fail(f"skill name {name!r} is not Claude's (the folder's name, lowercase and hyphens)")
        if not 0 < len(fields.get("description", "")) <= 1024:
            fail("skill description missing or over 1024 characters")
        said = re.search(r"Always answer ([A-Z])\.", text)
        if said:
            return f"As the skill says. \\boxed{{{said.group(1)}}}\n"
    return "\\boxed{none}\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--last")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--image")
    parser.add_argument("-m", "--model")
    parser.add_argument("--answers", type=Path)
    parser.add_argument("--piddir", type=Path)
    parser.add_argument("--dump", type=Path)
    parser.add_argument("--developer")
    parser.add_argument("--append-system-prompt")
    parser.add_argument("--read", action="store_true")
    args = parser.parse_args()

    if args.dump:
        target = args.dump / str(os.getpid())
        shutil.copytree(args.workdir, target)
        (target / "argv.json").write_text(json.dumps(sys.argv[1:]))
        if args.developer is not None:
            value = tomllib.loads(f"value = {args.developer}")["value"]
            (target / "developer.txt").write_text(value, encoding="utf-8")

    if args.mode == "ok":
        image = check_workspace(args.workdir, args.prompt, args.image)
        answers = json.loads(args.answers.read_text()) if args.answers else {}
        answer = answers.get(hashlib.sha256(image.read_bytes()).hexdigest(), "B")
        Path(args.last).write_text(f"I see it.\n\n\\boxed{{{answer}}}\n", encoding="utf-8")
    elif args.mode == "stdout":
        print("thinking about it...")
        print("I see it. \\boxed{B}")
    elif args.mode == "fail":
        sys.stderr.write("noise " * 400 + "\nboom: the agent broke " + os.environ.get("FAKE_AGENT_LEAK", ""))
        sys.exit(3)
    elif args.mode == "sleep":
        child = subprocess.Popen(["sleep", "60"])
        args.piddir.mkdir(parents=True, exist_ok=True)
        partial = args.piddir / f"{os.getpid()}.tmp"
        partial.write_text(f"{os.getpid()} {child.pid}")
        partial.rename(partial.with_suffix(".pids"))  # whole, or not there at all
        time.sleep(60)
    elif args.mode == "silent":
        pass
    elif args.mode == "stdin":
        mode = os.fstat(0).st_mode
        if not stat.S_ISFIFO(mode):
            fail(f"stdin is not a pipe (mode {stat.filemode(mode)})")
        read = sys.stdin.read()
        task = args.prompt + (f"\n\n<stdin>\n{read}\n</stdin>" if read else "")
        answer = f"stdin held {read[:200]!r} \\boxed{{Z}}" if read else "\\boxed{B}"
        Path(args.last).write_text(f"{len(task)} characters of task. {answer}\n", encoding="utf-8")
    elif args.mode == "claude":
        Path(args.last).write_text(claude_answer(args.workdir), encoding="utf-8")
    elif args.mode == "stdout-error":
        error = {"type": "error", "error": {"message": "invalid x-api-key"}}
        print("\x1b[31mAPI Error: 401\x1b[0m " + json.dumps(error))
        sys.exit(1)
    elif args.mode == "stream-json":
        stream_json(args)
    elif args.mode == "codex-json":
        events = [
            {"type": "thread.started", "thread_id": "th_1"},
            {"type": "turn.started"},
            {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "Look."}},
            {
                "type": "item.completed",
                "item": {"id": "item_1", "type": "agent_message", "text": "\\boxed{B}"},
            },
            {
                "type": "turn.completed",
                "usage": {"input_tokens": 900, "cached_input_tokens": 0, "output_tokens": 12},
            },
        ]
        for event in events:
            print(json.dumps(event))
    elif args.mode == "json-answer":
        print(json.dumps({"type": "answer", "text": "\\boxed{C}"}))
    elif args.mode == "api-error":
        args.piddir.mkdir(parents=True, exist_ok=True)
        with open(args.piddir / "runs", "a") as runs:
            runs.write(f"{os.getpid()}\n")
        status = os.environ.get("FAKE_AGENT_STATUS", "429")
        kind = "rate_limit_error" if status == "429" else "api_error"
        error = {"type": "error", "error": {"type": kind, "message": "slow down"}}
        print(f"API Error: {status} " + json.dumps(error))
        sys.exit(1)
    else:
        sys.exit(f"unknown mode {args.mode}")


def stream_json(args: argparse.Namespace) -> None:
    """Claude Code's stream-json transcript (one JSON object a line)."""
    model = f"{args.model or 'claude-default'}-20261101"
    events: list[dict] = [{"type": "system", "subtype": "init", "model": model, "tools": ["Read", "Bash"]}]
    if args.read:
        path = str(args.workdir / "attachments" / "image-1.png")
        use = {"type": "tool_use", "id": "tu_1", "name": "Read", "input": {"file_path": path}}
        events.append({"type": "assistant", "message": {"model": model, "content": [use]}})
        block = {"type": "image", "source": {"type": "base64", "data": "A" * (1536 * 1024)}}
        result = {"type": "tool_result", "tool_use_id": "tu_1", "content": [block]}
        events.append({"type": "user", "message": {"content": [result]}})
    text = {"type": "text", "text": "It is teal. \\boxed{B}"}
    events.append({"type": "assistant", "message": {"model": model, "content": [text]}})
    usage = {"input_tokens": 30, "cache_read_input_tokens": 800, "output_tokens": 9}
    events.append(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": "It is teal. \\boxed{B}",
            "usage": usage,
        }
    )
    for event in events:
        print(json.dumps(event))


if __name__ == "__main__":
    main()
