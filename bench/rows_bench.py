"""Judged-rows benchmark: `bv judge --mode rules`, `bv report`, `bv merge` and `bv export` at
100k and 1M rows.

Each command is timed next to a bare Python loop over the same file, run the same way (its own
process, spawn to exit, alternating with the command so both see the same load; medians of
--repeat runs): `json.loads` of every line for the report, `json.loads` + `json.dumps`
(written out) for judge, merge and export. The targets are stated against those json loops;
since bv report parses with orjson and bv judge writes with it, the same loops with orjson are
timed too and their ratio printed beside. Peak RSS comes from `os.wait4`, of that process
alone. See bench/README.md and docs/performance.md.

The rows are made by bv itself: `bv synth` items, `bv prompt | bv rollout --repeats 25 | bv
judge --mode rules` against a loopback reasoning model (bench/reasoning_replies.py: DeepSeek's
reply shape, reasoning and reply texts as long as the official results') gives 10k judged rows
with real prompts, file:// image URLs, reasoning, usage and provenance; the 100k and 1M files
are those rows over and over with the runs renumbered, so every (id, run) is distinct and every
row keeps bv's exact shape. `bv report` includes its statistics over items (the intervals).

    python bench/rows_bench.py                      # 100k and 1M rows, medians of 3 (~15 minutes)
    python bench/rows_bench.py --sizes 100000 --json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BV = str(Path(sys.executable).with_name("bv")) if Path(sys.executable).with_name("bv").exists() else "bv"
ITEMS = 400
BASE_RUNS = 25  # ITEMS x BASE_RUNS rows made by bv; larger files repeat them with the runs renumbered
ROWS_VERSION = "r2"  # in the file names: rows of another shape (before reasoning replies) are made anew
BENCH_KEY = "sk-bench-" + "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH"  # as long as OpenAI's
# Issue 24: judge (rules) and report within 1.25x of their json loops; merge as issue 11 set it.
TARGETS = {"judge": 1.25, "report json": 1.25, "report table": 1.25, "merge": 2.0, "export": None}
RSS_TARGET_MB = 150  # for judge, report and export

BARE_LOADS = "import json,sys\nfor line in open(sys.argv[1],'rb'):\n    json.loads(line)\n"
BARE_LOADS_DUMPS = (
    "import json,sys\nout=open(sys.argv[2],'w')\n"
    "for line in open(sys.argv[1],'rb'):\n    out.write(json.dumps(json.loads(line))+'\\n')\n"
)
# The same loops with orjson, which bv parses (report) and writes (judge) with: printed beside the
# json ones, which the targets are stated against (issue 11), so both ratios are on the table.
ORJSON_LOADS = "import orjson,sys\nfor line in open(sys.argv[1],'rb'):\n    orjson.loads(line)\n"
ORJSON_LOADS_DUMPS = (
    "import orjson,sys\nout=open(sys.argv[2],'wb')\n"
    "for line in open(sys.argv[1],'rb'):\n    out.write(orjson.dumps(orjson.loads(line))+b'\\n')\n"
)


def timed(args: list[str], stdin: Path | None = None, stdout: Path | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one process, spawn to exit (RSS from os.wait4)."""
    started = time.perf_counter()
    with open(stdin or os.devnull, "rb") as inp, open(stdout or os.devnull, "wb") as out:
        pid = os.posix_spawn(
            args[0],
            args,
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, inp.fileno(), 0),
                (os.POSIX_SPAWN_DUP2, out.fileno(), 1),
            ],
        )
        _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{' '.join(args)} exited {code}")
    return wall, usage.ru_maxrss / 1024


