"""What `bv optimize` and bv.api.optimize are given, as one typed record (`OptimizeSettings`:
each setting by the command line's name, at the default its stage declares), and the loop's
inputs made from it by plain calls: the seed skill, how its three models are reached
(bv.optimize.stage_calls.Engines) and the loop's options."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any

from bv.core.settings import check, part, setting, shared
from bv.optimize.results import OptimizeError, OptimizeOptions
from bv.stages.judge_config import JudgeConfig, several
from bv.stages.request_params import RequestParams
from bv.stages.request_settings import SENDING, RequestSettings
from bv.stages.rollout_config import RolloutConfig
from bv.tracking.options import TrackOptions, targets


@dataclass(frozen=True)
class OptimizeSettings:
    """Everything bv optimize takes: the items, the seed skill and run folder, the target (as
    bv rollout takes it; `request` its request parameters), the judge (as bv judge), the final
    test's own judge (`test_judge_*`: what is not given is the judge's), the optimizer, the
    loop's options (bv.optimize.results.OptimizeOptions) and how requests are sent."""

    items: Path
    skill: Any  # a path to the seed skill's Markdown, or a bv.stages.prompt.Skill
    out: Path
    optimizer_model: str | None = setting(
        MISSING,
        "--optimizer-model",
        envvar="BV_OPTIMIZER_MODEL",
        help="The model that writes edits. [env: BV_OPTIMIZER_MODEL]",
    )
    optimizer_base_url: str | None = setting(
        None,
        "--optimizer-base-url",
        envvar="BV_OPTIMIZER_BASE_URL",
        help="Its endpoint. [env: BV_OPTIMIZER_BASE_URL]",
    )
    optimizer_api_key: str | None = setting(
        None, "--optimizer-api-key", secret=True, help="Its API key. [env: BV_OPTIMIZER_API_KEY]"
    )
    optimizer_temperature: float | None = setting(
        None, "--optimizer-temperature", kind=float, low=0, help="Its sampling temperature."
    )
    optimizer_params: Mapping[str, Any] = setting(None, factory=dict, convert=dict)  # bv.api's
    backend: str = shared(RolloutConfig, "backend")
    model: str | None = shared(RolloutConfig, "model")
    base_url: tuple[str, ...] = shared(RolloutConfig, "base_url")
    api_key: str | None = shared(RolloutConfig, "api_key")
    max_turns: int = shared(RolloutConfig, "max_turns")
    request: RequestParams = part(RequestParams)
    mode: str = shared(JudgeConfig, "mode")
    # the gate's one judge (a panel is bv judge's and bv eval's), declared as bv judge's
    judge_model: str | None = shared(JudgeConfig, "judge_model")
    judge_base_url: str | None = shared(JudgeConfig, "judge_base_url")
    judge_api_key: str | None = shared(JudgeConfig, "judge_api_key")
    judge_params: Mapping[str, Any] = shared(JudgeConfig, "judge_params")
    test_judge_model: str | None = setting(
        None,
        "--test-judge-model",
        envvar="BV_TEST_JUDGE_MODEL",
        help="The final test's own LLM judge, so a skill that sways the gate's judge cannot sway the"
        " test's. [default: --judge-model] [env: BV_TEST_JUDGE_MODEL]",
    )
    test_judge_base_url: str | None = setting(
        None,
        "--test-judge-base-url",
        envvar="BV_TEST_JUDGE_BASE_URL",
        help="Its endpoint. [default: --judge-base-url] [env: BV_TEST_JUDGE_BASE_URL]",
    )
    test_judge_api_key: str | None = setting(
        None,
        "--test-judge-api-key",
        secret=True,
        help="Its API key. [env: BV_TEST_JUDGE_API_KEY; default: the judge's, when the endpoint is the same]",
    )
    ratio: tuple[int, int, int] = shared(OptimizeOptions, "ratio")
    split: Path | None = shared(OptimizeOptions, "split")
    split_seed: int = shared(OptimizeOptions, "split_seed")
    budget: int = shared(OptimizeOptions, "budget")
    epochs: int | None = shared(OptimizeOptions, "epochs")
    steps: int | None = shared(OptimizeOptions, "steps")
    batch_size: int = shared(OptimizeOptions, "batch_size")
    minibatch: int = shared(OptimizeOptions, "minibatch")
    success_share: float = shared(OptimizeOptions, "success_share")
    edits: int = shared(OptimizeOptions, "edits")
    alpha: float = shared(OptimizeOptions, "alpha")
    gate: str = shared(OptimizeOptions, "gate")
    refresh: int = shared(OptimizeOptions, "refresh")
    repeats: int = shared(OptimizeOptions, "repeats")
    max_skill_chars: int = shared(OptimizeOptions, "max_skill_chars")
    prompts: Path | None = None  # a folder of replacement templates
    templates: Any = None  # bv.core.templates.Templates, loaded already (else from `prompts`)
    jobs: int = shared(RolloutConfig, "jobs")
    retries: int = shared(RolloutConfig, "retries")
    timeout: float = shared(RolloutConfig, "timeout")
    rate_limit_patience: float = shared(RolloutConfig, "rate_limit_patience")
    connect_timeout: float = shared(RolloutConfig, "connect_timeout")
    first_byte_timeout: float | None = shared(RolloutConfig, "first_byte_timeout")
    read_timeout: float | None = shared(RolloutConfig, "read_timeout")
    stall_notice: float = shared(RolloutConfig, "stall_notice")
    prices: str | None = shared(RolloutConfig, "prices")
    max_cost: float | None = shared(RolloutConfig, "max_cost")
    cache: Path | None = shared(RolloutConfig, "cache")
    cache_scope: str = shared(RolloutConfig, "cache_scope")
    quiet: bool = shared(RolloutConfig, "quiet")
    search: str = setting(
        "loop",
        "--search",
        choices=("loop", "gepa"),
        show_default=True,
        help="loop: bv's loop and its gate; gepa: GEPA on bv's evaluator, the same split, the same test"
        " comparison (the extra gepa; docs/optimize.md).",
    )
    track: tuple[str, ...] = shared(TrackOptions, "track")
    track_project: str | None = shared(TrackOptions, "track_project")
    track_entity: str | None = shared(TrackOptions, "track_entity")
    max_metric_calls: int | None = setting(
        None,
        "--max-metric-calls",
        kind=int,
        low=1,
        help="GEPA's budget in target rollouts on train and selection. [default: what the loop plans]",
    )

    def __post_init__(self) -> None:
        """Paths as a str or a Path; the declared bounds and choices kept, a price file or budget
        that cannot work refused before any work (BadConfig)."""
        from bv.engine.prices import price_book

        for name in ("items", "out", "prompts"):
            if isinstance(getattr(self, name), str):
                object.__setattr__(self, name, Path(getattr(self, name)))
        for name in ("judge_model", "judge_base_url", "judge_api_key"):
            values = several(getattr(self, name))
            if len(values) > 1:
                raise OptimizeError(f"bv optimize takes one `{name}` (a panel of judges: bv judge, bv eval)")
            object.__setattr__(self, name, values[0] if values else None)
        object.__setattr__(self, "track", targets(self.track))
        check(self)
        price_book(self.prices, self.max_cost)
        if self.max_metric_calls is not None and self.search != "gepa":
            raise OptimizeError("`max_metric_calls` is GEPA's budget: give it with `search` gepa")

    @property
    def tracking(self) -> TrackOptions:
        """The experiment trackers the loop logs to (bv.tracking)."""
        return TrackOptions(self.track, self.track_project, self.track_entity)


