"""Real `bv optimize` runs in a world whose edits have known true effects (issue 42).

    .venv/bin/python bench/optimize_world.py --world W1 --runs 20 [--items 388] [--jobs 32]
        [--parallel 1] [--json out.jsonl] [--work DIR] [-- extra bv optimize options...]

The simulation of the loop (bench/optimize_sim.py) is only worth its tables if it behaves as bv
does; this runs bv itself in the same worlds (bench/worlds.py) so the two can be compared. Each
run is one `bv optimize` process against two loopback models on tests/support/fakeopenai.py's
server:

- **items**: `bv synth --n N --seed 0`, with each item's subtype rewritten to `S{k % 22}` (k its
  line) so bv's stratified split follows the world's 22 subtypes; the rewritten file is
  `world_items.jsonl` beside bv synth's (its image paths are relative to that folder).
- **the truth of a run**: item accuracies without edits from `world.draw_base`, and edit k's
  true effects from `world.draw_effects`, drawn when first needed from a generator seeded by
  (run, k), so a run's truth is the same whatever options it is run with.
- **the optimizer** writes one new line, `- Note k: ...`, as an `append` edit for each step:
  the k-th step that asks gets note k. A step is told from the request order, which is exact: a
  step's optimizer requests are all sent after its train rollout has finished and before its
  gate starts, and every step begins with a train rollout, so a new step's first optimizer
  request is the first one after any target request. With `--minibatch 64` at the batch size
  64 every step sends one request at most (the failures and the successes sent all fit in one
  minibatch; bv/optimize/reflect.py); each run checks from its history that every step that
  asked was given its own note and applied it.
- **the target** finds the item by its image, reads which notes the system prompt holds, and
  answers right with probability clip(base + the sum of those notes' effects, 0, 1), else wrong.

After a run, best.md (the skill bv hands back) is read: its TRUE gain is 100 x the mean over all
items of its true accuracy minus the seed's. Each run also records the history (steps, decisions,
accepted), test.json (the comparison and, once bv has them, `handed_back` and `guard`), the split
sizes, the target's requests and the time. stdout gets the summary: mean true gain with its
standard error, P(worse), the share of runs handing back a skill other than the seed, the mean
accepted steps. bench/gate_bench.py reuses `prepare_items`, `run_once` and the truths.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import hashlib
import json
import math
import random
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT / "tests", ROOT / "bench", ROOT):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from support.fakeopenai import FakeOpenAI, Reply, Seen  # noqa: E402
from worlds import SUBTYPES, WORLDS, World  # noqa: E402

from bv.core.dist import beta_quantile  # noqa: E402
from bv.core.power import lift_for_gain  # noqa: E402

BV = str(Path(sys.executable).with_name("bv"))
SEED_SKILL = "## Inspecting\n\n- Look at the whole picture first.\n"
NOTE = re.compile(r"^- Note (\d+):", re.MULTILINE)
LABELS = "ABCDEFGH"
SALT = 42  # of every run's generators
# What the harness itself needs: one optimizer request per step (see the docstring), rules
# judging, fresh replies (no cache), no progress lines.
HARNESS_OPTIONS = ("--mode", "rules", "--no-cache", "--minibatch", "64", "--quiet")
POWER_WORLD = (
    "F10"  # the first note's true gain +10 points (the same lift on every item), later notes nothing
)
POWER_POINTS = 10.0


def clopper_pearson(hits: int, trials: int) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided 95% interval of a binomial share."""
    low = beta_quantile(0.025, hits, trials - hits + 1) if hits > 0 else 0.0
    high = beta_quantile(0.975, hits + 1, trials - hits) if hits < trials else 1.0
    return low, high


