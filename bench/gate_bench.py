"""The gate of `bv optimize` end to end: its per-run false-accept rate and its power (issue 33).

    .venv/bin/python bench/gate_bench.py [--null-runs 100] [--power-runs 40] [--items 388]

Each run is a real `bv optimize` process on `bv synth` items at the defaults (split 2:1:7, so 39
selection items on 388; 3 repeats; 8 steps; alpha 0.05), against two loopback models on
tests/support/fakeopenai.py's server:

- **null**: the target ignores the skill. Each item has its own accuracy (drawn anew for every
  run from a beta mix like BabyVision results) and every reply is right with that probability,
  whatever the system prompt says; the optimizer proposes a new harmless line every step. No edit
  can help, so a run that ends with any accepted edit is a false accept: bv's guarantee is that
  this happens in at most alpha of the runs (alpha/2^j at the j-th decision, docs/optimize.md).
- **power**: every item is right with probability .4, or .7 once the skill holds a magic word,
  which the optimizer's first edit adds. The share of runs whose first decision (alpha/2) accepts
  it is the gate's power; the limit is 0.8 (issue 33).

Each figure is printed with its Clopper-Pearson 95% interval beside its limit: PASS when the null
rate's interval reaches down to alpha or below and the power's reaches 0.8. The replies are drawn
at random (no reply cache), so the figures vary from run to run within their intervals.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from support.fakeopenai import FakeOpenAI, Reply, Seen  # noqa: E402

from bv.core.dist import beta_quantile  # noqa: E402

BV = str(Path(sys.executable).with_name("bv"))
ALPHA = 0.05
POWER_LIMIT = 0.8
MAGIC = "Count every part twice before answering."
LABELS = "ABCDEFGH"
# item accuracies like a target's on BabyVision: many items nearly always wrong, some nearly
# always right, the rest spread (bench/coverage_bench.py's mix: weight, a, b)
BETA_MIX = ((0.45, 0.3, 6.0), (0.20, 6.0, 0.3), (0.35, 2.0, 3.0))


def clopper_pearson(hits: int, trials: int) -> tuple[float, float]:
    low = beta_quantile(0.025, hits, trials - hits + 1) if hits > 0 else 0.0
    high = beta_quantile(0.975, hits + 1, trials - hits) if hits < trials else 1.0
    return low, high


class Target:
    """Answers an item right with its probability (`accuracy(item, system prompt)`), else wrong."""

    def __init__(self, data: Path, accuracy: Callable[[str, str], float], seed: int) -> None:
        self.by_image: dict[bytes, dict] = {}
        for line in (data / "meta_data.jsonl").read_text().splitlines():
            item = json.loads(line)
            self.by_image[hashlib.sha256((data / item["image"]).read_bytes()).digest()] = item
        self.accuracy = accuracy
        self.rng = random.Random(seed)
        self.lock = threading.Lock()

    def __call__(self, seen: Seen) -> Reply:
        part = next(p for p in seen.body["messages"][1]["content"] if p["type"] == "image_url")
        image = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
        item = self.by_image[hashlib.sha256(image).digest()]
        p = self.accuracy(str(item["taskId"]), seen.body["messages"][0]["content"])
        with self.lock:
            right = self.rng.random() < p
        if item["ansType"] == "choice":
            gold = item["choiceAns"]
            answer = LABELS[gold if right else (gold + 1) % len(item["options"])]
        else:
            answer = item["blankAns"] if right else "nothing"
        return Reply(content=f"I looked.\n\n\\boxed{{{answer}}}", usage=(100, 10))


class Optimizer:
    """Proposes one new line every step; the first, in the power runs, is the magic word."""

    def __init__(self, magic: bool) -> None:
        self.magic = magic
        self.asked = 0
        self.lock = threading.Lock()

    def __call__(self, seen: Seen) -> Reply:
        with self.lock:
            self.asked += 1
            n = self.asked
        content = MAGIC if self.magic else f"- Note {n}: look at the whole picture once more."
        edit = {"op": "append", "content": content, "reason": "failures", "failure_kind": "visual_detail"}
        reply = "```json\n" + json.dumps({"summary": [], "edits": [edit]}) + "\n```"
        return Reply(content=reply, usage=(900, 60))


def beta_mix(rng: random.Random) -> float:
    weight = rng.random()
    for w, a, b in BETA_MIX:
        weight -= w
        if weight < 0:
            return rng.betavariate(a, b)
    return rng.betavariate(*BETA_MIX[-1][1:])


def one_run(data: Path, work: Path, index: int, kind: str, steps: int, jobs: int) -> tuple[list[dict], int]:
    """One `bv optimize` process: its history's gate decisions, and its selection items."""
    rng = random.Random(f"gate-bench/{kind}/{index}")
    ids = [json.loads(line)["taskId"] for line in (data / "meta_data.jsonl").read_text().splitlines()]
    if kind == "null":
        table = {str(i): beta_mix(rng) for i in ids}

        def accuracy(item: str, system: str) -> float:
            return table[item]
    else:

        def accuracy(item: str, system: str) -> float:
            return 0.7 if MAGIC in system else 0.4

    target = FakeOpenAI(Target(data, accuracy, rng.randrange(2**32)))
    optimizer = FakeOpenAI(Optimizer(magic=kind == "power"))
    target.start()
    optimizer.start()
    out = work / f"{kind}-{index}"
    command = [
        BV, "optimize", str(data / "meta_data.jsonl"), "--skill", str(data / "seed.md"), "--out", str(out),
        "-m", "target", "--base-url", target.base_url, "--api-key", "sk-loopback",
        "--optimizer-model", "writer", "--optimizer-base-url", optimizer.base_url,
        "--optimizer-api-key", "sk-loopback", "--mode", "rules", "--no-cache", "-j", str(jobs),
        "--steps", str(steps), "--alpha", str(ALPHA), "--quiet",
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True)
    finally:
        target.stop()
        optimizer.stop()
    if done.returncode != 0:
        raise SystemExit(f"bv optimize failed ({done.returncode}): {done.stderr[-2000:]}")
    history = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    selection = len(json.loads((out / "split.json").read_text())["selection"])
    return [row["gate"] for row in history if row.get("gate")], selection


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--null-runs", type=int, default=100, help="runs whose target ignores the skill")
    parser.add_argument("--power-runs", type=int, default=40, help="runs with a magic word (.4 -> .7)")
    parser.add_argument("--items", type=int, default=388, help="bv synth items (the default split 2:1:7)")
    parser.add_argument("--steps", type=int, default=8, help="steps of each null run (the defaults' 8)")
    parser.add_argument("-j", "--jobs", type=int, default=32, help="requests in flight in each run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bv-gate-bench-") as folder:
        work = Path(folder)
        data = work / "data"
        subprocess.run([BV, "synth", "--n", str(args.items), "--seed", "0", "--out", str(data)], check=True,
                       capture_output=True)  # fmt: skip
        (data / "seed.md").write_text("## Inspecting\n\n- Look at the whole picture first.\n")
        print(f"bv optimize end to end on {args.items} bv synth items, split 2:1:7, 3 repeats, alpha {ALPHA}")
        selection = 0
        start = time.perf_counter()
        bad = decisions = accepted_decisions = 0
        for index in range(args.null_runs):
            gates, selection = one_run(data, work, index, "null", args.steps, args.jobs)
            decisions += len(gates)
            accepted_decisions += sum(g["accepted"] for g in gates)
            bad += any(g["accepted"] for g in gates)
            print(f"  null run {index + 1}/{args.null_runs}: {len(gates)} decisions, "
                  f"{sum(g['accepted'] for g in gates)} accepted", file=sys.stderr)  # fmt: skip
        null_s = time.perf_counter() - start
        found = 0
        for index in range(args.power_runs):
            gates, selection = one_run(data, work, index, "power", 1, args.jobs)
            found += bool(gates) and gates[0]["decision"] == 1 and gates[0]["accepted"]
            print(f"  power run {index + 1}/{args.power_runs}: accepted {found}", file=sys.stderr)
        power_s = time.perf_counter() - start - null_s
    print(f"selection split: {selection} items x 3 repeats (bv synth's subtypes; 39 on the official set)")
    ok = True
    if args.null_runs:
        low, high = clopper_pearson(bad, args.null_runs)
        verdict = "PASS" if low <= ALPHA else "MISS"
        ok &= verdict == "PASS"
        print(f"null: {bad}/{args.null_runs} runs of {args.steps} steps ended with an accepted edit: "
              f"{bad / args.null_runs:.1%} [{low:.1%}, {high:.1%}] (limit alpha {ALPHA:.0%}): {verdict}; "
              f"{accepted_decisions} of {decisions} decisions accepted ({null_s:.0f} s)")  # fmt: skip
    if args.power_runs:
        low, high = clopper_pearson(found, args.power_runs)
        verdict = "PASS" if high >= POWER_LIMIT else "MISS"
        ok &= verdict == "PASS"
        print(f"power: the first decision (alpha/2) accepted the magic word (.4 -> .7) in {found}/"
              f"{args.power_runs} runs: {found / args.power_runs:.1%} [{low:.1%}, {high:.1%}] "
              f"(limit {POWER_LIMIT:.0%}): {verdict} ({power_s:.0f} s)")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
