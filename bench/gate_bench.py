"""What `bv optimize` hands back, end to end at its defaults: the null rate and the power (issue 42).

    .venv/bin/python bench/gate_bench.py [--null-runs 100] [--power-runs 40] [--items 388]
        [-j 32] [--parallel 1] [--json runs.jsonl] [-- extra bv optimize options]

Each run is a real `bv optimize` process at bv's defaults (the split, repeats, gate, alpha and
steps are bv's own: the command gets only the models, their URLs and keys, and what the harness
needs: `--mode rules --no-cache -j J --minibatch 64 --quiet`), on `bv synth` items against two
loopback models, built by bench/optimize_world.py: an optimizer that appends a new note every
step and a target whose accuracy on each item is known given the notes its system prompt holds.
What is measured is what a user takes away: best.md, the handed-back skill (test.json's
`handed_back` where bv writes one; before that change, best.md was the best skill on selection).

- **null** (bench/worlds.py's W0): no note does anything; item accuracies are drawn per run
  from a beta mix like BabyVision results. A run that hands back anything but the seed hands
  back a useless edit. Issue 42: that rate is at most alpha. PASS when the measured rate is at
  most alpha. The Clopper-Pearson 95% interval is printed beside it: its lower end is at most
  alpha whenever the rate is, so "the rate and its interval's lower end at most alpha" is this
  same rule. Why not the interval's ends alone: the lower end is at most alpha up to 10 of 100
  runs (a measured 10% would PASS), and the upper end is at most alpha only at 0 of 100 runs
  (a design whose true rate is 1% would MISS 63% of the time). With 100 runs this rule passes a
  true rate of alpha/2 96% of the time, of alpha 62%, of 2 alpha 6%; the
  line also says whether the upper end is below alpha (then the rate is shown to be below it).
- **power** (optimize_world's F10): the first note the optimizer writes has a true gain of 10
  points: the same lift added to every item's accuracy, capped at 1, solved per run so that the
  mean accuracy rises by 10 points (bv.core.power.lift_for_gain; about 11.7 points an item, as
  items right nearly always cannot gain 10). Later notes do nothing. The share of runs whose
  handed-back skill holds that note is the power; PASS when it is at least 80% (issue 42), read
  the same way (its interval printed beside it).

Each figure is printed beside its limit with PASS or MISS; the exit status is 1 on any MISS. The
replies are drawn at random (no reply cache), so the figures vary from run to run within their
intervals.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from optimize_world import (
    HARNESS_OPTIONS,
    POWER_POINTS,
    POWER_WORLD,
    Items,
    clopper_pearson,
    prepare_items,
    run_many,
)

POWER_LIMIT = 0.8
NULL_WORLD = "W0"


def timed(
    world: str, runs: Sequence[int], items: Items, work: Path, extra: list[str], args: argparse.Namespace
) -> tuple[list[dict[str, Any]], float]:
    """The runs' results and their wall time in seconds."""
    start = time.perf_counter()
    results = run_many(world, runs, items, work, extra, args.jobs, args.parallel, args.json)
    return results, time.perf_counter() - start


def design(results: list[dict[str, Any]]) -> str:
    """bv's defaults as the runs recorded them (run.json), the split they made, and whether bv
    guards what it hands back with the test split (test.json's `handed_back`)."""
    result = results[0]
    o, split = result["options"], result["split"]
    ratio = ":".join(map(str, o.get("ratio", [])))
    parts = f"{split['train']} train, {split['selection']} selection, {split['test']} test items"
    guarded = any(r["handed_back"] is not None for r in results)
    guard = "yes" if guarded else "no (best.md is the best on selection)"
    return (
        f"split {ratio} ({parts}), {o.get('repeats')} repeats, gate {o.get('gate')}, "
        f"alpha {o.get('alpha')}, {result['steps']} steps, guard on test: {guard}"
    )


def main() -> int:
    argv = sys.argv[1:]
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--null-runs", type=int, default=100, help="runs in which no note does anything")
    parser.add_argument("--power-runs", type=int, default=40, help="runs whose first note helps")
    parser.add_argument("--items", type=int, default=388, help="bv synth items")
    parser.add_argument("-j", "--jobs", type=int, default=32, help="requests in flight in each run")
    parser.add_argument("--parallel", type=int, default=1, help="runs at once")
    parser.add_argument("--json", type=Path, help="append one line per run here")
    args = parser.parse_args(argv)
    ok = True
    lines = []
    with tempfile.TemporaryDirectory(prefix="bv-gate-bench-") as folder:
        work = Path(folder)
        items = prepare_items(work, args.items)
        options = shlex.join([*HARNESS_OPTIONS, "-j", str(args.jobs), *extra])
        print(f"bv optimize on {args.items} bv synth items at bv's defaults ({options})", file=sys.stderr)
        null, null_s = timed(NULL_WORLD, range(args.null_runs), items, work, extra, args)
        power, power_s = timed(POWER_WORLD, range(args.power_runs), items, work, extra, args)
    if null or power:
        lines.append(f"bv optimize on {args.items} bv synth items: {design(null + power)}; {options}")
    if null:
        alpha = float(null[0]["options"]["alpha"])
        n, bad = len(null), sum(r["non_seed"] for r in null)
        low, high = clopper_pearson(bad, n)
        verdict = "PASS" if bad / n <= alpha else "MISS"
        ok &= verdict == "PASS"
        shown = "below alpha: shown" if high < alpha else "not below alpha"
        accepted = sum(r["accepted"] > 0 for r in null)
        decisions = sum(r["decisions"] for r in null)
        kept = sum(r["accepted"] for r in null)
        lines.append(
            f"null ({NULL_WORLD}, no edit does anything): {bad}/{n} runs handed back a skill other than "
            f"the seed: {bad / n:.1%} [{low:.1%}, {high:.1%}; upper end {shown}] (limit alpha {alpha:.0%}): "
            f"{verdict}; {accepted} runs accepted an edit on selection ({kept} of {decisions} decisions) "
            f"({null_s:.0f} s, {null_s / n:.1f} s a run)"
        )
    if power:
        n, found = len(power), sum(1 in r["notes"] for r in power)
        low, high = clopper_pearson(found, n)
        verdict = "PASS" if found / n >= POWER_LIMIT else "MISS"
        ok &= verdict == "PASS"
        selected = sum(1 in r["selected_notes"] for r in power)
        gain = sum(r["true_gain"] for r in power) / n
        lines.append(
            f"power ({POWER_WORLD}, the first note's true gain +{POWER_POINTS:g} points): the handed-back "
            f"skill held it in {found}/{n} runs: {found / n:.1%} [{low:.1%}, {high:.1%}] "
            f"(limit {POWER_LIMIT:.0%}): {verdict}; the best on selection held it in {selected}/{n}; "
            f"mean true gain {gain:+.2f} points ({power_s:.0f} s, {power_s / n:.1f} s a run)"
        )
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
