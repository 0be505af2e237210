"""What a tracker's own process does (started as `python -m bv.cli.tracker_worker`): the
tracker's package, its client and its threads live there, never in bv's process. bv
(bv.tracking.remote) sends one call a line, as JSON, and reads each answer, a line, waiting a
bounded time; so a tracker cannot hold bv's run or its signals."""

from __future__ import annotations

import json
from typing import IO, Any

ERROR_CHARS = 2000


def open_backend(target: str, project: str | None, entity: str | None) -> Any:
    """The backend a `--track` target names; its package imported here, only now."""
    kind, _, uri = target.partition(":")
    if kind == "mlflow":
        from bv.tracking.mlflow_backend import MlflowBackend

        return MlflowBackend(uri or None, project)
    from bv.tracking.wandb_backend import WandbBackend

    return WandbBackend(project, entity)


def answer(backend: Any, call: str, args: list[Any]) -> tuple[Any, Any]:
    """(the backend, its answer to the call): `open` makes the backend and says where it logs."""
    if call == "open":
        backend = open_backend(*args)
        return backend, {"where": backend.where, "note": backend.note}
    if backend is None:
        raise RuntimeError(f"{call} before open")
    return backend, getattr(backend, call)(*args)


def serve(calls: IO[str], answers: IO[str]) -> None:
    """Each call in turn, each answered {"n": its number, and "ok", "missing" or "error"}."""
    backend: Any = None
    for line in calls:
        asked = json.loads(line)
        reply: dict[str, Any] = {"n": asked["n"]}
        try:
            backend, reply["ok"] = answer(backend, asked["call"], asked["args"])
        except ImportError as exc:
            reply["missing"] = exc.name or asked["call"]
        except BaseException as exc:  # a third party's failure, of any class (MemoryError, SystemExit)
            reply["error"] = f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
        answers.write(json.dumps(reply) + "\n")
        answers.flush()
