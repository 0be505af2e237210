"""The one module that reads the environment: every variable bv reads, by what it sets.

bv.engine.endpoints reads the endpoint variables (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_ORG_ID,
OPENAI_PROJECT_ID, AZURE_OPENAI_*, BV_JUDGE_API_KEY, BV_PARAM_RULES) from `variables()`, or from a mapping its
caller passes; the command line's `[env: BV_MODEL]`-style option defaults are click's, shown in
--help. tests/api/test_api.py checks that no other module of bv reads os.environ.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path


def variables() -> Mapping[str, str]:
    """The whole environment (for bv.engine.endpoints, and for agents' keys to redact)."""
    return os.environ


def debug() -> bool:
    """BV_DEBUG: let an internal error raise with its traceback instead of a one-line message."""
    return bool(os.environ.get("BV_DEBUG"))


def replays() -> bool:
    """BV_REPLAY=0: send every cached row through the request engine, as before the replay path
    (bv.stages.replay) existed; its rows are the same bytes either way (docs/performance.md)."""
    return os.environ.get("BV_REPLAY", "1") != "0"


def number(name: str, default: float) -> float:
    """A numeric limit: BV_MAX_WAIT_S, BV_RETRY_BASE_S, BV_PROGRESS_EVERY_S (docs/rollout.md),
    BV_BATCH_POLL_S (docs/batch.md), BV_TRACKER_WAIT_S (docs/tracking.md)."""
    return float(os.environ.get(name, default))


def integer(name: str, default: int) -> int:
    """A size limit: BV_MAX_LINE_BYTES, BV_HTML_MAX_ITEMS (docs/safety.md, docs/reports.md),
    BV_BATCH_MAX_REQUESTS, BV_BATCH_MAX_BYTES (docs/batch.md)."""
    return int(os.environ.get(name, default))


def text(name: str) -> str | None:
    """A setting given as text, None when unset or empty: BV_EXEC_KEEP (docs/backends.md)."""
    return os.environ.get(name) or None


def colour_forced() -> bool:
    """FORCE_COLOR (non-empty) or TTY_COMPATIBLE=1, rich's own variables (TTY_COMPATIBLE=0 wins):
    rich then treats a pipe as a terminal, so the report table is rich's, colours and all."""
    compatible = os.environ.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "1"
    return bool(os.environ.get("FORCE_COLOR"))


def columns() -> int | None:
    """$COLUMNS when it is set to a width: the table bv writes to a pipe or a file fits it (none:
    as wide as it needs)."""
    value = os.environ.get("COLUMNS", "")
    return int(value) if value.isdigit() and 0 < int(value) < 100_000 else None


def cache_home() -> Path:
    """$XDG_CACHE_HOME, else ~/.cache: where the reply cache lives."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path("~/.cache").expanduser())


def data_home() -> Path:
    """$XDG_DATA_HOME, else ~/.local/share: where `bv data` puts the official set."""
    return Path(os.environ.get("XDG_DATA_HOME") or Path("~/.local/share").expanduser())


# The variables a batch scheduler sets in each task of an array of tasks: SLURM's job arrays, and
# Kubernetes' Indexed Jobs (which give the index only: the count is the Job's `completions`).
SLURM_INDEX, SLURM_COUNT, SLURM_MIN, SLURM_MAX, SLURM_STEP = (
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_MAX",
    "SLURM_ARRAY_TASK_STEP",
)
# What to do instead when a task's variables are not a place in the whole array.
_SLURM_INSTEAD = (
    "to redo a task of an array, requeue it in its own job (scontrol requeue JOBID_TASK), which"
    " keeps the array's variables, or give its shard as `shard` K/N"
)
KUBERNETES_INDEX = "JOB_COMPLETION_INDEX"


def scheduler_shard(count: int | None = None) -> tuple[int, int]:
    """(k, n), this task's shard, from the scheduler: SLURM_ARRAY_TASK_ID counted from
    SLURM_ARRAY_TASK_MIN in steps of SLURM_ARRAY_TASK_STEP (1 or more), of SLURM_ARRAY_TASK_COUNT; or
    Kubernetes' JOB_COMPLETION_INDEX, of `count` (which SLURM's count must equal when both are
    given). Both schedulers' indexes set and different is an error, not one of them winning; so
    is an array that is not one range from task 0 or 1 (a list, one task alone, a part resubmitted).
    BadConfig when no scheduler says, or what it says is not a place in the array."""
    from bv.core.errors import BadConfig

    def whole(name: str, default: int | None = None) -> int | None:
        value = os.environ.get(name)
        if value is None or value == "":
            return default
        value = value.strip()
        if not _digits(value):
            raise BadConfig(
                f"{name}={value[:40]!r}{'…' if len(value) > 40 else ''} is not a whole number"
                f" of at most {MAX_DIGITS} digits",
                option="shard",
            )
        return int(value)

    completion = whole(KUBERNETES_INDEX)
    if whole(SLURM_INDEX) is not None:
        task, first, step = whole(SLURM_INDEX), whole(SLURM_MIN, 0), whole(SLURM_STEP, 1)
        tasks = whole(SLURM_COUNT)
        assert task is not None and first is not None and step is not None
        if tasks is None:
            raise BadConfig(f"{SLURM_INDEX} is set but {SLURM_COUNT} is not", option="shard")
        if step < 1:
            raise BadConfig(f"{SLURM_STEP}={step} is not a step of 1 or more", option="shard")
        index, off = divmod(task - first, step)
        if off or not 0 <= index < tasks:
            raise BadConfig(
                f"SLURM array task {task} is not one of {tasks} tasks from {first} in steps of {step}"
                " (an array given as a list has no place for each task: give the shard as K/N)",
                option="shard",
            )
        last = whole(SLURM_MAX)
        if last is not None and last != first + (tasks - 1) * step:
            raise BadConfig(
                f"the SLURM array is not one range: {SLURM_MAX}={last} is not {SLURM_MIN} + ({SLURM_COUNT}"
                f" - 1) x {SLURM_STEP} = {first + (tasks - 1) * step} (an array given as a list, such as"
                f" sbatch -a 1,5,9, has no place for each task); {_SLURM_INSTEAD}",
                option="shard",
            )
        if tasks == 1 or first > 1:
            why = (
                f"{SLURM_COUNT}=1: an array of one task"
                if tasks == 1
                else f"{SLURM_MIN}={first}: an array that starts past task 1"
            )
            raise BadConfig(
                f"{why} is what resubmitting part of a larger array gives (sbatch -a {task} runs"
                f" task {task} alone, as shard 0 of 1), and bv cannot tell which shard of how many it"
                f" is; {_SLURM_INSTEAD}",
                option="shard",
            )
        if count is not None and count != tasks:
            raise BadConfig(f"the shard count {count} is not {SLURM_COUNT}={tasks}", option="shard")
        if completion is not None and completion != index:
            raise BadConfig(
                f"the schedulers disagree: SLURM's array gives shard {index} ({SLURM_INDEX}={task})"
                f" but {KUBERNETES_INDEX}={completion}; unset one, or give the shard as K/N",
                option="shard",
            )
        return index, tasks
    if completion is not None:
        if count is None:
            raise BadConfig(
                f"{KUBERNETES_INDEX}={completion} gives this task's index but not how many there are:"
                " give the count (the Job's completions) as auto/N",
                option="shard",
            )
        if not completion < count:
            raise BadConfig(
                f"{KUBERNETES_INDEX}={completion} is not below the shard count {count}", option="shard"
            )
        return completion, count
    raise BadConfig(
        f"an automatic shard needs a scheduler's variables: {SLURM_INDEX} and {SLURM_COUNT} (a SLURM"
        f" job array) or {KUBERNETES_INDEX} (a Kubernetes Indexed Job); neither is set",
        option="shard",
    )


def shard_spec(spec: str) -> tuple[int, int]:
    """A shard as written: `K/N` (0 <= K < N), `auto` (from the scheduler) or `auto/N` (the index
    from the scheduler, N shards). BadConfig for anything else."""
    from bv.core.errors import BadConfig

    k, sep, n = spec.strip().partition("/")
    if k == "auto" and (not sep or (_digits(n) and int(n) > 0)):
        return scheduler_shard(int(n) if sep else None)
    if not (sep and _digits(k) and _digits(n) and 0 <= int(k) < int(n)):
        raise BadConfig(
            f"{spec[:40]!r}{'…' if len(spec) > 40 else ''} is not K/N with 0 <= K < N (at most"
            f" {MAX_DIGITS} digits each), auto or auto/N",
            option="shard",
        )
    return int(k), int(n)


# A shard index or count is a whole number of at most this many digits: far past any scheduler's
# array (SLURM's MaxArraySize is at most 4,000,001), and int() of it stays linear and below
# Python's 4,300-digit conversion limit (docs/safety.md).
MAX_DIGITS = 9


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= MAX_DIGITS


def default_for_library(name: str, value: str) -> None:
    """Set a third party's variable unless the user set it: how long MLflow's client retries a
    tracking server that is down (MLFLOW_HTTP_REQUEST_MAX_RETRIES, docs/tracking.md)."""
    os.environ.setdefault(name, value)


def set_for_library(name: str, value: str) -> None:
    """Set a third party's variable in this process, whatever it was: in a tracker's process, the
    credentials MLflow sends and the password-free URI it reads (bv.tracking.mlflow_backend)."""
    os.environ[name] = value


def for_child(keep: Callable[[str], bool]) -> dict[str, str]:
    """The environment for a process bv starts, without the variables whose value `keep` refuses:
    a tracker's process gets none holding a key of the run's (bv.tracking.remote)."""
    return {name: value for name, value in os.environ.items() if keep(value)}
