"""bv.api's whole runs into a folder: `evaluate` (bv eval) and `optimize` / `plan_optimize`
(bv optimize), each from the keywords of the stages it runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bv.api.stages import _cache_path, _no_running_loop
from bv.engine.defaults import (
    CACHE_SCOPE,
    CONNECT_TIMEOUT_S,
    JOBS,
    RATE_LIMIT_PATIENCE_S,
    RETRIES,
    STALL_NOTICE_S,
    TIMEOUT_S,
)
from bv.stages.request_settings import DEFAULT_CACHE

if TYPE_CHECKING:  # for the checker only: `import bv.api` stays cheap
    from bv.optimize.gepa_adapter import GepaResult
    from bv.optimize.loop import OptimizeResult, Plan
    from bv.runs.evaluate import EvalResult


def evaluate(
    items: str | Path,
    out: str | Path,
    *,
    base_url: str | list[str] | None = None,
    cache: str | Path | None = DEFAULT_CACHE,
    quiet: bool = True,
    **options: Any,
) -> EvalResult:
    """What `bv eval` does: prompt, rollout, judge and report for one model, into the run folder
    `out` (results.jsonl, config.json, report.md, report.html, logs/). `options` are bv eval's
    options by their names (model, backend, repeats, max_tokens, temperature, seed, mode,
    judge_model, skill, limit, prices, max_cost: one budget for rollout and judge, batch, …), or
    the fields of bv.runs.config.EvalConfig (params, judge_mode); a path as a str or a Path.
    Calling it again
    with the same arguments resumes the run from the reply cache. Returns how the run went (its
    `status` is the command's exit status, `accuracy` the overall Avg@k); a folder holding a run
    with other options raises ValueError, what stops the run raises as `rollout` does: a fatal
    cause (a wrong key, base URL or model, nothing answering) as bv.core.errors.Fatal, its message
    the cause and fix that `bv eval -q` prints."""
    from bv.core.errors import Fatal
    from bv.runs.config import EvalConfig
    from bv.runs.evaluate import run_eval

    _no_running_loop("evaluate")
    urls = (base_url,) if isinstance(base_url, str) else tuple(base_url or ())
    config = EvalConfig.of(items, out, urls, _cache_path(cache), quiet, options)
    result = run_eval(config)
    if result.fatal is not None:
        raise Fatal(result.fatal)
    return result


def optimize(
    items: str | Path,
    *,
    skill: str | Path | Any,
    out: str | Path,
    optimizer_model: str | None,
    optimizer_base_url: str | None = None,
    optimizer_api_key: str | None = None,
    optimizer_params: Mapping[str, Any] | None = None,
    model: str | None = None,
    backend: str | None = None,  # None: bv rollout's default (RolloutConfig)
    base_url: str | list[str] | None = None,
    api_key: str | None = None,
    params: Mapping[str, Any] | None = None,
    max_turns: int | None = None,  # None: bv rollout's default
    judge_mode: str | None = None,  # None: bv judge's default (JudgeConfig)
    judge_model: str | None = None,
    judge_base_url: str | None = None,
    judge_api_key: str | None = None,
    judge_params: Mapping[str, Any] | None = None,
    test_judge_model: str | None = None,
    test_judge_base_url: str | None = None,
    test_judge_api_key: str | None = None,
    ratio: str | tuple[int, int, int] = (2, 1, 7),
    split: str | Path | None = None,
    seed: int = 0,
    epochs: int = 4,
    steps: int | None = None,
    batch: int = 64,
    minibatch: int = 8,
    success_share: float = 0.25,
    edits: int = 4,
    alpha: float = 0.05,
    gate: str = "paired",
    repeats: int | None = None,  # None: the loop's default (OptimizeOptions)
    max_skill_chars: int = 16_000,
    prompts: str | Path | None = None,
    templates: Any = None,
    jobs: int = JOBS,
    retries: int = RETRIES,
    timeout: float = TIMEOUT_S,
    rate_limit_patience: float = RATE_LIMIT_PATIENCE_S,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    first_byte_timeout: float | None = None,
    read_timeout: float | None = None,
    stall_notice: float = STALL_NOTICE_S,
    prices: str | None = None,
    max_cost: float | None = None,
    cache: str | Path | None = DEFAULT_CACHE,
    cache_scope: str = CACHE_SCOPE,
    quiet: bool = True,
    search: str = "loop",
    max_metric_calls: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> OptimizeResult | GepaResult:
    """Improve `skill` on the items of `items` (a meta_data.jsonl) as `bv optimize` does, in the
    run folder `out` (resumed when it holds the same run), and return a
    `bv.optimize.loop.OptimizeResult`: the best skill on selection, and it against the seed on
    the test split (`result.test`), with the history and tokens by role. The target model's
    options are `bv.api.rollout`'s, the judge's `bv.api.judge`'s; `progress` receives a line per
    step. `test_judge_model`, `test_judge_base_url`, `test_judge_api_key`: the final test's own
    LLM judge (what is not given is the judge's), so that a skill which sways the gate's judge
    cannot sway the test's. `judge_params` and the waits are `bv.api.judge`'s and
    `bv.api.rollout`'s, for every request of the run; `prices` (a price file or "genai-prices",
    as `bv.api.rollout`'s) prices every role's replies, and the history and report give their
    cost; `max_cost` (USD, needs `prices`) is one budget for every role over the run: once
    reached no new request starts, and Interrupted is raised as after Ctrl-C (history and report
    say where; calling again resumes).
    `search="gepa"` searches
    with GEPA on bv's evaluator instead (the extra `gepa`; `max_metric_calls`: its budget in
    target rollouts) and returns a
    `bv.optimize.gepa_adapter.GepaResult`. Raises bv.optimize.loop.OptimizeError for unusable
    settings or a run folder of another run, and what `rollout` and `judge` raise
    (docs/optimize.md)."""
    _no_running_loop("optimize")
    from bv.optimize.gepa_adapter import search as gepa_search
    from bv.optimize.loop import OptimizeError
    from bv.optimize.loop import optimize as run
    from bv.optimize.setup import loop_inputs

    setup = loop_inputs(locals(), _cache_path(cache))
    say = progress or (lambda line: None)
    if search == "gepa":
        return gepa_search(*setup, max_metric_calls=max_metric_calls, say=say)
    if search != "loop":
        raise OptimizeError(f"`search` must be loop or gepa, not {search!r}")
    if max_metric_calls is not None:
        raise OptimizeError("`max_metric_calls` is GEPA's budget: give it with `search` gepa")
    return run(*setup, say=say)


def plan_optimize(items: str | Path, **options: Any) -> Plan:
    """What `optimize` with the same keywords would do, sending and writing nothing (`--dry-run`):
    a `bv.optimize.loop.Plan` (split sizes, steps, the most requests by role)."""
    import inspect

    from bv.optimize.loop import dry_run
    from bv.optimize.setup import loop_inputs

    keywords = {
        name: p.default for name, p in inspect.signature(optimize).parameters.items() if name != "items"
    }
    unknown = set(options) - set(keywords)
    missing = {name for name, value in keywords.items() if value is inspect.Parameter.empty} - set(options)
    if unknown or missing:
        raise TypeError(f"plan_optimize(): unexpected keywords {sorted(unknown)}, missing {sorted(missing)}")
    given = {**keywords, **options, "items": items}
    if given["search"] == "gepa":
        from bv.optimize.gepa_adapter import dry_run as gepa_dry_run

        inputs = loop_inputs(given, _cache_path(given["cache"]))
        return gepa_dry_run(*inputs, max_metric_calls=given["max_metric_calls"])
    return dry_run(*loop_inputs(given, _cache_path(given["cache"])))
