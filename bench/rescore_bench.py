"""Re-scoring benchmark: how many rows a second `bv optimize` gate over cached replies scores a second.

`bv optimize` scores a candidate skill on the selection split (bv/optimize/loop.py `evaluate`,
then bv/optimize/gate.py): `bv.optimize.stage_calls.rollout_and_judge` builds the prompts, rolls them
out through the reply cache and judges the rows, `gate.finished_scores` makes each item's per-run scores,
`gate.decide` runs the paired test against the current skill's and `gate.estimate` gives each
side's interval. A re-run (resuming a run folder, or a candidate whose prompts were asked before)
finds every reply in the cache. This script fills a cache from a loopback reasoning model
(bench/reasoning_replies.py), stops the model, and times, in this process, `--passes` times:

- `gate`: the whole evaluation and decision as the loop runs it, every reply from the cache;
- `replay`: the gate's prompts and rollout alone (what every resume, re-judge and re-run does
  before judging): issue 37's target, at least 10,000 rows a second, beside its floor measured in
  the same run (per row one SQLite point lookup of a cached key and one SHA-256 of a 64-character
  digest) and beside the same call with the replay path off (`BV_REPLAY=0`: every row through the
  request engine, as before issue 37);
- `judge + comparison`: the same call with the prompt building and the rollout replaced by the
  rollout rows it returned (so only the judge and the comparison are timed): issue 24's target,
  at least 50,000 rows a second.

No request can be sent while timing: the model is stopped, so a reply missing from the cache
would fail its row, and every row must come back without error and from the cache.

    python bench/rescore_bench.py                    # 400 items x 10 runs, 5 passes
    python bench/rescore_bench.py --items 200 --repeats 3 --json
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BV = str(Path(sys.executable).with_name("bv")) if Path(sys.executable).with_name("bv").exists() else "bv"
TARGET_ROWS_PER_S = 50_000  # judge + comparison (issue 24)
TARGET_REPLAY_ROWS_PER_S = 10_000  # prompts + rollout from the cache (issue 37)
BENCH_KEY = "sk-bench-" + "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH"


def gate_pass(
    items: list[dict[str, Any]], skill: Any, engines: Any, repeats: int, current: dict[str, list[float]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One gate as bv/optimize/loop.py runs it: evaluate the candidate, decide, estimate both sides."""
    from bv.optimize import stage_calls
    from bv.optimize.gate import decide, estimate, finished_scores

    rows = stage_calls.rollout_and_judge(items, skill, engines, repeats, "bench: gate")
    candidate, _ = finished_scores(rows)
    decision = decide(current, candidate, "paired", 0.05).to_json()
    return rows, {"gate": decision, "current": estimate(current), "candidate": estimate(candidate)}


