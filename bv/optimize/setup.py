"""The loop's inputs from bv.api.optimize's keywords: the seed skill, how its three models are
reached (bv.optimize.runs.Engines) and the loop's options (shared by bv.api.optimize and
plan_optimize, and so by `bv optimize` and its --dry-run)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _test_judge(o: Mapping[str, Any]) -> Any:
    """The final test's own judge, when any `test_judge_*` keyword is given: what is not given is
    the gate judge's (its key only when the endpoint is the same, never sent elsewhere)."""
    from bv.core import environment
    from bv.optimize.runs import Model

    model, url = o["test_judge_model"], o["test_judge_base_url"]
    if model is None and url is None and o["test_judge_api_key"] is None:
        return None
    key = o["test_judge_api_key"] or environment.variables().get("BV_TEST_JUDGE_API_KEY")
    return Model(
        model or o["judge_model"],
        "openai",
        (url,) if url else ((o["judge_base_url"],) if o["judge_base_url"] else ()),
        key or (o["judge_api_key"] if url is None else None),
        dict(o["judge_params"] or {}),
    )


def _ratio(given: str | tuple[int, int, int]) -> tuple[int, int, int]:
    """A ratio as either face gives it: "2:1:7" (the command line's) or (2, 1, 7)."""
    from bv.optimize.results import OptimizeError
    from bv.optimize.split import parse_ratio

    if not isinstance(given, str):
        return (int(given[0]), int(given[1]), int(given[2]))
    try:
        return parse_ratio(given)
    except ValueError as exc:
        raise OptimizeError(f"`ratio`: {exc}") from None


def loop_inputs(options: Mapping[str, Any], cache_path: Path | None) -> tuple[Any, ...]:
    """(items, seed skill, run folder, engines, loop options) from bv.api.optimize's keywords,
    its `cache` keyword resolved by bv.api to `cache_path`."""
    from bv.core import environment
    from bv.core.settings import default_of
    from bv.core.templates import Templates
    from bv.engine.prices import price_book
    from bv.optimize.loop import OptimizeOptions
    from bv.optimize.runs import WAITS, Engines, Model
    from bv.stages.judge_config import JudgeConfig
    from bv.stages.prompt import Skill
    from bv.stages.rollout_config import RolloutConfig

    o = options
    price_book(
        o["prices"], o["max_cost"]
    )  # a price file or budget that cannot work: BadConfig, before any work
    seed_skill = o["skill"] if not isinstance(o["skill"], (str, Path)) else Skill.load(Path(o["skill"]))
    templates = o["templates"]
    if templates is None and o["prompts"] is not None:
        templates = Templates.load(Path(o["prompts"]))

    def urls(value: str | list[str] | None) -> tuple[str, ...]:
        return (value,) if isinstance(value, str) else tuple(value or ())

    backend = o["backend"] or default_of(RolloutConfig, "backend")
    engines = Engines(
        target=Model(o["model"], backend, urls(o["base_url"]), o["api_key"], dict(o["params"] or {})),
        optimizer=Model(
            o["optimizer_model"],
            "openai",
            urls(o["optimizer_base_url"]),
            o["optimizer_api_key"] or environment.variables().get("BV_OPTIMIZER_API_KEY"),
            dict(o["optimizer_params"] or {}),
        ),
        judge_mode=o["judge_mode"] or default_of(JudgeConfig, "mode"),
        judge=Model(
            o["judge_model"],
            "openai",
            urls(o["judge_base_url"]),
            o["judge_api_key"],
            dict(o["judge_params"] or {}),
        ),
        test_judge=_test_judge(o),
        max_turns=o["max_turns"] or default_of(RolloutConfig, "max_turns"),
        templates=templates or Templates(),
        jobs=o["jobs"],
        retries=o["retries"],
        timeout_s=o["timeout"],
        cache_path=cache_path,
        cache_scope=o["cache_scope"],
        quiet=o["quiet"],
        waits={name: o[name] for name in WAITS},
        prices=o["prices"],
        max_cost=o["max_cost"],
    )
    split = o["split"]
    loop_options = OptimizeOptions(
        ratio=_ratio(o["ratio"]),
        split_file=Path(split) if split is not None else None,
        seed=o["seed"],
        epochs=o["epochs"],
        steps=o["steps"],
        batch=o["batch"],
        minibatch=o["minibatch"],
        success_share=o["success_share"],
        edits=o["edits"],
        alpha=o["alpha"],
        gate=o["gate"],
        **({"repeats": o["repeats"]} if o["repeats"] is not None else {}),
        max_skill_chars=o["max_skill_chars"],
    )
    return Path(o["items"]), seed_skill, Path(o["out"]), engines, loop_options
