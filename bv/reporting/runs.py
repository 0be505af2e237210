"""A table of runs: `bv report runs/` (a folder of bv eval run folders) or `bv report runs/*`,
one row per run, each finished run compared per item with a baseline when their items match.

A row reads the run's summary.json (bv.core.run_summary) when it sums up the results beside it,
else its results.jsonl, as `bv report` would. A run whose bv eval holds the folder's lock now is
"running", its figures those summary.json has so far; a run with no results and no writer is
"stopped" (its bv eval re-run finishes it). Neither is compared.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from bv.core import run_folder
from bv.core.errors import Fatal
from bv.core.json_values import read_json_file
from bv.core.run_inputs import CONFIG, MAX_CONFIG_BYTES, RESULTS
from bv.core.run_summary import SUMMARY, newer, read_summary, text_of

if TYPE_CHECKING:
    from bv.reporting.report_types import Paired

FINISHED, RUNNING, STOPPED = "finished", "running", "stopped"
SORTS = ("accuracy", "name", "model")  # what the table may be sorted by


@dataclass
class RunRow:
    """One run of the table: who and what, its figures (None: not known yet), its state."""

    folder: Path
    name: str
    state: str
    model: str | None = None
    skill: str = "no skill"  # name@sha256[:8], as `by` skill names it
    items_sha256: str | None = None
    items: int | None = None
    runs: int | None = None
    accuracy: float | None = None
    ci95: list[float] | None = None
    interval: str | None = None
    errors: int | None = None  # rollout and judge errors
    cost_usd: float | None = None
    stage: str | None = None  # where a running or stopped run is
    problem: str | None = None  # why a finished run's rows could not be read

    @property
    def results(self) -> Path:
        return self.folder / RESULTS

    def as_json(self) -> dict[str, Any]:
        fields = ("name", "state", "model", "skill", "items_sha256", "items", "runs", "accuracy", "ci95")
        more = ("interval", "errors", "cost_usd", "stage", "problem")
        return {"folder": str(self.folder)} | {name: getattr(self, name) for name in (*fields, *more)}


def is_eval_folder(path: str) -> bool:
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, CONFIG))


def runs_asked(inputs: tuple[str, ...], side_by_side: bool = False) -> list[Path] | None:
    """The run folders to table, or None for a report as before: one folder holding run folders,
    or bv eval run folders given by path (not NAME=PATH) when one of them has no results yet
    (stopped, or still running), or there are three or more and no option of a side-by-side
    report (`side_by_side`: an HTML page, `by`, ...) is given."""
    if len(inputs) == 1 and os.path.isdir(inputs[0]) and not _is_run(inputs[0]):
        inside = sorted(entry.path for entry in os.scandir(inputs[0]) if is_eval_folder(entry.path))
        return [Path(path) for path in inside] or None
    if not inputs or not all(is_eval_folder(path) for path in inputs):
        return None
    unfinished = any(not os.path.isfile(os.path.join(path, RESULTS)) for path in inputs)
    wanted = unfinished or (len(inputs) >= 3 and not side_by_side)
    return [Path(path) for path in inputs] if wanted else None


def _is_run(path: str) -> bool:
    return any(os.path.exists(os.path.join(path, name)) for name in (CONFIG, RESULTS, "run.json"))


def _record(folder: Path) -> dict[str, Any]:
    try:
        record = read_json_file(folder / CONFIG, MAX_CONFIG_BYTES)
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def read_run(folder: Path) -> RunRow:
    """One run's row: from summary.json when it sums up the results beside it, else the rows."""
    record = _record(folder)
    given = record.get("options")
    options: dict[str, Any] = given if isinstance(given, dict) else {}
    summary = read_summary(folder)
    running = run_folder.running(folder)
    has_results = (folder / RESULTS).is_file()
    state = RUNNING if running else FINISHED if has_results else STOPPED
    name = text_of(options.get("label")) or folder.resolve().name or "run"
    skill_path, skill_sha = text_of(options.get("skill")), text_of(record.get("skill_sha256"))
    row = RunRow(
        folder,
        name,
        state,
        model=text_of(options.get("model")),
        skill=f"{Path(skill_path).stem}@{skill_sha[:8]}" if skill_path and skill_sha else "no skill",
        items_sha256=text_of(record.get("items_sha256")),
    )
    if summary is not None and (
        state != FINISHED or (summary["finished"] and newer(folder / SUMMARY, row.results))
    ):
        _from_summary(row, summary)
    elif state == FINISHED:
        _from_rows(row)
    return row


def _from_summary(row: RunRow, summary: Any) -> None:
    row.name = text_of(summary.get("label")) or row.name
    row.model = text_of(summary.get("model")) or row.model
    skill = summary.get("skill")
    if isinstance(skill, dict) and text_of(skill.get("sha256")):
        row.skill = f"{skill.get('name')}@{str(skill['sha256'])[:8]}"
    row.items_sha256 = text_of(summary.get("items_sha256")) or row.items_sha256
    for key in ("items", "runs", "accuracy", "interval", "cost_usd", "stage"):
        value = summary.get(key)
        setattr(row, key, value if isinstance(value, int | float | str) else None)
    ci = summary.get("ci95")
    row.ci95 = ci if isinstance(ci, list) and len(ci) == 2 else None
    counts = [summary.get("errors"), summary.get("judge_errors")]
    row.errors = (
        sum(c for c in counts if isinstance(c, int)) if any(isinstance(c, int) for c in counts) else None
    )


