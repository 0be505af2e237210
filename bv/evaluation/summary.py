"""What `bv eval` writes to its folder's summary.json (bv.core.run_summary): who and what at the
start, the stage it is at as it goes, the report's overall figures at the end."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from bv import __version__
from bv.core.errors import BVError
from bv.core.run_summary import RunSummary, SkillRef, now, write_summary

if TYPE_CHECKING:
    from bv.evaluation.config import EvalConfig
    from bv.reporting.report_types import Summary
    from bv.stages.prompt import Skill


def skill_ref(skill: Skill | None) -> SkillRef | None:
    """The skill as rows record it: None for none, or one with no text."""
    return {"name": skill.name, "sha256": skill.sha256} if skill and skill.text else None


@dataclasses.dataclass
class SummaryFile:
    """summary.json of one run folder, rewritten whole at each step."""

    folder: Path
    summary: RunSummary

    @classmethod
    def start(
        cls, config: EvalConfig, label: str, skill: Skill | None, llm_judge: bool, items_sha256: str
    ) -> SummaryFile:
        """The run's first summary: who and what, at its first stage."""
        summary: RunSummary = {
            "bv_version": __version__,
            "label": label,
            "model": config.model or config.backend,
            "judge": list(config.judge_model) if llm_judge else [],
            "skill": skill_ref(skill),
            "items_sha256": items_sha256,
            "finished": False,
            "stage": "prompt",
            "updated_at": now(),
            "items": None,
            "runs": config.repeats,
            "rows": None,
            "accuracy": None,
            "ci95": None,
            "interval": None,
            "errors": None,
            "judge_errors": None,
            "cost_usd": None,
        }
        file = cls(config.out, summary)
        file.write()
        return file

    def write(self) -> None:
        self.summary["updated_at"] = now()
        write_summary(self.folder, self.summary)

    def stage(self, stage: str, items: int | None = None, cost_usd: float | None = None) -> None:
        """The run has reached `stage` (or stopped: `stopped`), with its items and spend so far."""
        self.summary["stage"] = stage
        if items is not None:
            self.summary["items"] = items
        if cost_usd is not None:
            self.summary["cost_usd"] = cost_usd
        self.write()

    def stopped(self) -> None:
        """The run stopped before its end; said if it can be (a full disk is not a second error)."""
        with contextlib.suppress(OSError, BVError):
            self.stage("stopped")

    def finish(self, report: Summary) -> None:
        """The report's overall figures (the cost its rows record): the run is finished."""
        overall = report["overall"]
        self.summary |= {
            "finished": True,
            "stage": "finished",
            "items": overall["n"],
            "runs": overall["runs"],
            "rows": overall["rows"],
            "accuracy": overall["accuracy"],
            "ci95": overall["ci95"],
            "interval": report["interval"],
            "errors": overall["errors"],
            "judge_errors": overall["judge_errors"],
            "cost_usd": report["usage"]["cost_usd"],
        }
        self.write()
