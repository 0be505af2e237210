"""The tracking settings, declared once (bv.core.settings): `bv eval` and `bv optimize` take them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bv.core.errors import BadConfig
from bv.core.redaction import public_url
from bv.core.settings import setting

KINDS = ("mlflow", "wandb")


def public_target(text: str) -> str:
    """A target fit to record or print: its URI without user:password (nor query)."""
    kind, sep, uri = text.partition(":")
    return f"{kind}{sep}{public_url(uri)}" if uri else text


def targets(given: str | Iterable[str]) -> tuple[str, ...]:
    """`track` as either face gives it: one text or several, each `mlflow`, `mlflow:URI` or
    `wandb`; BadConfig for any other (a tracker named twice is refused too)."""
    texts = (given,) if isinstance(given, str) else tuple(given)
    seen: set[str] = set()
    for text in texts:
        kind, sep, uri = text.partition(":")
        if kind not in KINDS or (kind == "wandb" and sep) or (sep and not uri):
            raise BadConfig(f"{public_target(text)!r} is not mlflow, mlflow:URI or wandb")
        if kind in seen:
            raise BadConfig(f"{kind} is named twice")
        seen.add(kind)
    return texts


@dataclass(frozen=True)
class TrackOptions:
    """Which trackers a run logs to, and under which project (W&B) or experiment (MLflow)."""

    track: tuple[str, ...] = setting(
        (),
        "--track",
        multiple=True,
        convert=targets,
        metavar="mlflow[:URI]|wandb",
        help="Log the run to an experiment tracker (repeatable): mlflow (at URI, else"
        " $MLFLOW_TRACKING_URI, else ./mlflow.db) or wandb (offline with WANDB_MODE=offline or"
        " without a W&B key); needs pip install 'babyvision-bv[mlflow]' or '[wandb]' (docs/tracking.md).",
    )
    track_project: str | None = setting(
        None,
        "--track-project",
        metavar="NAME",
        help="The MLflow experiment or W&B project. [default: $MLFLOW_EXPERIMENT_NAME or"
        " $WANDB_PROJECT, else bv]",
    )
    track_entity: str | None = setting(
        None, "--track-entity", metavar="NAME", help="The W&B entity (team or user). [default: $WANDB_ENTITY]"
    )