def timed_passes(passes: int, run: Any, prepare: Any = None) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each pass (CPU too: on a shared machine the wall time waits for a
    core); `prepare`'s result, made before each pass and not timed, is the pass's argument."""
    walls, cpus = [], []
    for _ in range(passes):
        given = () if prepare is None else (prepare(),)
        started, cpu = time.perf_counter(), time.process_time()
        run(*given)
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
    return walls, cpus


def floor_per_row(cache: Path, rows: int) -> float:
    """CPU seconds a row of the replay's floor: one point lookup of a stored key, one SHA-256 of
    a 64-character digest (what a cached row cannot do without), best of 5 over `rows` keys."""
    import hashlib
    import sqlite3

    db = sqlite3.connect(cache)
    keys = [key for (key,) in db.execute("SELECT key FROM replies LIMIT ?", (rows,))]
    best = float("inf")
    for _ in range(5):
        cpu = time.process_time()
        for key in keys:
            hashlib.sha256(key.encode()).hexdigest()
            db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        best = min(best, (time.process_time() - cpu) / len(keys))
    db.close()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=400, help="items in the selection split")
    parser.add_argument("--repeats", type=int, default=10, help="runs per item (bv optimize --repeats)")
    parser.add_argument("--passes", type=int, default=5, help="timed passes of each (median reported)")
    parser.add_argument("--json", action="store_true", help="print machine-readable results")
    args = parser.parse_args()

    from bv.core.jsonl import Problems
    from bv.core.records import JUDGE_FIELDS
    from bv.optimize import stage_calls
    from bv.optimize.gate import finished_scores
    from bv.optimize.loop import load_items
    from bv.optimize.stage_calls import Engines, Model
    from bv.stages.prompt import Skill
    from bv.stages.request_settings import RequestSettings

    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="bv-rescore-"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)  # the items and the cache, on any exit
    data = work / "data"
    synth = [BV, "synth", "--n", str(args.items), "--seed", "0", "--out", str(data)]
    subprocess.run(synth, check=True, capture_output=True)
    items = load_items(data / "meta_data.jsonl", Problems())  # as bv optimize reads them
    model = [sys.executable, str(Path(__file__).with_name("reasoning_replies.py"))]
    server = subprocess.Popen(model, stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()  # type: ignore[union-attr]
    engines = Engines(
        target=Model("deepseek-reasoner", "openai", (url,), BENCH_KEY),
        optimizer=Model(),
        mode="rules",
        image_root=data,
        sending=RequestSettings(jobs=64, retries=0, cache=work / "cache.sqlite", quiet=True),
    )
    skill = Skill("bench", "Look at every cell before answering.")
    try:
        print(f"filling the cache: {args.items} items x {args.repeats} runs", file=sys.stderr)
        judged = stage_calls.rollout_and_judge(items, skill, engines, args.repeats, "bench: fill")
    finally:
        server.terminate()
        server.wait()
    current, _ = finished_scores(judged)
    n = len(judged)
    last_gate: list[dict[str, Any]] = []  # the latest gate's rows (earlier ones are let go, as the loop does)
    failed = sent = 0

    def gate() -> None:
        nonlocal failed, sent
        rows = gate_pass(items, skill, engines, args.repeats, current)[0]
        failed += sum(1 for r in rows if r.get("error")) + (len(rows) != n)
        sent += sum(1 for r in rows for t in r.get("turns") or [] if not t.get("cached"))
        last_gate[:] = rows

    def judge_and_compare(rollout_rows: list[dict[str, Any]]) -> None:
        # The gate's own call with the prompts and the rollout taken as done: `rollout_rows` are
        # the rows a gate's rollout returned, parsed anew for each pass (fresh objects, as the
        # cache gives them), outside the timing; only judging and the comparison remain.
        saved = stage_calls.prompts, stage_calls._rollout
        stage_calls.prompts = lambda *a, **k: []  # type: ignore[assignment]
        stage_calls._rollout = lambda *a, **k: rollout_rows  # type: ignore[assignment]
        try:
            judged = gate_pass(items, skill, engines, args.repeats, current)[0]
        finally:
            stage_calls.prompts, stage_calls._rollout = saved
        if len(judged) != n:
            sys.exit(f"judge + comparison: {len(judged)} rows judged of {n}")

    def replay(off: bool = False) -> None:
        nonlocal failed, sent
        if off:
            os.environ["BV_REPLAY"] = "0"
        try:
            records = stage_calls.prompts(items, skill, engines)
            rows = stage_calls._rollout(
                records, engines.target, engines, args.repeats, engines.max_turns, "bench"
            )
        finally:
            os.environ.pop("BV_REPLAY", None)
        failed += sum(1 for r in rows if r.get("error")) + (len(rows) != n)
        sent += sum(1 for r in rows for t in r.get("turns") or [] if not t.get("cached"))

    def rollout_rows() -> list[dict[str, Any]]:
        return json.loads(
            json.dumps([{k: v for k, v in row.items() if k not in JUDGE_FIELDS} for row in last_gate])
        )

    results = {}
    for name, run, prepare in (
        ("gate (cache + judge + comparison)", gate, None),
        ("replay (prompts + rollout, cache)", replay, None),
        ("  the same, BV_REPLAY=0 (engine)", lambda: replay(off=True), None),
        ("judge + comparison", judge_and_compare, rollout_rows),
    ):
        print(f"timing {name}: {args.passes} passes of {n} rows", file=sys.stderr)
        walls, cpus = timed_passes(args.passes, run, prepare)
        median, cpu = statistics.median(walls), statistics.median(cpus)
        results[name] = {
            "rows": n,
            "median_s": median,
            "min_s": min(walls),
            "rows_per_s": n / median,
            "cpu_s": cpu,
            "rows_per_cpu_s": n / cpu,
        }
    floor = floor_per_row(work / "cache.sqlite", n)
    results["floor: a lookup + a SHA-256 a row"] = {"rows": n, "rows_per_cpu_s": 1 / floor}
    load = (load_before, os.getloadavg()[0])
    clean = not failed and not sent
    target = results["judge + comparison"]["rows_per_s"]
    verdict = "PASS" if target >= TARGET_ROWS_PER_S and clean else "MISS"
    replayed = results["replay (prompts + rollout, cache)"]["rows_per_s"]
    replay_verdict = "PASS" if replayed >= TARGET_REPLAY_ROWS_PER_S and clean else "MISS"
    limits = {
        "judge + comparison": f"≥ {TARGET_ROWS_PER_S:,} {verdict}",
        "replay (prompts + rollout, cache)": f"≥ {TARGET_REPLAY_ROWS_PER_S:,} {replay_verdict}",
    }
    if args.json:
        print(json.dumps({"results": results, "failed": failed, "sent": sent, "load": load}, indent=2))
    else:
        print(f"load average (1 min) on {os.cpu_count()} CPUs: {load[0]:.1f} before, {load[1]:.1f} after")
        header = f"{'what':<36} {'rows':>6} {'median s':>9} {'min s':>7} {'rows/s':>9}"
        print(f"{header} {'rows/CPU s':>10}  target")
        for name, r in results.items():
            if "median_s" not in r:  # the floor: CPU only
                print(f"{name:<36} {r['rows']:>6} {'':>27} {r['rows_per_cpu_s']:>10,.0f}  (floor)")
                continue
            limit = limits.get(name, "(read beside)")
            print(
                f"{name:<36} {r['rows']:>6} {r['median_s']:>9.3f} {r['min_s']:>7.3f}"
                f" {r['rows_per_s']:>9,.0f} {r['rows_per_cpu_s']:>10,.0f}  {limit}"
            )
        print("rows/s: over the wall time (the target's); rows/CPU s: over this process's CPU time")
        print(f"rows with an error: {failed}; replies not from the cache: {sent} (both must be 0)")
    sys.exit(1 if failed or sent else 0)


if __name__ == "__main__":
    main()