def _test_judge(s: OptimizeSettings) -> Any:
    """The final test's own judge, when any `test_judge_*` setting is given: what is not given is
    the gate judge's (its key only when the endpoint is the same, never sent elsewhere)."""
    from bv.core import environment
    from bv.optimize.stage_calls import Model

    model, url = s.test_judge_model, s.test_judge_base_url
    if model is None and url is None and s.test_judge_api_key is None:
        return None
    key = s.test_judge_api_key or environment.variables().get("BV_TEST_JUDGE_API_KEY")
    return Model(
        model or s.judge_model,
        "openai",
        (url,) if url else ((s.judge_base_url,) if s.judge_base_url else ()),
        key or (s.judge_api_key if url is None else None),
        RequestParams(params=s.judge_params),
    )


def loop_inputs(s: OptimizeSettings) -> tuple[Any, ...]:
    """(items, seed skill, run folder, engines, loop options): what the loop and GEPA run on."""
    from bv.core import environment
    from bv.core.templates import Templates
    from bv.optimize.stage_calls import Engines, Model
    from bv.stages.prompt import Skill

    if not s.optimizer_model:  # else the optimizer's endpoint said "no model given: use `model`"
        raise OptimizeError(
            "no optimizer model given: give `optimizer_model` (or set BV_OPTIMIZER_MODEL), the model"
            " that writes edits; a dry run needs it too"
        )
    seed_skill = s.skill if not isinstance(s.skill, str | Path) else Skill.load(Path(s.skill))
    templates = s.templates
    if templates is None and s.prompts is not None:
        templates = Templates.load(s.prompts)
    optimizer_key = s.optimizer_api_key or environment.variables().get("BV_OPTIMIZER_API_KEY")
    url = (s.optimizer_base_url,) if s.optimizer_base_url else ()
    engines = Engines(
        target=Model(s.model, s.backend, s.base_url, s.api_key, s.request),
        optimizer=Model(
            s.optimizer_model,
            "openai",
            url,
            optimizer_key,
            RequestParams(temperature=s.optimizer_temperature, params=s.optimizer_params),
        ),
        mode=s.mode,
        judge=Model(
            s.judge_model,
            "openai",
            (s.judge_base_url,) if s.judge_base_url else (),
            s.judge_api_key,
            RequestParams(params=s.judge_params),
        ),
        test_judge=_test_judge(s),
        max_turns=s.max_turns,
        templates=templates or Templates(),
        sending=RequestSettings(**{name: getattr(s, name) for name in (*SENDING, "quiet")}),
    )
    loop_options = OptimizeOptions(
        ratio=s.ratio,
        split=s.split,
        split_seed=s.split_seed,
        budget=s.budget,
        epochs=s.epochs,
        steps=s.steps,
        batch_size=s.batch_size,
        minibatch=s.minibatch,
        success_share=s.success_share,
        edits=s.edits,
        alpha=s.alpha,
        gate=s.gate,
        refresh=s.refresh,
        repeats=s.repeats,
        max_skill_chars=s.max_skill_chars,
    )
    return s.items, seed_skill, s.out, engines, loop_options
