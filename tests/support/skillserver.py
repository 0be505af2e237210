"""Loopback models for `bv optimize`'s tests, as responders of tests/support/fakeopenai.py's server.

SkilledTarget answers an item right only when the system prompt holds the hint of the item's
subtype, and otherwise guesses (a random option, or a random small number); it knows the items by
their image bytes, as tests/e2e/test_pipeline.py's gold model does. ScriptedOptimizer reads bv's
reflection prompt as a person would (the skill in its fence, each attempt's subtype and verdict)
and follows a script: its first reply is malformed, its second proposes hints with one operation on
text that is not in the skill, later ones propose the hints still missing, and once every failing
subtype has its hint it proposes a harmful edit (deleting a hint). Both answer the same request the
same way every time: the optimizer remembers its replies; the target's guesses are drawn from the
request and how many times it was asked (repeats of an item are identical requests).

The optimizer also answers GEPA's reflection prompt (bv/optimize/gepa_adapter.py), known by its
opening words, with a new skill in a ``` fence as GEPA asks: its first such reply holds a control
character (bv refuses it before trying it), later ones add up to two missing hints of the failing
subtypes to the skill, and once none is missing one deletes a hint (harmful)."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run by its path (make optimize-demo): import the fakes as the tests do
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.fakeopenai import Reply, Seen

LABELS = "ABCDEFGH"


def hint(subtype: str) -> str:
    return f"- {subtype}: inspect every part of the figure before you answer (hint {subtype.lower()})."


def _image_bytes(seen: Seen) -> bytes:
    part = next(p for p in seen.body["messages"][1]["content"] if p["type"] == "image_url")
    return base64.b64decode(part["image_url"]["url"].split(",", 1)[1])


class SkilledTarget:
    def __init__(self, data_dir: Path, hold: Callable[[], bool] = lambda: False) -> None:
        self.by_image: dict[bytes, dict] = {}
        for line in (data_dir / "meta_data.jsonl").read_text().splitlines():
            item = json.loads(line)
            self.by_image[hashlib.sha256((data_dir / item["image"]).read_bytes()).digest()] = item
        self.asked: Counter[str] = Counter()
        self.hold = hold  # when true, requests hang unanswered (a test kills bv meanwhile)
        self.lock = threading.Lock()

    def __call__(self, seen: Seen) -> Reply:
        if self.hold():
            return Reply(hang=True)
        item = self.by_image[hashlib.sha256(_image_bytes(seen)).digest()]
        system = seen.body["messages"][0]["content"]
        if hint(item["subtype"]) in system:
            answer = LABELS[item["choiceAns"]] if item["ansType"] == "choice" else item["blankAns"]
        else:
            key = hashlib.sha256(json.dumps(seen.body, sort_keys=True).encode()).hexdigest()
            with self.lock:
                self.asked[key] += 1
                rng = random.Random(f"{key}:{self.asked[key]}")
            answer = (
                LABELS[rng.randrange(len(item["options"]))]
                if item["ansType"] == "choice"
                else str(rng.randint(1, 9))
            )
        return Reply(content=f"I looked at the picture.\n\n\\boxed{{{answer}}}", usage=(120, 12))


GEPA_OPENING = "I provided an assistant with the following instructions to perform a task for me:\n```\n"
_GEPA_SKILL = re.compile(re.escape(GEPA_OPENING) + r"(.*?)\n```\n\nThe following are examples", re.DOTALL)
_FENCED_SKILL = re.compile(r"## Current skill\s+(`{3,})text\n(.*?)\n\1", re.DOTALL)
_ATTEMPT = re.compile(r"Subtype: [^\n]*? / ([^\n]*)\n.*?Verdict: (correct|wrong)", re.DOTALL)


class ScriptedOptimizer:
    def __init__(self, subtypes: list[str], hold: Callable[[], bool] = lambda: False) -> None:
        self.subtypes = subtypes
        self.replies: dict[str, str] = {}
        self.hold = hold
        self.lock = threading.Lock()
        self.harmful = 0  # harmful edits proposed
        self.gepa_asked = 0  # GEPA reflection prompts answered

    def __call__(self, seen: Seen) -> Reply:
        if self.hold():
            return Reply(hang=True)
        prompt = seen.body["messages"][0]["content"]
        with self.lock:
            if prompt not in self.replies:
                if prompt.startswith(GEPA_OPENING):
                    self.replies[prompt] = self.gepa_script(prompt, self.gepa_asked)
                    self.gepa_asked += 1
                else:
                    self.replies[prompt] = self.script(prompt, len(self.replies) - self.gepa_asked)
            return Reply(content=self.replies[prompt], usage=(900, 80))

    def script(self, prompt: str, n: int) -> str:
        if n == 0:
            return 'Here are my edits: {"edits": [{"op": "append", "content": "- look closely"'
        found = _FENCED_SKILL.search(prompt)
        skill = found.group(2) if found else ""
        failing = {subtype for subtype, verdict in _ATTEMPT.findall(prompt) if verdict == "wrong"}
        missing = [s for s in self.subtypes if s in failing and hint(s) not in skill]
        edits: list[dict] = [
            {"op": "append", "content": hint(s), "reason": f"{s} items fail", "failure_kind": "visual_detail"}
            for s in missing[:2]
        ]
        if n == 1:
            edits.append({"op": "replace", "target": "a sentence the skill does not have", "content": "- x"})
        if not missing:
            present = [s for s in self.subtypes if hint(s) in skill]
            if present:
                self.harmful += 1
                edits = [{"op": "delete", "target": hint(present[0]), "reason": "shorter is better"}]
        return "```json\n" + json.dumps({"summary": [], "edits": edits}) + "\n```"

    def gepa_script(self, prompt: str, n: int) -> str:
        found = _GEPA_SKILL.search(prompt)
        skill = found.group(1).strip() if found else ""
        failing = {subtype for subtype, verdict in _ATTEMPT.findall(prompt) if verdict == "wrong"}
        missing = [s for s in self.subtypes if s in failing and hint(s) not in skill]
        if n == 0:
            new = skill + "\n- look \x1b[31mclosely\x1b[0m"
        elif missing:
            new = "\n".join([skill, *(hint(s) for s in missing[:2])])
        else:
            present = [s for s in self.subtypes if hint(s) in skill]
            self.harmful += 1
            new = (
                skill.replace(hint(present[0]) + "\n", "").replace(hint(present[0]), "") if present else skill
            )
        return f"Here is the new instruction:\n```\n{new.strip()}\n```"


SEED_SKILL = "## Inspecting\n\n- Look at the whole picture first.\n"


def main() -> None:
    """`python tests/support/skillserver.py DATA RUN [bv optimize options]`: start both loopback models,
    run `bv optimize` on DATA (a bv synth folder) into RUN against them, stop them (make
    optimize-demo; docs/optimize.md)."""
    import subprocess

    from bv.data.synth import TASK_FAMILIES
    from support.fakeopenai import FakeOpenAI

    data, run, extra = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    seed = data / "seed.md"
    if not seed.exists():
        seed.write_text(SEED_SKILL)
    target = FakeOpenAI(SkilledTarget(data))
    optimizer = FakeOpenAI(ScriptedOptimizer([subtype for _, subtype, _ in TASK_FAMILIES]))
    target.start()
    optimizer.start()
    bv = Path(sys.executable).parent / "bv"
    command = [
        str(bv), "optimize", str(data / "meta_data.jsonl"), "--skill", str(seed), "--out", str(run),
        "-m", "target", "--base-url", target.base_url, "--api-key", "sk-loopback",
        "--optimizer-model", "writer", "--optimizer-base-url", optimizer.base_url,
        "--optimizer-api-key", "sk-loopback", "--mode", "rules",
        "--cache", str(run.parent / f"{run.name}-cache.sqlite"), *extra,
    ]  # fmt: skip
    try:
        status = subprocess.run(command).returncode
    finally:
        target.stop()
        optimizer.stop()
    sys.exit(status)


if __name__ == "__main__":
    main()
