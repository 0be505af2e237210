"""What `bv eval` and `bv optimize` hand their trackers, in one call each: the run opened on its
folder with its parameters, each finished step, and the end (figures, files, status)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bv import __version__
from bv.tracking.figures import flat_params, history_metrics, json_sha256, test_metrics
from bv.tracking.options import TrackOptions
from bv.tracking.tracker import Tracking, open_tracking

OPTIMIZE_FILES = ("best.md", "report.md", "report.html", "test.json")


def open_optimize(out: Path, track: TrackOptions | None, identity: Mapping[str, Any]) -> Tracking:
    """The trackers of a `bv optimize` run (none asked: nothing imported, no call), started or
    continued, with run.json's settings one parameter each (`options.steps`, `target.model`), the
    split as its SHA-256 (not its ids), never where the models are served."""
    tracking = open_tracking(out, track)
    if tracking.backends:
        tracking.start(out.resolve().name, {"bv.command": "optimize", "bv.version": __version__})
        kept = {k: v for k, v in identity.items() if k not in ("split", "endpoints")}
        tracking.params(flat_params(kept | {"split_sha256": json_sha256(identity.get("split"))}))
    return tracking


def skill_files(out: Path, row: Mapping[str, Any]) -> list[Path]:
    """The skill version a history row made: the seed's, or a step's candidate (when it had one)."""
    ref = row.get("skill") if row.get("kind") == "seed" else row.get("candidate")
    return [out / ref["file"]] if ref else []


def log_steps(tracking: Tracking, out: Path, history: Sequence[Mapping[str, Any]]) -> None:
    """The history's steps each tracker has not had yet, each with its skill version."""
    if tracking.backends:
        tracking.steps(history, history_metrics, lambda row: skill_files(out, row))


def end_optimize(tracking: Tracking, out: Path, test: Mapping[str, Any], rows_failed: bool) -> None:
    """The test comparison, the run's files, and its status (FAILED when rows failed, as the
    command's exit status)."""
    tracking.metrics(test_metrics(test))
    tracking.artifacts([out / name for name in OPTIMIZE_FILES])
    tracking.finish("FAILED" if rows_failed else "FINISHED")
