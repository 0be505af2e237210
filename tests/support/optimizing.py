"""`bv optimize` against the loopback models of support/skillserver.py: its data, both servers, its
command line, and a run as a real process."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bv.data.synth import TASK_FAMILIES
from support.commands import BIN
from support.fakeopenai import FakeOpenAI
from support.skillserver import ScriptedOptimizer, SkilledTarget

SUBTYPES = [subtype for _, subtype, _ in TASK_FAMILIES]


SEED_SKILL = "## Inspecting\n\n- Look at the whole picture first."


class Models:
    """The two loopback servers, started and stopped together."""

    def __init__(self, data_dir: Path, hold=lambda: False) -> None:
        self.target_model = SkilledTarget(data_dir, hold)
        self.optimizer_model = ScriptedOptimizer(SUBTYPES, hold)
        self.target = FakeOpenAI(self.target_model)
        self.optimizer = FakeOpenAI(self.optimizer_model)
        self.target.start()
        self.optimizer.start()

    def answered(self) -> int:
        return len(self.target.finished()) + len(self.optimizer.finished())

    def stop(self) -> None:
        self.target.stop()
        self.optimizer.stop()


def command(data_dir: Path, models: Models, out: Path, *extra: str) -> str:
    return " ".join(
        [
            f"optimize {data_dir / 'meta_data.jsonl'} --skill {data_dir / 'seed.md'} --out {out}",
            f"-m target --base-url {models.target.base_url} --api-key sk-test-target",
            f"--optimizer-model writer --optimizer-base-url {models.optimizer.base_url}",
            "--optimizer-api-key sk-test-optimizer --mode rules",
            "--ratio 2:3:3 --batch-size 8 --minibatch 8 --edits 2 --repeats 2 --epochs 3",
            f"--cache {out.parent / 'cache.sqlite'}",
            *extra,
        ]
    )


def start_bv(args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "bv"), *args.split()], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finished_steps(out: Path) -> int:
    try:
        return len((out / "history.jsonl").read_bytes().splitlines())
    except FileNotFoundError:
        return 0