def make_rows(work: Path, size: int) -> Path:
    """`size` judged rows made by bv (see the module docstring); reused when already there."""
    path = work / f"judged-{ROWS_VERSION}-{size}.jsonl"
    if path.exists():
        return path
    base = work / f"judged-{ROWS_VERSION}-base.jsonl"
    if not base.exists():
        data = work / "data"
        if not (data / "meta_data.jsonl").exists():
            subprocess.run([BV, "synth", "--n", str(ITEMS), "--seed", "0", "--out", str(data)], check=True)
        print(
            f"making {ITEMS * BASE_RUNS} judged rows with bv and a loopback reasoning model", file=sys.stderr
        )
        server = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("reasoning_replies.py"))],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            url = server.stdout.readline().strip()  # type: ignore[union-attr]
            pipeline = (
                f"{BV} prompt {data}/meta_data.jsonl | {BV} rollout --base-url {url} --api-key {BENCH_KEY}"
                f" -m deepseek-reasoner --repeats {BASE_RUNS} -j 64 --quiet --no-cache"
                f" | {BV} judge --mode rules --quiet > {base}.part"
            )
            subprocess.run(["bash", "-o", "pipefail", "-c", pipeline], check=True)
        finally:
            server.terminate()
            server.wait()
        Path(f"{base}.part").rename(base)
    copies = -(-size // (ITEMS * BASE_RUNS))
    with open(f"{path}.part", "w") as out:
        written = 0
        for copy in range(copies):
            for line in open(base, encoding="utf-8"):
                if written == size:
                    break
                row = json.loads(line)
                row["run"] += copy * BASE_RUNS
                out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
                written += 1
    Path(f"{path}.part").rename(path)
    return path


def rollout_rows(work: Path, judged: Path) -> Path:
    """The judged rows minus the judge's fields: what `bv judge` reads."""
    path = judged.with_name(judged.stem.replace("judged", "rollout") + ".jsonl")
    if not path.exists():
        from bv.core.records import JUDGE_FIELDS

        fields = set(JUDGE_FIELDS)
        with open(f"{path}.part", "w") as out:
            for line in open(judged, encoding="utf-8"):
                row = {k: v for k, v in json.loads(line).items() if k not in fields}
                out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
        Path(f"{path}.part").rename(path)
    return path


def medians(commands: list[list[str]], repeat: int, outs: list[Path | None]) -> list[tuple[float, float]]:
    """(median wall, peak RSS) of each command, run in turn `repeat` times so that all see the same
    load; `outs`: where each one's stdout goes (None: /dev/null)."""
    times: list[list[tuple[float, float]]] = [[] for _ in commands]
    for _ in range(repeat):
        for command, out, runs in zip(commands, outs, times, strict=True):
            runs.append(timed(command, stdout=out))
    return [(statistics.median(p[0] for p in runs), max(p[1] for p in runs)) for runs in times]


def measure(work: Path, size: int, repeat: int, only: set[str] | None = None) -> list[dict]:
    judged = make_rows(work, size)
    rollout = rollout_rows(work, judged)
    out = work / "out.jsonl"
    py = sys.executable

    def loops(dumps: bool, path: Path) -> tuple[list[str], list[str]]:
        """The json loop (the target's) and the orjson one over `path`; `dumps`: written out too."""
        scripts = (BARE_LOADS_DUMPS, ORJSON_LOADS_DUMPS) if dumps else (BARE_LOADS, ORJSON_LOADS)
        files = [str(path), str(out)] if dumps else [str(path)]
        return [py, "-c", scripts[0], *files], [py, "-c", scripts[1], *files]

    cases = [
        (
            "judge",
            [BV, "judge", "--mode", "rules", "--quiet", str(rollout)],
            loops(True, rollout),
            "loads+dumps",
        ),
        ("report json", [BV, "report", "--format", "json", str(judged)], loops(False, judged), "loads"),
        ("report table", [BV, "report", str(judged)], loops(False, judged), "loads"),
        ("merge", [BV, "merge", str(judged), "-o", str(out)], loops(True, judged), "loads+dumps"),
        (
            "export",
            [BV, "export", str(judged), "--format", "official", "-o", str(work / "official")],
            loops(True, judged),
            "loads+dumps",
        ),
    ]
    results = []
    for name, args, (bare_args, orjson_args), loop in cases:
        if only and name not in only:
            continue
        bare, fast, (wall, rss) = medians(
            [bare_args, orjson_args, args], repeat, [None, None, out if name == "judge" else None]
        )
        ratio = wall / bare[0]
        rss_ok = name == "merge" or rss <= RSS_TARGET_MB
        target = TARGETS[name]
        results.append(
            {
                "rows": size,
                "command": name,
                "wall_s": round(wall, 2),
                "bare_loop": loop,
                "bare_s": round(bare[0], 2),
                "bare_rss_mb": round(bare[1], 1),
                "ratio": round(ratio, 2),
                "orjson_bare_s": round(fast[0], 2),
                "ratio_to_orjson": round(wall / fast[0], 2),
                "target": target,
                "rss_mb": round(rss, 1),
                "verdict": "PASS" if (target is None or ratio <= target) and rss_ok else "MISS",
            }
        )
        print(
            f"  {size} {name}: {wall:.2f} s vs {bare[0]:.2f} s (json), {fast[0]:.2f} s (orjson),"
            f" {rss:.0f} MB",
            file=sys.stderr,
        )
    out.unlink(missing_ok=True)
    shutil.rmtree(work / "official", ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated row counts")
    parser.add_argument("--work", type=Path, default=Path("build/bench-rows"), help="where the row files go")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each (medians), alternating with its bare loop"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--only", help="comma-separated commands to time (judge, report json, report table, merge)"
    )
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        results += measure(args.work, size, args.repeat, set(args.only.split(",")) if args.only else None)
    load_after = os.getloadavg()
    if args.json:
        print(json.dumps({"load": [load_before, load_after], "results": results}, indent=2))
        return
    print(
        f"judged rows bench on {os.cpu_count()} cores; load average {load_before[0]:.2f} before,"
        f" {load_after[0]:.2f} after (the machine is shared)"
    )
    print(
        "ratio: over the json loop (the target's); orjson: the same loop with orjson, which bv"
        " report parses and bv judge writes with"
    )
    header = f"{'rows':>8} {'command':<13} {'wall s':>7} {'bare loop':<12} {'bare s':>7} {'ratio':>6}"
    header += f" {'target':>6} {'orjson s':>8} {'ratio':>6}"
    print(header + f" {'peak RSS MB':>11} {'bare RSS':>8}  verdict")
    for r in results:
        rss_target = "" if r["command"] == "merge" else f" (RSS ≤{RSS_TARGET_MB})"
        target = "-" if r["target"] is None else f"≤{r['target']:g}"
        print(
            f"{r['rows']:>8} {r['command']:<13} {r['wall_s']:>7.2f} {r['bare_loop']:<12} {r['bare_s']:>7.2f}"
            f" {r['ratio']:>6.2f} {target:>6} {r['orjson_bare_s']:>8.2f}"
            f" {r['ratio_to_orjson']:>6.2f} {r['rss_mb']:>11.1f} {r['bare_rss_mb']:>8.1f}"
            f"  {r['verdict']}{rss_target}"
        )


if __name__ == "__main__":
    main()
