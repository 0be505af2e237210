"""One run's trackers: opened on its run folder, continued by a re-run, never its failure.

The tracker runs' ids are kept in the run folder's tracker.json, so a resumed `bv eval` or
`bv optimize` logs into the run it started instead of opening a second. Each tracker runs in a
process of its own (bv.tracking.remote), every call to it bounded in time; a package that is
missing, a server that is down or hung, a key refused, costs one warning on stderr and that
tracker for the rest of the run, never the evaluation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from bv.core import environment
from bv.core.atomic import atomic_output
from bv.core.errors import BadRecord
from bv.core.json_values import read_json_file
from bv.core.outcome import say
from bv.core.redaction import redact, register_url
from bv.core.terminal import printable
from bv.tracking.options import TrackOptions
from bv.tracking.remote import Missing, TrackerFailed, TrackerProcess, valid_run_id

STATE = "tracker.json"
EXTRA = {"mlflow": "mlflow", "wandb": "wandb"}  # the extra of babyvision-bv that installs each
MAX_STATE_BYTES = 1024 * 1024  # tracker.json holds a run id and a step per tracker: a few hundred bytes
STOPPED_WAIT_S = 5.0  # the longest a tracker may take to hear that a stopped run was KILLED


class Backend(Protocol):
    """A tracker's side of a run (bv.tracking.remote.TrackerProcess)."""

    kind: str
    where: str  # where it logs, key-free (a tracking URI, a W&B project), said and recorded

    def start(self, name: str, run_id: str | None, tags: dict[str, str]) -> str: ...
    def params(self, values: dict[str, str]) -> None: ...
    def metrics(self, values: dict[str, float], step: int | None) -> None: ...
    def last_step(self, key: str) -> int | None: ...
    def artifact(self, path: Path, folder: str | None) -> None: ...
    def finish(self, status: str, wait_s: float | None = None) -> None: ...
    def close(self, wait_s: float = ...) -> None: ...
    def kill(self) -> None: ...


