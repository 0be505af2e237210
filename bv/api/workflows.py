"""bv.api's whole runs into a folder: `evaluate` (bv eval) and `optimize` / `plan_optimize`
(bv optimize), each from the keywords of the stages it runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for the checker only: `import bv.api` stays cheap
    from typing import Unpack

    from bv.api.keywords import EvalKeywords, OptimizeKeywords
    from bv.evaluation.evaluate import EvalResult
    from bv.optimize.gepa_adapter import GepaResult
    from bv.optimize.loop import OptimizeResult, Plan
    from bv.optimize.setup import OptimizeSettings


def evaluate(items: str | Path, out: str | Path, **settings: Unpack[EvalKeywords]) -> EvalResult:
    """What `bv eval` does: prompt, rollout, judge and report for one model, into the run folder
    `out` (results.jsonl, config.json, report.md, report.html, logs/). The keywords are bv eval's
    options by their names, at their defaults (bv.evaluation.config.EvalConfig declares both): model,
    backend, base_url (one or several), repeats, max_tokens, temperature, seed, mode, judge_model,
    skill, limit, prices, max_cost (one budget for rollout and judge), batch, …; a path as a str
    or a Path; `cache` and `quiet` as for `rollout`. Calling it again with the same arguments
    resumes the run from the reply cache. Returns how the run went (its `status` is the command's
    exit status, `accuracy` the overall Avg@k); a folder holding a run with other options raises
    ValueError, what stops the run raises as `rollout` does: a fatal cause (a wrong key, base URL
    or model, nothing answering) as bv.core.errors.Fatal, its message the cause and fix that
    `bv eval -q` prints."""
    from bv.api.stages import _config
    from bv.core.errors import Fatal
    from bv.engine.on_thread import beside_loop, loop_running
    from bv.evaluation.config import EvalConfig
    from bv.evaluation.evaluate import run_eval

    if loop_running():  # a notebook's, an async app's: this one runs on a thread of its own
        return beside_loop("evaluate", lambda: evaluate(items, out, **settings))
    from bv.api.inputs import path_of

    given = {"items": path_of(items, "items"), "out": path_of(out, "out")}
    result = run_eval(_config(EvalConfig, {**settings, **given}))
    if result.fatal is not None:
        raise Fatal(result.fatal)
    return result


async def aevaluate(items: str | Path, out: str | Path, **settings: Unpack[EvalKeywords]) -> EvalResult:
    """`evaluate` for code inside a running event loop, awaited: the same run on a thread of its
    own. Cancelled, it stops as after Ctrl-C (what finished is cached), then raises CancelledError."""
    from bv.engine.on_thread import on_thread

    return await on_thread("evaluate", lambda: evaluate(items, out, **settings))


def optimize(
    items: str | Path,
    *,
    progress: Callable[[str], None] | None = None,
    **settings: Unpack[OptimizeKeywords],
) -> OptimizeResult | GepaResult:
    """Improve `skill` (a path, or a bv.stages.prompt.Skill) on the items of `items` (a
    meta_data.jsonl) as `bv optimize` does, in the run folder `out` (resumed when it holds the
    same run), and return a `bv.optimize.loop.OptimizeResult`: the best skill on selection, and it
    against the seed on the test split (`result.test`), with the history and tokens by role. The
    keywords are bv optimize's options by their names, at their defaults
    (bv.optimize.setup.OptimizeSettings declares both; `skill`, `out` and `optimizer_model` must
    be given): the target's as `bv.api.rollout` takes them (model, base_url, max_tokens,
    temperature, extra_body, params, ...), the judge's as `bv.api.judge`'s (mode, judge_model,
    judge_params, ...), `test_judge_model`, `test_judge_base_url`, `test_judge_api_key` (the final
    test's own LLM judge: what is not given is the judge's, so that a skill which sways the gate's
    judge cannot sway the test's), the optimizer's (`optimizer_temperature`, `optimizer_params`),
    the loop's (ratio as "2:1:7" or a tuple, split, split_seed, epochs, steps, batch_size, ...),
    and how requests are sent, for every request of the run. `progress` receives a line per step.
    `prices` (a price file or "genai-prices") prices every role's replies, and the history and
    report give their cost; `max_cost` (USD, needs `prices`) is one budget for every role over the
    run: once reached no new request starts, and Interrupted is raised as after Ctrl-C (history
    and report say where; calling again resumes). `search="gepa"` searches with GEPA on bv's
    evaluator instead (the extra `gepa`; `max_metric_calls`: its budget in target rollouts) and
    returns a `bv.optimize.gepa_adapter.GepaResult`. `track` ("mlflow", "mlflow:URI", "wandb", or
    several; `track_project`, `track_entity`) logs the loop's every step to experiment trackers
    (docs/tracking.md): a tracker that fails is a warning, never the run's end. Raises
    bv.optimize.results.OptimizeError for unusable settings or a run folder of another run, and
    what `rollout` and `judge` raise (docs/optimize.md)."""
    from bv.engine.on_thread import beside_loop, loop_running

    if loop_running():  # a notebook's, an async app's: this one runs on a thread of its own
        return beside_loop("optimize", lambda: optimize(items, progress=progress, **settings))
    from bv.optimize.gepa_adapter import search as gepa_search
    from bv.optimize.loop import optimize as run
    from bv.optimize.setup import loop_inputs

    given = _optimize_settings(items, settings)
    say = progress or (lambda line: None)
    if given.search == "gepa":
        return gepa_search(*loop_inputs(given), max_metric_calls=given.max_metric_calls, say=say)
    return run(*loop_inputs(given), say=say, track=given.tracking)


async def aoptimize(
    items: str | Path,
    *,
    progress: Callable[[str], None] | None = None,
    **settings: Unpack[OptimizeKeywords],
) -> OptimizeResult | GepaResult:
    """`optimize` for code inside a running event loop, awaited: the same run on a thread of its
    own. Cancelled, it stops as after Ctrl-C (what finished is cached), then raises CancelledError."""
    from bv.engine.on_thread import on_thread

    return await on_thread("optimize", lambda: optimize(items, progress=progress, **settings))


def plan_optimize(items: str | Path, **settings: Unpack[OptimizeKeywords]) -> Plan:
    """What `optimize` with the same keywords would do, sending and writing nothing (`--dry-run`):
    a `bv.optimize.loop.Plan` (split sizes, steps, the most requests by role)."""
    from bv.optimize.loop import dry_run
    from bv.optimize.setup import loop_inputs

    given = _optimize_settings(items, settings)
    if given.search == "gepa":
        from bv.optimize.gepa_adapter import dry_run as gepa_dry_run

        return gepa_dry_run(*loop_inputs(given), max_metric_calls=given.max_metric_calls)
    return dry_run(*loop_inputs(given))


def _optimize_settings(items: str | Path, settings: Mapping[str, Any]) -> OptimizeSettings:
    """bv optimize's settings of bv.api's keywords (an unknown one a TypeError, as for any call)."""
    from bv.api.stages import _config
    from bv.optimize.setup import OptimizeSettings

    if "seed" in settings:  # its old meaning, for one release (as bv optimize's --seed)
        raise TypeError(
            "`seed` is now `split_seed` (the split's, the batch order's); `seed` goes next release"
        )
    missing = sorted({"skill", "out", "optimizer_model"} - set(settings))
    if missing:
        raise TypeError(f"missing keyword(s): {', '.join(missing)}")
    from bv.api.inputs import path_of

    made: OptimizeSettings = _config(OptimizeSettings, {**settings, "items": path_of(items, "items")})
    return made