class Truth:
    """One run's true accuracies: each item's without edits, and each note's effect on each item,
    drawn when first asked for (note k from its own generator, so it does not depend on the order
    notes are asked for)."""

    def __init__(self, base: np.ndarray, draw_note: Callable[[int], np.ndarray]) -> None:
        self.base = base
        self.draw_note = draw_note
        self._notes: dict[int, np.ndarray] = {}
        self._accuracy: dict[frozenset[int], np.ndarray] = {}
        self.lock = threading.Lock()

    def effect(self, note: int) -> np.ndarray:
        with self.lock:
            if note not in self._notes:
                self._notes[note] = self.draw_note(note)
            return self._notes[note]

    def accuracy(self, notes: Collection[int]) -> np.ndarray:
        """Each item's true accuracy with these notes in the skill: the base plus the sum of their
        effects, then clipped to [0, 1] (the sum first, as bench/worlds.py says)."""
        key = frozenset(notes)
        if key not in self._accuracy:
            total = self.base + sum((self.effect(k) for k in sorted(key)), np.zeros_like(self.base))
            self._accuracy[key] = np.clip(total, 0.0, 1.0)
        return self._accuracy[key]

    def gain(self, notes: Collection[int]) -> float:
        """The true gain in points of a skill holding these notes over the seed (no notes)."""
        return float(100 * np.mean(self.accuracy(notes) - self.accuracy(())))


def world_of(name: str, n_items: int) -> World:
    """A world of bench/worlds.py by name (or the power world, on W1's accuracies) at n_items."""
    base = WORLDS["W1" if name == POWER_WORLD else name]
    return dataclasses.replace(base, n_items=n_items)


def truth_of(name: str, n_items: int, run: int) -> Truth:
    """Run `run`'s truth in world `name`: the same for a given (name, n_items, run) whatever the
    options, so designs can be compared on the same truths."""
    world = world_of(name, n_items)
    base = world.draw_base(np.random.default_rng([SALT, run]), 1)[0]
    if name == POWER_WORLD:
        lift = lift_for_gain([(1.0, float(p)) for p in base], POWER_POINTS / 100)

        def draw_note(note: int) -> np.ndarray:
            return np.full(n_items, lift if note == 1 else 0.0)
    else:

        def draw_note(note: int) -> np.ndarray:
            return world.draw_effects(np.random.default_rng([SALT, run, note]), 1)[0]

    return Truth(base, draw_note)


def about(name: str) -> str:
    if name == POWER_WORLD:
        return (
            f"the first note's true gain +{POWER_POINTS:g} points (the same lift on every item, capped at"
            " 100%), later notes nothing (W1's accuracies)"
        )
    return WORLDS[name].about


@dataclass(frozen=True)
class Items:
    """bv synth's items with the world's subtypes: the file bv optimize reads, the seed skill,
    and each item's line by the SHA-256 of its image."""

    path: Path
    seed: Path
    rows: tuple[dict[str, Any], ...]
    by_image: dict[bytes, int]


def prepare_items(folder: Path, n_items: int) -> Items:
    """`bv synth` items in folder/data, rewritten to the world's subtypes (item k in S{k % 22})."""
    data = folder / "data"
    subprocess.run([BV, "synth", "--n", str(n_items), "--seed", "0", "--out", str(data)], check=True,
                   capture_output=True)  # fmt: skip
    rows = [json.loads(line) for line in (data / "meta_data.jsonl").read_text().splitlines()]
    for k, row in enumerate(rows):
        row["subtype"] = f"S{k % SUBTYPES}"
    path = data / "world_items.jsonl"  # beside meta_data.jsonl: the image paths stay right
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    seed = data / "seed.md"
    seed.write_text(SEED_SKILL)
    by_image = {hashlib.sha256((data / row["image"]).read_bytes()).digest(): k for k, row in enumerate(rows)}
    if len(by_image) != len(rows):
        duplicates = len(rows) - len(by_image)
        raise SystemExit(f"bv synth made {duplicates} duplicate images: items can't be told apart")
    return Items(path, seed, tuple(rows), by_image)


