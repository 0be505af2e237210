"""A run folder given where a results file is read (`bv report`, `bv export`, `bv merge`): which
file holds its judged rows, what the run is called, and where its images are.

A `bv eval` folder holds results.jsonl beside config.json; the run is called by its `--label`,
else by the folder's name (the default folder, runs/<model>-<skill>, already says which model
and skill), and its images are under its items file's folder, which config.json records. A `bv
optimize` folder gives the judged test-split rows of the skill it handed back as best.md: the
best skill's (test-best.jsonl) when the test split confirmed it, else the seed's (test-seed.jsonl),
named after the folder, checked against the figures its test.json records (a row edited since
the run wrote it is said, not reported silently).
Every text from config.json is data: only a string is taken as a name or a path, and the file is
read bounded (size and nesting).
"""

from __future__ import annotations

import io
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bv.core.errors import BadRecord, Fatal
from bv.core.json_values import read_json_file

RESULTS = "results.jsonl"
# A bv optimize folder's judged test rows, by skill (bv.optimize.loop writes them with test.json).
TEST_ROWS = {"seed": "test-seed.jsonl", "best": "test-best.jsonl"}
CONFIG = "config.json"
TEST_RECORD = "test.json"  # a bv optimize folder's record of the test split's figures
MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a config.json or test.json is a few kB; a bigger one is not read as one


@dataclass(frozen=True)
class RunInput:
    """What a run folder gives a reader: its results file, its name, its images' folder, and
    whether it was judged by the rules alone on purpose (`--mode rules`)."""

    results: str
    name: str
    image_root: Path | None
    by_rules: bool = False
    unconfirmed: str | None = None  # why its rows are not those its own record describes


def _config(folder: Path) -> dict[str, Any]:
    """config.json's options, or {} when it is missing, too big or not a JSON object."""
    try:
        record = read_json_file(folder / CONFIG, MAX_CONFIG_BYTES)
    except (OSError, BadRecord):
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
            handed_back = _handed_back(folder / TEST_RECORD)
            rows = folder / TEST_ROWS[handed_back]
            if rows.is_file():
                name = folder.resolve().name or "run"
                return RunInput(str(rows), name, None, unconfirmed=_unconfirmed(rows, handed_back))
            raise Fatal(
                f"{path}: a bv optimize run folder with no {TEST_ROWS[handed_back]} yet (its judged rows on"
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


def _handed_back(record_path: Path) -> str:
    """`seed` when test.json says the test split did not confirm the best skill (best.md is then
    the seed), else `best` (a record that cannot be read is said by `_unconfirmed`)."""
    try:
        record = read_json_file(record_path, MAX_CONFIG_BYTES)
    except (OSError, BadRecord):
        return "best"
    handed = record.get("handed_back") if isinstance(record, dict) else None
    return "seed" if isinstance(handed, dict) and handed.get("skill") == "seed" else "best"


def _unconfirmed(rows: Path, skill: str = "best") -> str | None:
    """Why a bv optimize folder's rows of `skill` (best or seed) are not the ones its test.json
    describes (that skill's accuracy over items, finished rows only, and how many items), or None
    when they agree.
    The folder records these figures, not the rows' hash: a row edited since the run wrote them
    (a wrong answer made right) changes them, and the report says so rather than print it."""
    from bv.core.jsonl import Problems, read_json_lines
    from bv.core.stats import item_means

    record_path = rows.with_name(TEST_RECORD)
    try:
        record = read_json_file(record_path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return f"{record_path} is missing, so the rows of {rows} cannot be checked: re-run its bv optimize"
    except (OSError, BadRecord) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"{record_path} cannot be read ({why}), so the rows of {rows} cannot be checked"
    best = record.get(skill) if isinstance(record, dict) else None
    if not isinstance(best, dict):
        return (
            f"{record_path} records no figures of the {skill} skill, so the rows of {rows} cannot be checked"
        )
    scores: dict[str, list[float]] = {}
    for _, row in read_json_lines([str(rows)], Problems(stream=io.StringIO()), fast=True):
        if isinstance(row, dict) and not row.get("error") and row.get("hard") is not None:
            scores.setdefault(str(row.get("id")), []).append(1.0 if row.get("hard") == 1 else 0.0)
    means = list(item_means(scores).values())
    accuracy = sum(means) / len(means) if means else None
    recorded, items = best.get("accuracy"), best.get("n_items")
    same = (accuracy is None and recorded is None) or (
        accuracy is not None
        and isinstance(recorded, int | float)
        and math.isclose(accuracy, recorded, rel_tol=1e-9, abs_tol=1e-12)
    )
    if same and items == len(means):
        return None
    return (
        f"{rows}: its rows give the {skill} skill {_share(accuracy)} over {len(means)} items, but"
        f" {record_path} records {_share(recorded)} over {items} items: the rows were changed"
        " after bv optimize wrote them (re-run its bv optimize to write them again)"
    )


def _share(value: object) -> str:
    return f"{value:.2%}" if isinstance(value, int | float) and not isinstance(value, bool) else "none"


def results_path(path: str) -> str:
    """The file to read for `path`: a run folder's results.jsonl, else `path` itself."""
    run = run_folder(path)
    return path if run is None else run.results
