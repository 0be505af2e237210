"""One run's trackers: opened on its run folder, continued by a re-run, never its failure.

The tracker runs' ids are kept in the run folder's tracker.json, so a resumed `bv eval` or
`bv optimize` logs into the run it started instead of opening a second. Every call to a tracker
is guarded: a package that is missing, a server that is down, a key refused, costs one warning
on stderr and that tracker for the rest of the run, never the evaluation.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from bv.core.atomic import atomic_output
from bv.core.outcome import say
from bv.core.redaction import redact
from bv.core.terminal import printable
from bv.tracking.options import TrackOptions

STATE = "tracker.json"
EXTRA = {"mlflow": "mlflow", "wandb": "wandb"}  # the extra of babyvision-bv that installs each


class Backend(Protocol):
    """A tracker's side of a run (bv.tracking.mlflow_backend, bv.tracking.wandb_backend)."""

    kind: str
    where: str  # where it logs, key-free (a tracking URI, a W&B project), said and recorded

    def start(self, name: str, run_id: str | None, tags: Mapping[str, str]) -> str: ...
    def params(self, values: Mapping[str, str]) -> None: ...
    def metrics(self, values: Mapping[str, float], step: int | None) -> None: ...
    def artifact(self, path: Path, folder: str | None) -> None: ...
    def finish(self, status: str) -> None: ...


def make_backend(target: str, options: TrackOptions) -> Backend:
    """The backend a `--track` target names; its package imported here, only now."""
    kind, _, uri = target.partition(":")
    if kind == "mlflow":
        from bv.tracking.mlflow_backend import MlflowBackend

        return MlflowBackend(uri or None, options.track_project)
    from bv.tracking.wandb_backend import WandbBackend

    return WandbBackend(options.track_project, options.track_entity)


class Tracking:
    """The trackers of one run (none: every call does nothing)."""

    def __init__(self, folder: Path, backends: list[Backend]) -> None:
        self.folder = folder
        self.backends = backends
        self.state: dict[str, Any] = _read_state(folder / STATE)

    def _guard(self, backend: Backend, what: str, call: Callable[..., Any], *args: Any) -> Any:
        """The call's result (True for none), or None when the tracker failed: said once, and
        the tracker dropped for the rest of the run."""
        try:
            with contextlib.redirect_stdout(sys.stderr):  # stdout is bv's data, never a tracker's
                result = call(*args)
            return True if result is None else result
        except Exception as exc:  # a third party's failure, of any class: never the run's
            if backend in self.backends:
                self.backends.remove(backend)
                reason = printable(redact(f"{type(exc).__name__}: {exc}"))[:300]
                say(
                    f"warning: tracker {backend.kind} ({backend.where}) failed to {what}: {reason};"
                    " the run goes on without it"
                )
            return None

    def start(self, name: str, tags: Mapping[str, str]) -> None:
        """Each tracker's run: the one tracker.json names (a re-run), else a new one, recorded."""
        for backend in list(self.backends):
            before = self.state.get(backend.kind) or {}
            resume = before.get("run_id") if before.get("where") == backend.where else None
            run_id = self._guard(backend, "start a run", backend.start, name, resume, tags)
            if run_id is None:
                continue
            if run_id != resume:
                self.state[backend.kind] = {"run_id": run_id, "where": backend.where, "steps": -1}
            self._save()
            again = "continued" if run_id == resume else "started"
            say(f"tracker {backend.kind}: run {run_id} {again} ({backend.where})")

    def params(self, values: Mapping[str, str]) -> None:
        for backend in list(self.backends):
            self._guard(backend, "log parameters", backend.params, values)

    def metrics(self, values: Mapping[str, float], step: int | None = None) -> None:
        for backend in list(self.backends):
            self._guard(backend, "log metrics", backend.metrics, values, step)

    def steps(
        self,
        rows: Sequence[Mapping[str, Any]],
        metrics: Callable[[Sequence[Mapping[str, Any]]], list[dict[str, float]]],
        files: Callable[[Mapping[str, Any]], list[Path]] = lambda row: [],
    ) -> None:
        """Each step (a history row's `step`: its metrics, and its `files` as artifacts under
        skills/) each tracker has not logged yet, and which it has then, recorded: a re-run, or
        a tracker that was down, catches up without logging a step twice."""
        figures: list[dict[str, float]] | None = None
        for backend in list(self.backends):
            done = int((self.state.get(backend.kind) or {}).get("steps", -1))
            for index, row in enumerate(rows):
                if row["step"] <= done:
                    continue
                figures = figures or metrics(rows)
                if self._guard(backend, "log a step", backend.metrics, figures[index], row["step"]) is None:
                    break
                for path in files(row):
                    self._guard(backend, f"log {path.name}", backend.artifact, path, "skills")
                self.state[backend.kind]["steps"] = done = row["step"]
            self._save()

    def artifacts(self, paths: list[Path], folder: str | None = None) -> None:
        for backend in list(self.backends):
            for path in paths:
                if path.is_file():
                    self._guard(backend, f"log {path.name}", backend.artifact, path, folder)

    def finish(self, status: str) -> None:
        """FINISHED, FAILED or KILLED (a run stopped before its end, to be resumed)."""
        for backend in list(self.backends):
            self._guard(backend, "end the run", backend.finish, status)

    def _save(self) -> None:
        if not self.state:
            return
        try:
            with atomic_output(self.folder / STATE) as stream:
                json.dump(self.state, stream, indent=2)
                stream.write("\n")
        except OSError as exc:
            why = exc.strerror or exc
            say(f"warning: cannot write {self.folder / STATE} ({why}): a re-run opens new tracker runs")


def _read_state(path: Path) -> dict[str, Any]:
    """tracker.json, or nothing when it is absent or not bv's (a re-run then opens new runs)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        say(f"warning: {path} cannot be read; new tracker runs are opened")
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def open_tracking(folder: Path, options: TrackOptions | None) -> Tracking:
    """The run's trackers, each package imported only now; one that cannot be had is a warning."""
    tracking = Tracking(folder, [])
    for target in options.track if options is not None else ():
        kind = target.partition(":")[0]
        try:
            tracking.backends.append(make_backend(target, options))  # type: ignore[arg-type]
        except ImportError as exc:
            install = f"pip install 'babyvision-bv[{EXTRA[kind]}]'"
            say(f"warning: `track` {kind} needs {exc.name or kind}: {install}; the run goes on without it")
        except Exception as exc:  # a tracker's own set-up failing (a bad URI): never the run's
            say(f"warning: tracker {kind}: {printable(redact(str(exc)))[:300]}; the run goes on without it")
    return tracking