class Models:
    """The two loopback models of one run. They share one lock and one mark: whether the target
    was asked anything since the optimizer's last request, which tells a new step (docstring)."""

    def __init__(self, items: Items, truth: Truth, seed: int) -> None:
        self.items = items
        self.truth = truth
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.target_requests = 0
        self.optimizer_requests = 0
        self.notes = 0  # notes written: the steps that asked
        self._target_since = True
        self.target = FakeOpenAI(self.answer_target)
        self.optimizer = FakeOpenAI(self.answer_optimizer)

    def __enter__(self) -> Models:
        self.target.start()
        self.optimizer.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.target.stop()
        self.optimizer.stop()

    def answer_target(self, seen: Seen) -> Reply:
        messages = seen.body["messages"]
        part = next(p for p in messages[1]["content"] if p["type"] == "image_url")
        image = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
        k = self.items.by_image[hashlib.sha256(image).digest()]
        notes = {int(n) for n in NOTE.findall(messages[0]["content"])}
        p = float(self.truth.accuracy(notes)[k])
        with self.lock:
            self.target_requests += 1
            self._target_since = True
            right = self.rng.random() < p
        seen.body = {}  # the server keeps every request: not its image
        item = self.items.rows[k]
        if item["ansType"] == "choice":
            gold = item["choiceAns"]
            answer = LABELS[gold if right else (gold + 1) % len(item["options"])]
        else:
            answer = item["blankAns"] if right else "nothing"
        return Reply(content=f"I looked.\n\n\\boxed{{{answer}}}", usage=(100, 10))

    def answer_optimizer(self, seen: Seen) -> Reply:
        with self.lock:
            self.optimizer_requests += 1
            if self._target_since:  # the first request of a new step
                self.notes += 1
                self._target_since = False
            note = self.notes
        seen.body = {}
        content = f"- Note {note}: look at the whole picture once more."
        edit = {"op": "append", "content": content, "reason": "failures", "failure_kind": "visual_detail"}
        reply = "```json\n" + json.dumps({"summary": [], "edits": [edit]}) + "\n```"
        return Reply(content=reply, usage=(900, 60))


def notes_in(text: str) -> list[int]:
    return sorted({int(n) for n in NOTE.findall(text)})


def checked_steps(history: list[dict[str, Any]], models: Models) -> int:
    """Check that every step that asked the optimizer got a note of its own, in order, and applied
    it; returns the most requests one step sent. Raises if the one-note-per-step rule failed."""
    steps = [row for row in history if row.get("kind") == "step"]
    asked = [row for row in steps if row.get("reflections")]
    requests = sum(len(row["reflections"]) for row in steps)
    problems = []
    if requests != models.optimizer_requests:
        seen = models.optimizer_requests
        problems.append(f"the history has {requests} optimizer requests, the server saw {seen}")
    if len(asked) != models.notes:
        problems.append(f"{len(asked)} steps asked the optimizer but {models.notes} notes were written")
    for note, row in enumerate(asked, 1):
        applied = [e for e in row.get("edits", []) if e.get("status") == "applied"]
        if [notes_in(e.get("content", "")) for e in applied] != [[note]]:
            problems.append(f"step {row['step']} applied {applied!r}, not note {note} alone")
    if problems:
        raise SystemExit("one note per step failed: " + "; ".join(problems))
    return max((len(row["reflections"]) for row in steps), default=0)