class Tracking:
    """The trackers of one run (none: every call does nothing)."""

    def __init__(self, folder: Path, backends: list[Backend]) -> None:
        self.folder = folder
        self.backends = backends
        self.state: dict[str, Any] = _read_state(folder / STATE)
        self._read_back: set[str] = set()  # the trackers asked which steps their store holds

    def _guard(self, backend: Backend, what: str, call: Callable[..., Any], *args: Any) -> Any:
        """The call's result (True for none), or None when the tracker failed: said once, and
        the tracker dropped for the rest of the run."""
        try:
            result = call(*args)
            return True if result is None else result
        except Exception as exc:  # a tracker's failure, of any class: never the run's
            if backend in self.backends:
                self.backends.remove(backend)
                backend.kill()
                said = str(exc) if isinstance(exc, TrackerFailed) else f"{type(exc).__name__}: {exc}"
                reason = printable(redact(said))[:300]
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
            resume = resume if valid_run_id(resume) else None  # tracker.json is a file: anything
            run_id = self._guard(backend, "start a run", backend.start, name, resume, dict(tags))
            if run_id is None:
                continue
            if run_id != resume:
                self.state[backend.kind] = {"run_id": run_id, "where": backend.where, "steps": -1}
            self._save()
            again = "continued" if run_id == resume else "started"
            say(f"tracker {backend.kind}: run {run_id} {again} ({backend.where})")

    def params(self, values: Mapping[str, str]) -> None:
        for backend in list(self.backends):
            self._guard(backend, "log parameters", backend.params, dict(values))

    def metrics(self, values: Mapping[str, float], step: int | None = None) -> None:
        for backend in list(self.backends):
            self._guard(backend, "log metrics", backend.metrics, dict(values), step)

    def steps(
        self,
        rows: Sequence[Mapping[str, Any]],
        metrics: Callable[[Sequence[Mapping[str, Any]]], list[dict[str, float]]],
        files: Callable[[Mapping[str, Any]], list[Path]] = lambda row: [],
    ) -> None:
        """Each step (a history row's `step`: its metrics, and its `files` as artifacts under
        skills/) each tracker has not logged yet, and which it has then, recorded after each: a
        re-run, or a tracker that was down, catches up without logging a step twice. A step
        logged when a stop came before tracker.json said so is found in the tracker's own store."""
        figures: list[dict[str, float]] | None = None
        for backend in list(self.backends):
            done = int((self.state.get(backend.kind) or {}).get("steps", -1))
            for index, row in enumerate(rows):
                if row["step"] <= done:
                    continue
                figures = figures or metrics(rows)
                if backend.kind not in self._read_back and figures[index]:
                    self._read_back.add(backend.kind)
                    stored = self._guard(backend, "read its steps", backend.last_step, min(figures[index]))
                    if stored is None:
                        break
                    if isinstance(stored, int) and not isinstance(stored, bool) and stored >= row["step"]:
                        self.state[backend.kind]["steps"] = done = stored
                        if row["step"] <= done:
                            continue
                if self._guard(backend, "log a step", backend.metrics, figures[index], row["step"]) is None:
                    break
                for path in files(row):
                    self._guard(backend, f"log {path.name}", backend.artifact, path, "skills")
                self.state[backend.kind]["steps"] = done = row["step"]
                self._save()
            self._save()

    def artifacts(self, paths: list[Path], folder: str | None = None) -> None:
        for backend in list(self.backends):
            for path in paths:
                if path.is_file():
                    self._guard(backend, f"log {path.name}", backend.artifact, path, folder)

    def finish(self, status: str) -> None:
        """FINISHED, FAILED or KILLED (a run stopped before its end, to be resumed), each tracker
        then closed: after a stop, a tracker gets a few seconds to hear it, not a call's wait."""
        wait_s = STOPPED_WAIT_S if status == "KILLED" else None
        for backend in list(self.backends):
            if self._guard(backend, "end the run", backend.finish, status, wait_s) is not None:
                backend.close()
        self.backends.clear()

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
        data = read_json_file(path, MAX_STATE_BYTES)
    except FileNotFoundError:
        return {}
    except (OSError, BadRecord) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        say(f"warning: {path} cannot be read ({why}); new tracker runs are opened")
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def open_tracking(folder: Path, options: TrackOptions | None) -> Tracking:
    """The run's trackers, each started in its own process (all at once, then each awaited); one
    that cannot be had is a warning."""
    opening: list[TrackerProcess] = []
    for target in options.track if options is not None else ():
        kind, _, uri = target.partition(":")
        if kind == "mlflow":  # the URI sent, not left in the environment, where its password is a key
            uri = uri or environment.text("MLFLOW_TRACKING_URI") or ""
            register_url(uri)
            target = f"mlflow:{uri}" if uri else kind
        try:
            opening.append(TrackerProcess(target, options.track_project, options.track_entity))  # type: ignore[union-attr]
        except OSError as exc:
            say(f"warning: tracker {kind}: {printable(redact(str(exc)))[:300]}; the run goes on without it")
    tracking = Tracking(folder, [])
    for backend in opening:
        try:
            backend.ready()
        except Missing as exc:
            install = f"pip install 'babyvision-bv[{EXTRA[backend.kind]}]'"
            say(f"warning: `track` {backend.kind} needs {exc.name}: {install}; the run goes on without it")
            backend.kill()
            continue
        except TrackerFailed as exc:  # a tracker's own set-up failing (a bad URI, a store refused)
            reason = printable(redact(str(exc)))[:300]
            say(f"warning: tracker {backend.kind}: {reason}; the run goes on without it")
            backend.kill()
            continue
        if backend.note:
            say(f"tracker {backend.kind}: {printable(str(backend.note))[:300]}")
        tracking.backends.append(backend)
    return tracking
