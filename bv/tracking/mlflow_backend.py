"""MLflow through its own client (`MlflowClient`, not the fluent API's process-wide active run):
a run in an experiment, its parameters and metrics in batches, the run folder's files as
artifacts. The only importer of the optional `mlflow`; it runs in the tracker's own process
(bv.tracking.worker)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from bv.core import environment
from bv.core.redaction import public_url

BATCH = 100  # MLflow takes at most 100 parameters and 1000 metrics per log_batch
# A tracking server that is down costs a few seconds, not MLflow's default minutes of retries
# (bv.tracking.remote waits BV_TRACKER_WAIT_S for each call in any case).
RETRIES = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
           "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}  # fmt: skip
LOCAL_STORE = "mlflow.db"  # MLflow 3's own default store (sqlite:///mlflow.db); artifacts in ./mlruns


def tracking_uri(given: str | None) -> str:
    """The URI given, else $MLFLOW_TRACKING_URI, else the SQLite store ./mlflow.db (MLflow 3 refuses
    the file store ./mlruns unless MLFLOW_ALLOW_FILE_STORE is set)."""
    uri = given or environment.text("MLFLOW_TRACKING_URI")
    return uri or f"sqlite:///{Path(LOCAL_STORE).resolve().as_posix()}"


def without_password(uri: str) -> str:
    """The URI with its user:password moved to MLFLOW_TRACKING_USERNAME / _PASSWORD (which MLflow
    sends as basic auth), so MLflow never holds it to print ("View run … at: URI") or record."""
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not (parts.username or parts.password):
        return uri
    if parts.username:
        environment.set_for_library("MLFLOW_TRACKING_USERNAME", unquote(parts.username))
    if parts.password:
        environment.set_for_library("MLFLOW_TRACKING_PASSWORD", unquote(parts.password))
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    return urlunsplit(parts._replace(netloc=f"{netloc}:{parts.port}" if parts.port else netloc))


class MlflowBackend:
    kind = "mlflow"
    note = None

    def __init__(self, uri: str | None, experiment: str | None) -> None:
        for name, value in RETRIES.items():
            environment.default_for_library(name, value)
        from mlflow.tracking import MlflowClient

        self.uri = without_password(tracking_uri(uri))
        environment.set_for_library("MLFLOW_TRACKING_URI", self.uri)  # not one with a password, for MLflow
        self.where = public_url(self.uri)
        self.experiment = experiment or environment.text("MLFLOW_EXPERIMENT_NAME") or "bv"
        self.client = MlflowClient(tracking_uri=self.uri)
        self.run_id: str | None = None
        if urlsplit(self.uri).scheme in ("", "file", "sqlite"):  # a local store: made now, not in a call
            for name in ("alembic", "mlflow.store.db.utils"):  # the schema's upgrades, line by line
                logging.getLogger(name).setLevel(logging.WARNING)
            self.client.search_experiments(max_results=1)

    def start(self, name: str, run_id: str | None, tags: Mapping[str, str]) -> str:
        if run_id is not None:
            try:
                self.client.get_run(run_id)
            except Exception:  # gone from this server (deleted, another store): a new run
                run_id = None
            else:
                self.client.update_run(run_id, status="RUNNING")
        if run_id is None:
            found = self.client.get_experiment_by_name(self.experiment)
            experiment_id = found.experiment_id if found else self.client.create_experiment(self.experiment)
            run_id = self.client.create_run(experiment_id, run_name=name, tags=dict(tags)).info.run_id
        self.run_id = run_id
        return run_id

    def params(self, values: Mapping[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k, v) for k, v in values.items()]
        for start in range(0, len(items), BATCH):
            self.client.log_batch(self._run(), params=items[start : start + BATCH])

    def metrics(self, values: Mapping[str, float], step: int | None) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, v, now, step or 0) for k, v in values.items()]
        for start in range(0, len(items), 10 * BATCH):
            self.client.log_batch(self._run(), metrics=items[start : start + 10 * BATCH])

    def last_step(self, key: str) -> int | None:
        history = self.client.get_metric_history(self._run(), key)
        return max((m.step for m in history), default=None)

    def artifact(self, path: str, folder: str | None) -> None:
        self.client.log_artifact(self._run(), path, folder)

    def finish(self, status: str) -> None:
        self.client.set_terminated(self._run(), status)

    def _run(self) -> str:
        assert self.run_id is not None, "start() first"
        return self.run_id
