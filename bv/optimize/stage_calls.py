"""The one module of bv/optimize that runs bv's stages: prompt, rollout and judge in process, as
`bv prompt | bv rollout | bv judge` would, with the reply cache (so a re-run sends only what
never finished). The optimizer model is asked through the rollout stage too: its requests are
prompt records of text messages, cached and retried like any other."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from bv.core.errors import BadRecord, Fatal, Interrupted
from bv.core.outcome import SIGNAL_NAMES
from bv.core.records import Item, JudgedRow, PromptRecord, RolloutRow
from bv.core.settings import shared
from bv.core.templates import BV_TEMPLATES, Templates
from bv.stages.judge import run_judge
from bv.stages.judge_config import JudgeConfig, several
from bv.stages.prompt import PromptOptions, Skill, prompt_records
from bv.stages.request_params import RequestParams
from bv.stages.request_settings import SENDING, RequestSettings
from bv.stages.rollout import run_rollout
from bv.stages.rollout_config import RolloutConfig


@dataclass(frozen=True)
class Model:
    """One role's model and where it is served (the API key is used, never recorded)."""

    model: str | None = None
    backend: str = shared(RolloutConfig, "backend")
    base_url: tuple[str, ...] = ()
    api_key: str | None = field(default=None, repr=False)
    request: RequestParams = field(default_factory=RequestParams)  # what its requests carry

    def recorded(self) -> dict[str, Any]:
        """What must stay the same for a run folder to resume: not the key, not the endpoint."""
        return {"model": self.model, "backend": self.backend, "params": self.request.recorded}


@dataclass
class Spend:
    """What the run's replies have cost so far (USD, with prices), over all its stages and roles."""

    usd: float = 0.0


@dataclass(frozen=True)
class Engines:
    """How the loop reaches its three models, and how requests are sent."""

    target: Model
    optimizer: Model
    mode: str = shared(JudgeConfig, "mode")
    judge: Model = field(default_factory=Model)
    # the final test's own judge (`test_judge_*`), so that a skill that sways the gate's judge
    # cannot sway the test's; None: the test is judged as the gate is
    test_judge: Model | None = None
    max_turns: int = shared(RolloutConfig, "max_turns")
    image_root: Path | None = None
    templates: Templates = BV_TEMPLATES
    # how every stage sends: -j, retries, the waits, the reply cache, prices and the run's budget
    sending: RequestSettings = field(default_factory=lambda: RequestSettings(quiet=True))
    spend: Spend = field(default_factory=Spend, compare=False)  # counted toward max_cost, stage by stage

    def run(self) -> dict[str, Any]:
        """How every stage of the loop runs: the settings its rollout and judge configs share."""
        return {
            **{name: getattr(self.sending, name) for name in SENDING},
            "quiet": self.sending.quiet,
            "spent_before": self.spend.usd,  # each stage starts with the run's spend so far
        }


def for_part(engines: Engines, part: str) -> Engines:
    """The engines that evaluate a split: the test split with the test's judge, when given."""
    return replace(engines, judge=engines.test_judge) if part == "test" and engines.test_judge else engines


def _ended(outcome: Any, rows: list[Any], what: str, engines: Engines) -> list[Any]:
    engines.spend.usd = outcome.spent_usd
    if outcome.fatal is not None:
        raise Fatal(f"{what}: {outcome.fatal}")
    if outcome.signal is not None:
        why = outcome.stopped or f"interrupted by {SIGNAL_NAMES.get(outcome.signal, 'a signal')}"
        raise Interrupted(f"{why}, in {what}", signal=outcome.signal)
    return rows


def prompts(items: Sequence[Item], skill: Skill, engines: Engines) -> list[PromptRecord]:
    options = PromptOptions(skill=skill, templates=engines.templates, image_root=engines.image_root)

    def bad(source: None, exc: BadRecord) -> None:
        raise exc

    return list(prompt_records(((None, item) for item in items), lambda _: None, options, bad))


def rollout_config(
    model: Model, engines: Engines, repeats: int, turns: int, dry_run: bool = False
) -> RolloutConfig:
    """A role's rollout config (the target's, the optimizer's); `dry_run`: no key needed."""
    return RolloutConfig(
        backend=model.backend,
        model=model.model,
        base_url=model.base_url,
        api_key=model.api_key,
        request=model.request,
        repeats=repeats,
        max_turns=turns,
        templates=engines.templates,
        ordered=True,
        dry_run=dry_run,
        **engines.run(),
    )


def judge_config(engines: Engines, judge: Model, dry_run: bool = False) -> JudgeConfig:
    """The judge's config (the gate's judge, or the test's); `dry_run`: no key needed."""
    return JudgeConfig(
        mode=engines.mode,
        judge_model=several(judge.model),
        judge_base_url=judge.base_url[:1],
        judge_api_key=several(judge.api_key),
        judge_params=judge.request.body,
        templates=engines.templates,
        dry_run=dry_run,
        **engines.run(),
    )


Configs = tuple[RolloutConfig, JudgeConfig, RolloutConfig]  # the target's, the judge's, the optimizer's


def checked_configs(engines: Engines) -> Configs:
    """Every role's config (target, judge, optimizer; the test's judge checked too), made as a
    dry run's: what they refuse (a `max_cost` bv cannot price, an option a backend does not use)
    is refused before the run folder is touched or anything sent."""
    target = rollout_config(engines.target, engines, 1, engines.max_turns, dry_run=True)
    judge = judge_config(engines, engines.judge, dry_run=True)
    if engines.test_judge is not None:
        judge_config(engines, engines.test_judge, dry_run=True)
    return target, judge, rollout_config(engines.optimizer, engines, 1, 1, dry_run=True)


def _rollout(
    records: list[PromptRecord], model: Model, engines: Engines, repeats: int, turns: int, what: str
) -> list[RolloutRow]:
    config = rollout_config(model, engines, repeats, turns)
    rows: list[RolloutRow] = []
    outcome = run_rollout(records, config, lambda row: rows.append(cast(RolloutRow, dict(row))))
    return _ended(outcome, rows, what, engines)


def rollout_and_judge(
    items: Sequence[Item], skill: Skill, engines: Engines, repeats: int, what: str
) -> list[JudgedRow]:
    """Judged rows of `items` answered by the target with `skill`, each item `repeats` times."""
    if not items:
        return []
    rows = _rollout(prompts(items, skill, engines), engines.target, engines, repeats, engines.max_turns, what)
    config = judge_config(engines, engines.judge)
    judged: list[JudgedRow] = []
    # kept as written, no copy: `rows` are this call's own, judged in place
    outcome = run_judge(rows, config, lambda row: judged.append(cast(JudgedRow, row)), in_place=True)
    return _ended(outcome, judged, what, engines)


def ask_optimizer(requests: Sequence[tuple[str, str]], engines: Engines) -> list[RolloutRow]:
    """The optimizer's replies to (id, prompt text) requests, in order: rows whose `response`
    is the reply, or None with `error` set when the requests failed."""
    records = [
        cast(PromptRecord, {"id": rid, "messages": [{"role": "user", "content": text}]})
        for rid, text in requests
    ]
    return _rollout(records, engines.optimizer, engines, 1, 1, "optimizer") if records else []
