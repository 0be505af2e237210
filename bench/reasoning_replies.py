"""A loopback reasoning model for the row and re-scoring benchmarks, run as its own process.

Every reply has the shape of DeepSeek's reasoner (tests/fixtures/replies/deepseek_reasoner.json,
which names its source: `reasoning_content` beside `content`, usage with reasoning and cached
tokens), with texts as long as the official BabyVision results' (/work/shared/babyvision/
official-results: reasoning ~1.6 kB, the reply ~0.9 kB), and an answer in the form the question
asks for that varies request by request: a label of the item's choices, `(row,col)` or a count.
So the rows a benchmark makes carry what real runs carry (reasoning, usage, provenance), and the
rules find some right and most wrong, as on BabyVision.

    python bench/reasoning_replies.py [--seed S]   # prints its base URL, serves until SIGTERM

It runs apart from the benchmark so the benchmark's own process stays small: Linux starts a
spawned child's peak RSS at its parent's, so a large parent would floor every RSS figure.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import re
import signal
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.fakeopenai import FakeOpenAI, Reply, Seen, reply_fixture  # noqa: E402

FIXTURE = "deepseek_reasoner"
REASONING_CHARS = 1600
CONTENT_CHARS = 900
CHOICE_LINE = re.compile(r"^([A-Z])\. ", re.MULTILINE)  # how bv prompt lists choices
WORDS = (
    "the grid shows copies of a figure and one of them differs in its orientation so I compare"
    " each cell with its neighbours row by row counting the edges and the colours until the odd"
    " one out stands apart from the rest which means the answer follows from that cell"
).split()


def _text(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    length = 0
    while length < chars:
        words.append(rng.choice(WORDS))
        length += len(words[-1]) + 1
    return " ".join(words)


def _question(body: dict[str, Any]) -> str:
    """The text of the request's last user message."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "\n".join(p.get("text", "") for p in content or [] if p.get("type") == "text")
    return ""


class Replies:
    """The responder: each request gets the fixture's body with its own texts and answer."""

    def __init__(self, seed: int = 0) -> None:
        self.template = reply_fixture(FIXTURE)["body"]
        self.rng = random.Random(seed)

    def answer(self, question: str) -> str:
        labels = CHOICE_LINE.findall(question)
        if labels:
            return self.rng.choice(labels)
        if "(row,col)" in question:
            return f"({self.rng.randint(1, 4)},{self.rng.randint(1, 5)})"
        return str(self.rng.randint(1, 9))

    def __call__(self, seen: Seen) -> Reply:
        body: dict[str, Any] = copy.deepcopy(self.template)
        message = body["choices"][0]["message"]
        message["reasoning_content"] = _text(self.rng, REASONING_CHARS)
        answer = self.answer(_question(seen.body))
        seen.body = {}  # the server keeps every request it saw: not its images
        message["content"] = _text(self.rng, CONTENT_CHARS) + f"\n\n\\boxed{{{answer}}}"
        return Reply(body=json.dumps(body).encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    server = FakeOpenAI(responder=Replies(args.seed))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})  # the server thread too
    print(server.start(), flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    server.stop()


if __name__ == "__main__":
    main()
