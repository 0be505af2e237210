"""Weights & Biases through `wandb.init` (WANDB_MODE=offline honoured: the run is written under
./wandb, or $WANDB_DIR, to sync later). The only importer of the optional `wandb`; it runs in the
tracker's own process (bv.tracking.worker), whose command line holds none of bv's options (W&B
records the command line) and which has no terminal to prompt on. Without a W&B key the run is
written offline, said once, instead of W&B asking for one."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bv.core import environment

EXIT_CODES = {"FINISHED": 0, "FAILED": 1, "KILLED": 130}
NO_KEY = (
    "no W&B key (`wandb login`, or WANDB_API_KEY): the run is written offline under ./wandb"
    " (or $WANDB_DIR); `wandb sync` it there to upload it"
)


def has_key(wandb: Any) -> bool:
    """Whether W&B finds a key (WANDB_API_KEY, its settings, ~/.netrc) without asking for one."""
    try:
        return bool(wandb.login(prompt=False, verify=False))
    except TypeError:  # a wandb before login's `prompt` (0.2x): its own lookup, which never asks
        return bool(getattr(getattr(wandb, "api", None), "api_key", None))


class WandbBackend:
    kind = "wandb"

    def __init__(self, project: str | None, entity: str | None) -> None:
        import wandb

        self.wandb = wandb
        self.project = project or environment.text("WANDB_PROJECT") or "bv"
        self.entity = entity or environment.text("WANDB_ENTITY")
        self.mode = environment.text("WANDB_MODE") or "online"
        self.note: str | None = None
        if self.mode == "online" and not has_key(wandb):
            self.mode, self.note = "offline", NO_KEY
        self.where = f"{self.entity + '/' if self.entity else ''}{self.project} ({self.mode})"
        self.run: Any = None

    def start(self, name: str, run_id: str | None, tags: Mapping[str, str]) -> str:
        # No code, no git state (a remote's URL may hold a token), the console left alone.
        settings = self.wandb.Settings(console="off", silent=True, disable_code=True, disable_git=True)
        self.run = self.wandb.init(
            project=self.project,
            entity=self.entity,
            name=name,
            id=run_id,
            resume="allow" if run_id else None,
            mode=self.mode,
            tags=[f"{k}:{v}"[:64] for k, v in tags.items()],
            settings=settings,
        )
        return str(self.run.id)

    def params(self, values: Mapping[str, str]) -> None:
        self.run.config.update(dict(values), allow_val_change=True)

    def metrics(self, values: Mapping[str, float], step: int | None) -> None:
        if step is None:
            self.run.summary.update(dict(values))
            self.run.log(dict(values))
        else:
            self.run.log(dict(values), step=step)

    def last_step(self, key: str) -> int | None:
        """W&B's own step counter of a resumed run (its summary's `_step`): the last step logged."""
        try:
            step = self.run.summary.get("_step") if key in self.run.summary.keys() else None
        except Exception:  # an offline run's summary is not fetched: W&B drops a step it has itself
            return None
        return step if isinstance(step, int) else None

    def artifact(self, path: str, folder: str | None) -> None:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{self.run.id}-{folder or 'run'}-{Path(path).name}")[:128]
        artifact = self.wandb.Artifact(name, type=folder or "file")
        artifact.add_file(path)
        self.run.log_artifact(artifact)

    def finish(self, status: str) -> None:
        self.run.finish(exit_code=EXIT_CODES.get(status, 1))
