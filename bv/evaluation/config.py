"""What a `bv eval` run is: its typed configuration, built alike by the command line and bv.api,
and the record of it kept in the run folder (config.json), keys never in it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bv import __version__
from bv.core import redaction
from bv.core.atomic import atomic_output
from bv.core.errors import BadConfig, Fatal
from bv.core.selection import Selection
from bv.core.settings import keywords, part, setting, shared
from bv.stages.judge_config import JudgeConfig, several
from bv.stages.prompt import PromptOptions
from bv.stages.request_params import RequestParams
from bv.stages.request_settings import SENDING
from bv.stages.rollout_config import RolloutConfig
from bv.tracking.options import TrackOptions, public_target, targets


class BadOption(BadConfig):
    """Options that cannot make a run (the command line exits 2, before any work)."""


@dataclass(frozen=True)
class EvalConfig:
    """One evaluation: the items, where the run folder goes, and the settings of every stage,
    each declared once and named as its stage names it (`request`: the rollout's request
    parameters, bv.stages.request_params)."""

    items: Path
    out: Path
    label: str | None = setting(
        None,
        "--label",
        metavar="NAME",
        help="The run's name in bv report (recorded in config.json). [default: the folder's name]",
    )
    # prompt
    style: str = shared(PromptOptions, "style")
    skill: Path | None = None
    prompts: Path | None = None  # a folder of replacement templates (--prompts DIR)
    image_detail: str = shared(PromptOptions, "image_detail")
    selection: Selection = part(Selection)  # ids, types, subtypes, sample, sample_seed, limit
    # rollout
    backend: str = shared(RolloutConfig, "backend")
    model: str | None = shared(RolloutConfig, "model")
    base_url: tuple[str, ...] = shared(RolloutConfig, "base_url")
    api_key: str | None = shared(RolloutConfig, "api_key")
    repeats: int = shared(RolloutConfig, "repeats")
    max_turns: int = shared(RolloutConfig, "max_turns")
    request: RequestParams = part(RequestParams)
    exec_cmd: str | None = shared(RolloutConfig, "exec_cmd")
    # judge
    mode: str = shared(JudgeConfig, "mode")
    # one judge, or a panel (several: bv.stages.judge_config)
    judge_model: tuple[str, ...] = shared(JudgeConfig, "judge_model")
    judge_base_url: tuple[str, ...] = shared(JudgeConfig, "judge_base_url")
    judge_api_key: tuple[str, ...] = shared(JudgeConfig, "judge_api_key")
    judge_params: Mapping[str, Any] = shared(JudgeConfig, "judge_params")  # sent as written
    panel: str = shared(JudgeConfig, "panel")
    calibrate: float | None = shared(JudgeConfig, "calibrate")
    # how it runs, not what it computes: a re-run may change these
    prices: str | None = shared(RolloutConfig, "prices")  # rows record their cost
    max_cost: float | None = shared(RolloutConfig, "max_cost")  # the rollout's and the judge's spend together
    batch: bool = shared(RolloutConfig, "batch")  # the rollout's and the LLM judge's requests as batch jobs
    jobs: int = shared(RolloutConfig, "jobs")
    retries: int = shared(RolloutConfig, "retries")
    timeout: float = shared(RolloutConfig, "timeout")
    rate_limit_patience: float = shared(RolloutConfig, "rate_limit_patience")
    connect_timeout: float = shared(RolloutConfig, "connect_timeout")
    first_byte_timeout: float | None = shared(RolloutConfig, "first_byte_timeout")
    read_timeout: float | None = shared(RolloutConfig, "read_timeout")
    stall_notice: float = shared(RolloutConfig, "stall_notice")
    cache: Path | None = shared(RolloutConfig, "cache")  # None: no reply cache (and no resuming)
    cache_scope: str = shared(RolloutConfig, "cache_scope")
    quiet: bool = shared(RolloutConfig, "quiet")
    skip_bad: bool = False
    # experiment trackers (docs/tracking.md)
    track: tuple[str, ...] = shared(TrackOptions, "track")
    track_project: str | None = shared(TrackOptions, "track_project")
    track_entity: str | None = shared(TrackOptions, "track_entity")

    def __post_init__(self) -> None:
        """Paths as either face gives them (a str or a Path)."""
        for name in ("items", "out", "skill", "prompts"):
            if isinstance(getattr(self, name), str):
                object.__setattr__(self, name, Path(getattr(self, name)))
        for name in ("judge_model", "judge_base_url", "judge_api_key"):
            object.__setattr__(self, name, several(getattr(self, name)))
        object.__setattr__(self, "track", targets(self.track))  # BadConfig: a usage error

    @property
    def tracking(self) -> TrackOptions:
        return TrackOptions(self.track, self.track_project, self.track_entity)


SECRETS = ("api_key", "judge_api_key")
HOW_IT_RUNS = (
    *SENDING,
    "out",
    "label",
    "batch",
    "quiet",
    "skip_bad",
    "track",
    "track_project",
    "track_entity",
)


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def options_record(config: EvalConfig) -> dict[str, Any]:
    """Every option as JSON, the keys left out (whether one was given is said, never its value)."""
    record: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, tuple) and f.name.startswith("judge_"):  # one judge: as it always was
            value = None if not value else value[0] if len(value) == 1 else value
        if f.name == "panel" and len(config.judge_model) < 2:
            continue  # one judge: no panel, and a run folder made before panels resumes
        if f.name in SECRETS:
            record[f"{f.name}_given"] = value is not None
        elif f.name == "items":
            record[f.name] = str(Path(value).resolve())
        elif f.name == "selection":
            record |= {name: _plain(getattr(value, name)) for name in keywords(Selection)}
        elif f.name == "request":
            record["params"] = _plain(value.recorded)  # what every request carries; `-p api_key=…`: ***
        elif f.name == "judge_params":
            record[f.name] = _plain(redaction.public_params(value))
        elif f.name == "track":  # a tracking URI's user:password is never recorded
            record[f.name] = [public_target(target) for target in value]
        else:
            record[f.name] = _plain(value)
    return json.loads(redaction.redact(json.dumps(record)))  # a key pasted into another option


def what_changed(before: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """The options that decide the results and differ between two records (`name: old → new`)."""
    said = []
    for name in sorted(set(before) | set(now)):
        if name in HOW_IT_RUNS or name.endswith("_given"):
            continue
        if before.get(name) != now.get(name):
            said.append(f"{name}: {json.dumps(before.get(name))} → {json.dumps(now.get(name))}")
    return said


def write_config(path: Path, record: Mapping[str, Any]) -> None:
    with atomic_output(path) as stream:
        json.dump(record, stream, indent=2, ensure_ascii=False)
        stream.write("\n")


def read_config(path: Path) -> dict[str, Any] | None:
    """The record a run folder holds; None when it has none (a new folder). A config.json that
    is not a bv eval record (not an object, its options not one) is refused, never replaced:
    the folder may hold something else."""
    from bv.core.json_values import read_json_file
    from bv.core.run_inputs import MAX_CONFIG_BYTES

    try:
        data = read_json_file(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # ValueError: BadRecord, saying why (too big, too deep)
        raise Fatal(
            f"{path}: cannot read the run's configuration ({exc}); delete the folder or choose another"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("options"), dict):
        what = "its options are not a JSON object" if isinstance(data, dict) else "not a JSON object"
        raise BadOption(
            f"{path} is not the configuration of a bv eval run ({what}): give another `out` DIR,"
            " or delete that folder to replace what it holds"
        )
    return data


def run_record(
    config: EvalConfig,
    endpoint: str | None,
    judge_endpoint: str | None,
    items_sha256: str,
    skill_sha256: str | None,
) -> dict[str, Any]:
    """config.json: bv's version, the options, where requests went, and which items file and
    skill text (their SHA-256: a skill edited under the same file name is another run)."""
    return {
        "bv_version": __version__,
        "options": options_record(config),
        "endpoint": endpoint,
        "judge_endpoint": judge_endpoint,
        "items_sha256": items_sha256,
        "skill_sha256": skill_sha256,
    }