def run_once(
    items: Items, truth: Truth, out: Path, extra: Sequence[str] = (), jobs: int = 32, seed: int = 0
) -> dict[str, Any]:
    """One `bv optimize` process in this truth, and what it handed back: its notes and true gain,
    the history's counts, test.json, the split's sizes, the requests and the time."""
    start = time.perf_counter()
    with Models(items, truth, seed) as models:
        command = [
            BV, "optimize", str(items.path), "--skill", str(items.seed), "--out", str(out),
            "-m", "target", "--base-url", models.target.base_url, "--api-key", "sk-loopback",
            "--optimizer-model", "writer", "--optimizer-base-url", models.optimizer.base_url,
            "--optimizer-api-key", "sk-loopback", "-j", str(jobs), *HARNESS_OPTIONS, *extra,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bv optimize failed ({done.returncode}) in {out}: {done.stderr[-2000:]}")
    history = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    most_requests = checked_steps(history, models)
    test = json.loads((out / "test.json").read_text())
    seed_text = items.seed.read_text().strip()
    best_text = (out / "best.md").read_text().strip()
    handed_back = test.get("handed_back")
    non_seed = best_text != seed_text
    if handed_back is not None and (handed_back.get("skill") == "best") != non_seed:
        raise SystemExit(f"{out}: test.json hands back {handed_back.get('skill')!r} but best.md is "
                         f"{'not ' if non_seed else ''}the seed")  # fmt: skip
    notes = notes_in(best_text)
    # the best skill on selection (test.json's `best`), handed back or not: what the guard weighed
    selected = next((p for p in (out / "skills").glob(f"*-{test['best']['sha256'][:12]}.md")), None)
    selected_notes = notes_in(selected.read_text()) if selected is not None else notes
    options = json.loads((out / "run.json").read_text())["options"]
    split = json.loads((out / "split.json").read_text())
    return {
        "notes": notes,
        "true_gain": truth.gain(notes),
        "non_seed": non_seed,
        "selected_notes": selected_notes,
        "selected_true_gain": truth.gain(selected_notes),
        "steps": sum(1 for row in history if row.get("kind") == "step"),
        "decisions": sum(1 for row in history if row.get("gate")),
        "accepted": sum(1 for row in history if row.get("accepted")),
        "notes_written": models.notes,
        "notes_true_gains": [truth.gain([k]) for k in range(1, models.notes + 1)],
        "optimizer_requests": models.optimizer_requests,
        "most_requests_per_step": most_requests,
        "rollouts": models.target_requests,
        "split": {part: len(split[part]) for part in ("train", "selection", "test")},
        "test": {key: value for key, value in test.items() if key != "tokens"},
        "handed_back": handed_back,
        "guard": test.get("guard"),
        "options": options,
        "seconds": seconds,
    }


def run_line(result: dict[str, Any]) -> str:
    """One run in a line: what it handed back and what that is truly worth, and what it cost."""
    handed = (result["handed_back"] or {}).get("skill") or ("best" if result["non_seed"] else "seed")
    return (
        f"handed back {handed}, notes {result['notes']}, true gain {result['true_gain']:+.2f} points "
        f"(selection's best: notes {result['selected_notes']}, {result['selected_true_gain']:+.2f}); "
        f"{result['accepted']} of {result['decisions']} decisions accepted in {result['steps']} steps, "
        f"{result['rollouts']} target requests, {result['seconds']:.1f} s"
    )


def run_many(
    world: str,
    runs: Sequence[int],
    items: Items,
    work: Path,
    extra: Sequence[str] = (),
    jobs: int = 32,
    parallel: int = 1,
    json_path: Path | None = None,
) -> list[dict[str, Any]]:
    """These runs of `world` (`parallel` at once), each said on stderr as it ends and appended to
    `json_path`; their results in the order of `runs`."""
    tag = "-".join([world, str(len(items.rows)), *(a.lstrip("-") for a in extra)]).replace("/", "_")
    lock = threading.Lock()

    def one(run: int) -> dict[str, Any]:
        truth = truth_of(world, len(items.rows), run)
        result = run_once(items, truth, work / f"{tag}-run{run}", extra, jobs, seed=run)
        result.update(world=world, items=len(items.rows), run=run, extra=list(extra))
        with lock:
            print(f"  {world} run {run}: {run_line(result)}", file=sys.stderr)
            if json_path:
                with json_path.open("a") as f:
                    f.write(json.dumps(result) + "\n")
        return result

    with ThreadPoolExecutor(max(1, parallel)) as pool:
        return list(pool.map(one, runs))


def shown_options(options: dict[str, Any]) -> str:
    """What decides a run's design, from run.json's options."""
    keys = ("ratio", "repeats", "gate", "alpha", "batch_size", "minibatch", "edits")
    shown = []
    for key in keys:
        value = options.get(key)
        if isinstance(value, list):
            value = ":".join(map(str, value))
        if value is not None:
            shown.append(f"{key} {value}")
    rest = sorted(k for k in options if k not in keys and k not in ("split", "split_seed", "max_skill_chars"))
    shown += [f"{k} {options[k]}" for k in rest if not isinstance(options[k], (dict, list))]
    return ", ".join(shown)


def summary(results: list[dict[str, Any]]) -> dict[str, float]:
    n = len(results)
    gains = np.array([r["true_gain"] for r in results])
    selected = np.array([r["selected_true_gain"] for r in results])
    worse = int(np.sum(gains < 0))
    return {
        "runs": n,
        "gain": float(gains.mean()),
        "gain_se": float(gains.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan"),
        "worse": worse / n,
        "worse_ci": clopper_pearson(worse, n),
        "non_seed": sum(r["non_seed"] for r in results) / n,
        "steps": float(np.mean([r["steps"] for r in results])),
        "accepted": float(np.mean([r["accepted"] for r in results])),
        "decisions": float(np.mean([r["decisions"] for r in results])),
        "selected_gain": float(selected.mean()),
        "selected_worse": float(np.mean(selected < 0)),
        "rollouts": float(np.mean([r["rollouts"] for r in results])),
        "most_requests": max(r["most_requests_per_step"] for r in results),
        "seconds": float(np.mean([r["seconds"] for r in results])),
    }


def main() -> int:
    argv = sys.argv[1:]
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", default="W1", choices=[*WORLDS, POWER_WORLD], help="a world's name")
    parser.add_argument("--runs", type=int, default=20, help="bv optimize processes (runs 0..R-1)")
    parser.add_argument("--first-run", type=int, default=0, help="index of the first run (its truth's seed)")
    parser.add_argument("--items", type=int, default=None, help="bv synth items [default: the world's]")
    parser.add_argument("-j", "--jobs", type=int, default=32, help="requests in flight in each run")
    parser.add_argument("--parallel", type=int, default=1, help="runs at once")
    parser.add_argument("--json", type=Path, help="append one line per run here")
    parser.add_argument("--work", type=Path, help="keep the run folders here [default: a temporary folder]")
    args = parser.parse_args(argv)
    n_items = args.items or WORLDS.get(args.world, WORLDS["W1"]).n_items
    with tempfile.TemporaryDirectory(prefix="bv-optimize-world-") as temporary:
        work = args.work or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        items = prepare_items(work, n_items)
        runs = range(args.first_run, args.first_run + args.runs)
        budget = world_of(args.world, n_items).budget
        if budget != 1:  # the world's budget is a bv option, not part of its truth
            print(f"note: {args.world} is {budget:g} x the default budget: pass it after --, e.g. "
                  f"-- --epochs {budget * 4:g} at 4 epochs", file=sys.stderr)  # fmt: skip
        print(f"{args.world} ({about(args.world)}) on {n_items} items; bv optimize "
              f"{shlex.join([*HARNESS_OPTIONS, '-j', str(args.jobs), *extra])}", file=sys.stderr)  # fmt: skip
        results = run_many(args.world, runs, items, work, extra, args.jobs, args.parallel, args.json)
    s = summary(results)
    first = results[0]
    split = ":".join(str(first["split"][part]) for part in ("train", "selection", "test"))
    print(f"{args.world} ({about(args.world)}), {n_items} items, {s['runs']} runs of {s['steps']:g} steps; "
          f"split {split} items; {shown_options(first['options'])}")  # fmt: skip
    low, high = s["worse_ci"]
    print(f"  true gain of best.md: {s['gain']:+.2f} ± {s['gain_se']:.2f} points (standard error); "
          f"P(worse than the seed) {s['worse']:.1%} [{low:.1%}, {high:.1%}]")  # fmt: skip
    print(f"  handed back a skill other than the seed in {s['non_seed']:.1%} of runs; "
          f"{s['accepted']:.2f} accepted steps of {s['decisions']:.2f} decisions a run")  # fmt: skip
    print(f"  the best skill on selection: true gain {s['selected_gain']:+.2f} points, "
          f"worse in {s['selected_worse']:.1%}")  # fmt: skip
    print(f"  {s['rollouts']:.0f} target requests and {s['seconds']:.1f} s a run, "
          f"at most {s['most_requests']:g} optimizer requests a step (one note each step); "
          f"extra options: {shlex.join(extra) or 'none'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
