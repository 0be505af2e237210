"""A run folder given where a results file is read (`bv report`, `bv export`, `bv merge`): which
file holds its judged rows, what the run is called, and where its images are.

A `bv eval` folder holds results.jsonl beside config.json; the run is called by its `--label`,
else by the folder's name (the default folder, runs/<model>-<skill>, already says which model
and skill), and its images are under its items file's folder, which config.json records. A `bv
optimize` folder gives its best skill's judged rows on the test split (test-best.jsonl; the
seed's are in test-seed.jsonl beside it), named after the folder. Every text from config.json
is data: only a string is taken as a name or a path, and the file is read bounded.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bv.core.errors import Fatal

RESULTS = "results.jsonl"
# A bv optimize folder's judged test rows, by skill (bv.optimize.loop writes them with test.json).
TEST_ROWS = {"seed": "test-seed.jsonl", "best": "test-best.jsonl"}
CONFIG = "config.json"
_MAX_CONFIG = 4 * 1024 * 1024  # a config.json is a few kB; a bigger one is not read as one


@dataclass(frozen=True)
class RunInput:
    """What a run folder gives a reader: its results file, its name, its images' folder, and
    whether it was judged by the rules alone on purpose (`--mode rules`)."""

    results: str
    name: str
    image_root: Path | None
    by_rules: bool = False


def _config(folder: Path) -> dict[str, Any]:
    """config.json's options, or {} when it is missing, too big or not a JSON object."""
    path = folder / CONFIG
    try:
        with open(path, "rb") as stream:
            data = stream.read(_MAX_CONFIG + 1)
        record = json.loads(data) if len(data) <= _MAX_CONFIG else None
    except (OSError, ValueError):
        return {}
    options = record.get("options") if isinstance(record, dict) else None
    return options if isinstance(options, dict) else {}


def run_folder(path: str) -> RunInput | None:
    """The run a folder holds; None when `path` is not a folder (a file, or stdin's "-"). A folder
    that holds no bv eval run is an error that says what it is and what to give instead."""
    if path == "-" or not os.path.isdir(path):
        return None
    folder = Path(path)
    if not (folder / RESULTS).is_file():
        if (folder / "run.json").is_file():
            best = folder / TEST_ROWS["best"]
            if best.is_file():
                return RunInput(str(best), folder.resolve().name or "run", None)
            raise Fatal(
                f"{path}: a bv optimize run folder with no {TEST_ROWS['best']} yet (its judged rows on"
                " the test split, written when the run ends): re-run its bv optimize to finish it"
            )
        if (folder / CONFIG).is_file():
            raise Fatal(f"{path}: a bv eval run with no {RESULTS} yet (re-run its bv eval to finish it)")
        raise Fatal(f"{path}: a folder, neither a results file nor a bv eval run folder")
    options = _config(folder)
    label = options.get("label")
    name = label if isinstance(label, str) and label else folder.resolve().name or "run"
    items = options.get("items")
    root = Path(items).parent if isinstance(items, str) and Path(items).is_absolute() else None
    mode = options.get("mode", options.get("judge_mode"))  # judge_mode: config.json before issue 32
    return RunInput(str(folder / RESULTS), name, root, mode == "rules")


def results_path(path: str) -> str:
    """The file to read for `path`: a run folder's results.jsonl, else `path` itself."""
    run = run_folder(path)
    return path if run is None else run.results
