"""The one module of bv/optimize that runs bv's stages: prompt, rollout and judge in process, as
`bv prompt | bv rollout | bv judge` would, with the reply cache (so a re-run sends only what
never finished). The optimizer model is asked through the rollout stage too: its requests are
prompt records of text messages, cached and retried like any other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from bv.core.errors import Fatal, Interrupted
from bv.core.records import JudgedRow, PromptRecord, RolloutRow
from bv.core.templates import BV_TEMPLATES, Templates
from bv.engine.backends import backend_config
from bv.engine.caller import RunSettings
from bv.stages.judge import run_judge
from bv.stages.prompt import PromptOptions, Skill, build_prompt
from bv.stages.rollout import RolloutOptions, run_rollout


@dataclass(frozen=True)
class Model:
    """One role's model and where it is served (the API key is used, never recorded)."""

    model: str | None = None
    backend: str = "openai"
    base_url: tuple[str, ...] = ()
    api_key: str | None = field(default=None, repr=False)
    params: Mapping[str, Any] = field(default_factory=dict)

    def recorded(self) -> dict[str, Any]:
        """What must stay the same for a run folder to resume: not the key, not the endpoint."""
        return {"model": self.model, "backend": self.backend, "params": dict(self.params)}


@dataclass(frozen=True)
class Engines:
    """How the loop reaches its three models, and how requests are sent."""

    target: Model
    optimizer: Model
    judge_mode: str = "auto"
    judge: Model = field(default_factory=Model)
    max_turns: int = 1
    image_root: Path | None = None
    templates: Templates = BV_TEMPLATES
    jobs: int = 8
    retries: int = 5
    timeout_s: float = 600.0
    cache_path: Path | None = None
    quiet: bool = True

    def settings(self) -> RunSettings:
        return RunSettings(
            jobs=self.jobs,
            retries=self.retries,
            timeout_s=self.timeout_s,
            cache_path=self.cache_path,
            quiet=self.quiet,
            ordered=True,
        )


def _ended(outcome: Any, rows: list[Any], what: str) -> list[Any]:
    if outcome.fatal is not None:
        raise Fatal(f"{what}: {outcome.fatal}")
    if outcome.signal is not None:
        raise Interrupted(f"{what} interrupted; run the same command again to resume", signal=outcome.signal)
    return rows


def prompts(items: Sequence[Mapping[str, Any]], skill: Skill, engines: Engines) -> list[PromptRecord]:
    options = PromptOptions(skill=skill, templates=engines.templates, image_root=engines.image_root)
    return [cast(PromptRecord, build_prompt(dict(item), None, options)) for item in items]


def _rollout(
    records: list[PromptRecord], model: Model, engines: Engines, repeats: int, turns: int, what: str
) -> list[RolloutRow]:
    config = backend_config(
        model.backend,
        model=model.model,
        base_urls=list(model.base_url),
        api_key=model.api_key,
        timeout=engines.timeout_s,
        jobs=engines.jobs,
    )
    options = RolloutOptions(
        max_turns=turns, repeats=repeats, params=dict(model.params), templates=engines.templates
    )
    rows: list[RolloutRow] = []
    _, outcome = run_rollout(
        (),
        model.backend,
        config,
        options,
        engines.settings(),
        records=records,
        write=lambda row: rows.append(cast(RolloutRow, dict(row))),
    )
    return _ended(outcome, rows, what)


def rollout_and_judge(
    items: Sequence[Mapping[str, Any]], skill: Skill, engines: Engines, repeats: int, what: str
) -> list[JudgedRow]:
    """Judged rows of `items` answered by the target with `skill`, each item `repeats` times."""
    if not items:
        return []
    rows = _rollout(prompts(items, skill, engines), engines.target, engines, repeats, engines.max_turns, what)
    from bv.engine.endpoints import judge_endpoint

    judge = engines.judge
    endpoint = judge_endpoint(
        engines.judge_mode,
        judge.model,
        judge.base_url[0] if judge.base_url else None,
        judge.api_key,
        engines.timeout_s,
        engines.jobs,
    )
    judged: list[JudgedRow] = []
    _, outcome = run_judge(
        (),
        engines.judge_mode,
        endpoint,
        engines.settings(),
        engines.templates,
        records=rows,
        write=lambda row: judged.append(cast(JudgedRow, dict(row))),
    )
    return _ended(outcome, judged, what)


def ask_optimizer(requests: Sequence[tuple[str, str]], engines: Engines) -> list[RolloutRow]:
    """The optimizer's replies to (id, prompt text) requests, in order: rows whose `response`
    is the reply, or None with `error` set when the requests failed."""
    records = [
        cast(PromptRecord, {"id": rid, "messages": [{"role": "user", "content": text}]})
        for rid, text in requests
    ]
    return _rollout(records, engines.optimizer, engines, 1, 1, "optimizer") if records else []