def _from_rows(row: RunRow) -> None:
    """A finished run with no summary of its results (an older bv): its rows, read as bv report does."""
    import io

    from bv.core.jsonl import Problems
    from bv.reporting.report import Input, build_report

    try:
        built, _ = build_report([Input(row.name, str(row.results))], Problems(stream=io.StringIO()))
    except Fatal as exc:
        row.problem = str(exc)
        return
    if "inputs" in built:  # one input makes one Summary
        return
    overall = built["overall"]
    row.items, row.runs, row.accuracy, row.ci95 = (
        overall["n"],
        overall["runs"],
        overall["accuracy"],
        overall["ci95"],
    )
    row.interval, row.errors = built["interval"], overall["errors"] + overall["judge_errors"]
    row.cost_usd = built["usage"]["cost_usd"]
    row.model = row.model or (built["models"][0] if len(built["models"]) == 1 else None)
    row.skill = built["provenance"].get("made_by", {}).get("skill", row.skill)


def unique_names(rows: list[RunRow]) -> None:
    """Names made unique (`r`, `r-2`), as a report's inputs' are: comparisons name runs by them."""
    taken: set[str] = set()
    for row in rows:
        unique, k = row.name, 2
        while unique in taken:
            unique, k = f"{row.name}-{k}", k + 1
        row.name = unique
        taken.add(unique)


def sort_rows(rows: list[RunRow], by: str) -> list[RunRow]:
    """Finished runs first; then by accuracy (highest first), name or model."""
    if by == "accuracy":
        return sorted(
            rows, key=lambda r: (r.state != FINISHED, -(r.accuracy if r.accuracy is not None else -1))
        )
    if by == "model":
        return sorted(rows, key=lambda r: (r.state != FINISHED, r.model or "", r.name))
    return sorted(rows, key=lambda r: (r.state != FINISHED, r.name))


@dataclass
class Verdict:
    run: str
    baseline: str
    line: str  # the comparison's one line, or why it was not made
    pair: Paired | None = None


def compare_runs(rows: list[RunRow], baseline: str | None, adjust: str = "holm") -> list[Verdict]:
    """Each finished run against the baseline (`baseline`, else the first finished run given),
    per item, where both ran the same items file, the p-values adjusted over these comparisons
    (`adjust`, as `bv report` adjusts over its inputs); the others say why they were not compared."""
    finished = [r for r in rows if r.state == FINISHED and r.problem is None]
    names = [r.name for r in rows]
    if baseline is not None and baseline not in names:
        raise Fatal(f"`baseline` {baseline}: no run of that name (runs: {', '.join(names)})")
    base = next((r for r in rows if r.name == baseline), finished[0] if finished else None)
    if base is None:
        return []
    if base not in finished:
        raise Fatal(f"`baseline` {base.name} is {base.state}: no results to compare with")
    out = []
    for row in rows:
        if row is base:
            continue
        if row not in finished:
            stage = f" (in its {row.stage})" if row.state == RUNNING and row.stage else ""
            why = f"{row.state}{stage}, not compared" if row.problem is None else row.problem
            out.append(Verdict(row.name, base.name, f"{row.name}: {why}"))
        elif row.items_sha256 is None or row.items_sha256 != base.items_sha256:
            out.append(
                Verdict(row.name, base.name, f"{row.name}: other items than {base.name}, not compared")
            )
        else:
            out.append(_paired(base, row))
    _adjusted([v for v in out if v.pair is not None], adjust)
    return out


def _adjusted(compared: list[Verdict], adjust: str) -> None:
    """Several comparisons: each verdict read on its p adjusted over them all."""
    from bv.core.stats import ADJUSTMENTS
    from bv.reporting.compare import verdict

    if len(compared) < 2:
        return
    pairs = [cast("Paired", v.pair) for v in compared]
    for v, pair, p in zip(compared, pairs, ADJUSTMENTS[adjust]([p["p_value"] for p in pairs]), strict=True):
        pair["p_adjusted"] = p
        pair["verdict"] = verdict(pair, adjust)
        v.line = pair["verdict"] + "."


def _paired(base: RunRow, row: RunRow) -> Verdict:
    import io

    from bv.core.jsonl import Problems
    from bv.reporting.report import CompareOptions, Input, build_report

    inputs = [Input(base.name, str(base.results)), Input(row.name, str(row.results))]
    built, _ = build_report(
        inputs, Problems(stream=io.StringIO()), options=CompareOptions(baseline=base.name)
    )
    comparison = built.get("comparison") if "inputs" in built else None
    if not comparison or not comparison["pairs"]:
        return Verdict(row.name, base.name, f"{row.name}: no rows in common with {base.name}")
    pair = comparison["pairs"][0]
    return Verdict(row.name, base.name, pair["verdict"] + ".", pair)


def runs_table(
    folders: list[Path], baseline: str | None = None, sort: str = "accuracy", adjust: str = "holm"
) -> tuple[list[RunRow], list[Verdict]]:
    """The runs' rows, sorted, and each finished run's verdict against the baseline, in the
    table's order: what `bv report runs/` prints and bv.api.runs returns."""
    rows = [read_run(folder) for folder in folders]
    unique_names(rows)
    verdicts = compare_runs(rows, baseline, adjust)
    rows = sort_rows(rows, sort)
    order = {row.name: n for n, row in enumerate(rows)}
    verdicts.sort(key=lambda v: order[v.run])
    return rows, verdicts
