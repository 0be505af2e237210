"""Start-up benchmark: how long short `bv` commands take next to a bare `python -c pass`.

Each command runs `--runs` times (after two warm-up runs) and the median wall time is reported,
with its ratio to `python -c pass` (the venv's python) beside its target (TARGETS), and the
median CPU time (user + system) of each with its ratio, steadier on a shared machine. Output
goes to /dev/null (a file: `bv report` writes its plain table), and once more, for the table,
to a pseudo-terminal (rich's table, to read: no target). bv's bytecode is compiled first, as
`pip install` does. Then
`python -X importtime` shows the ten most expensive imports (cumulative) of `bv --help` and
`bv report`. See bench/README.md.

    python bench/startup_bench.py
    python bench/startup_bench.py --runs 40 --json
"""

from __future__ import annotations

import argparse
import compileall
import fcntl
import json
import os
import pty
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

import bv

BV = str(Path(sys.executable).with_name("bv")) if Path(sys.executable).with_name("bv").exists() else "bv"
# Issue 24: each command's median over `python -c pass`'s, measured in the same run.
TARGETS = {"bv --help": 3.0, "bv report --format json SMALL": 4.0, "bv report SMALL (table)": 4.0}
IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)")


def small_results(work: Path) -> Path:
    """40 judged rows: `bv synth --n 40 | bv prompt | bv rollout --backend chance | bv judge --mode rules`."""
    data = work / "data"
    subprocess.run(
        [BV, "synth", "--n", "40", "--seed", "0", "--out", str(data)], check=True, capture_output=True
    )
    results = work / "small.jsonl"
    stages = [
        [BV, "prompt", str(data / "meta_data.jsonl")],
        [BV, "rollout", "--backend", "chance", "--seed", "0", "--quiet"],
        [BV, "judge", "--mode", "rules", "--quiet"],
    ]
    procs: list[subprocess.Popen] = []
    with open(results, "wb") as out:
        for i, args in enumerate(stages):
            stdin = procs[-1].stdout if procs else subprocess.DEVNULL
            stdout = out if i == len(stages) - 1 else subprocess.PIPE
            procs.append(subprocess.Popen(args, stdin=stdin, stdout=stdout))
            if stdin is not subprocess.DEVNULL:
                stdin.close()  # the next stage holds the pipe now
    if any(p.wait() for p in procs):
        sys.exit("could not make the small results file")
    return results


def time_command(args: list[str], runs: int, terminal: bool = False) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + system, from the child's rusage) times of `runs` runs, after two
    warm-up runs that fill the OS caches. On a shared machine the wall time also counts waiting
    for a core; the CPU time does not. `terminal`: stdout is a 100-column pseudo-terminal, read
    as the child writes."""
    walls, cpus = [], []
    for i in range(runs + 2):
        stdout, reader = subprocess.DEVNULL, None
        if terminal:
            master, stdout = pty.openpty()
            fcntl.ioctl(stdout, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
            reader = threading.Thread(target=_drain, args=(master,))
            reader.start()
        started = time.perf_counter()
        child = subprocess.Popen(args, stdout=stdout, stderr=subprocess.DEVNULL)
        if terminal:
            os.close(stdout)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        if reader is not None:
            reader.join()
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            raise subprocess.CalledProcessError(child.returncode, args)
        if i >= 2:
            walls.append(wall)
            cpus.append(usage.ru_utime + usage.ru_stime)
    return walls, cpus


def _drain(fd: int) -> None:
    """Read a pseudo-terminal until its child closes it (so the child never waits to write)."""
    try:
        while os.read(fd, 65536):
            pass
    except OSError:  # the child closed the terminal
        pass
    os.close(fd)


def import_times(args: list[str], top: int = 10) -> dict:
    """The `top` imports by cumulative time, and the total, from PYTHONPROFILEIMPORTTIME."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    result = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    rows = []
    for line in result.stderr.splitlines():
        match = IMPORT_LINE.match(line)
        if match:
            own, cumulative, indent, name = match.groups()
            rows.append({"module": name, "self_ms": int(own) / 1e3, "cumulative_ms": int(cumulative) / 1e3})
            rows[-1]["depth"] = len(indent) // 2
    rows.sort(key=lambda r: r["cumulative_ms"], reverse=True)
    total = sum(r["self_ms"] for r in rows)
    return {"modules": len(rows), "total_ms": total, "top": rows[:top]}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20, help="timed runs per command (median reported)")
    parser.add_argument("--json", action="store_true", help="print machine-readable results")
    args = parser.parse_args()

    # bv's bytecode, as `pip install` compiles it: an editable install under PYTHONDONTWRITEBYTECODE=1
    # never caches it, and every run would compile bv's modules again (40-50 ms of `bv --help` here).
    compileall.compile_dir(Path(bv.__file__).parent, quiet=1)
    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="bv-startup-"))
    try:
        small = str(small_results(work))
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "bv --help": [BV, "--help"],
            "bv report --format json SMALL": [BV, "report", "--format", "json", small],
            "bv report SMALL (table)": [BV, "report", small],
            "bv report SMALL (terminal)": [BV, "report", small],
        }
        timings = {}
        for name, command in commands.items():
            print(f"timing {name} ({args.runs} runs)", file=sys.stderr)
            walls, cpus = time_command(command, args.runs, terminal="terminal" in name)
            timings[name] = {
                "median_s": statistics.median(walls),
                "min_s": min(walls),
                "max_s": max(walls),
                "cpu_median_s": statistics.median(cpus),
            }
        base = timings["python -c pass"]["median_s"]
        cpu_base = timings["python -c pass"]["cpu_median_s"]
        for name, t in timings.items():
            t["ratio"] = t["median_s"] / base
            t["cpu_ratio"] = t["cpu_median_s"] / cpu_base
            t["target"] = TARGETS.get(name)
            t["pass"] = t["target"] is None or t["ratio"] <= t["target"]
        imports = {
            "bv --help": import_times([BV, "--help"]),
            "bv report SMALL (table)": import_times([BV, "report", small]),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = (load_before, os.getloadavg()[0])

    if args.json:
        print(json.dumps({"timings": timings, "load": load, "imports": imports}, indent=2))
        return
    print(f"load average (1 min) on {os.cpu_count()} CPUs: {load[0]:.1f} before, {load[1]:.1f} after")
    print(
        f"{'command':<32} {'median ms':>9} {'min ms':>7} {'max ms':>7} {'ratio':>6} {'target':>6}"
        f"       {'CPU ms':>6} {'CPU ratio':>9}"
    )
    for name, t in timings.items():
        verdict = "" if t["target"] is None else ("PASS" if t["pass"] else "MISS")
        target = "" if t["target"] is None else f"≤{t['target']:g}x"
        print(
            f"{name:<32} {t['median_s'] * 1e3:>9.1f} {t['min_s'] * 1e3:>7.1f} {t['max_s'] * 1e3:>7.1f}"
            f" {t['ratio']:>5.2f}x {target:>6}  {verdict:<4}"
            f" {t['cpu_median_s'] * 1e3:>6.1f} {t['cpu_ratio']:>8.2f}x"
        )
    for name, info in imports.items():
        print(f"\n{name}: {info['modules']} modules imported, {info['total_ms']:.0f} ms in imports (one run)")
        print(f"  {'cumulative ms':>13} {'self ms':>8}  module (indented by import depth)")
        for row in info["top"]:
            module = "  " * row["depth"] + row["module"]
            print(f"  {row['cumulative_ms']:>13.1f} {row['self_ms']:>8.1f}  {module}")


if __name__ == "__main__":
    main()
