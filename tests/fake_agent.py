"""A fake agent CLI for the exec backend's tests, run as `python fake_agent.py --mode MODE ...`.

Modes:
  ok      check the workspace bv prepared (exit 2 and say why on stderr if it is wrong), then
          write the answer to --last: `\\boxed{X}`, X looked up by the image's sha256 in
          --answers (a JSON file) or `B`
  stdout  print the answer to stdout; write nothing to --last
  fail    write a long stderr ending in `boom: the agent broke` and exit 3
  sleep   start a grandchild `sleep 60`, write both pids to a file in --piddir, then sleep
  silent  write nothing anywhere, exit 0
With --dump DIR, a copy of the workspace (and argv.json) is left in DIR/<pid> before replying.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--last")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--image")
    parser.add_argument("--model")
    parser.add_argument("--answers", type=Path)
    parser.add_argument("--piddir", type=Path)
    parser.add_argument("--dump", type=Path)
    args = parser.parse_args()

    if args.dump:
        target = args.dump / str(os.getpid())
        shutil.copytree(args.workdir, target)
        (target / "argv.json").write_text(json.dumps(sys.argv[1:]))

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
    else:
        sys.exit(f"unknown mode {args.mode}")


if __name__ == "__main__":
    main()
