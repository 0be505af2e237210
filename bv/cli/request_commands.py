"""The commands that send requests: rollout and judge (registered on the group in bv.cli.app)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from bv.cli.common import SETTING_NAMES, cli_words, default_cache, parse_params, parse_shard
from bv.cli.ending import finish
from bv.cli.options import (
    API_KEY,
    BACKEND,
    BASE_URLS,
    BATCH,
    CACHE,
    EXEC_CMD,
    INPUTS,
    JOBS,
    JUDGE_API_KEY,
    JUDGE_BASE_URL,
    JUDGE_MODE,
    JUDGE_MODEL,
    JUDGE_PARAM,
    MAX_COST,
    MAX_PIXELS,
    MAX_TOKENS,
    MAX_TURNS,
    MODEL,
    NO_CACHE,
    PARAMS,
    PRICES,
    PROMPTS,
    QUIET,
    REPEATS,
    RETRIES,
    SEED,
    SKIP_BAD,
    TEMPERATURE,
    TIMEOUT,
    waits,
)
from bv.core.outcome import Outcome
from bv.core.terminal import printable, stdin_notice


def checked_endpoint(kind: str, **options: Any) -> Any:
    """The endpoint these options and the environment name, checked before any work (bad: exit 2)."""
    from functools import partial

    from bv.engine.endpoints import resolve

    return checked(partial(resolve, kind), options)


@click.command()
@INPUTS
@BACKEND
@MODEL
@BASE_URLS
@API_KEY
@JOBS
@click.option("--ordered", is_flag=True, help="Write rows in input order (default: as they finish).")
@click.option(
    "--shard",
    metavar="K/N|auto",
    help="Only shard K of N (0-based; by a stable hash of the id), to split a run across machines;"
    " auto: K and N from a SLURM job array, auto/N: K from a Kubernetes Indexed Job (docs/scale.md).",
)
@REPEATS
@MAX_TURNS
@PROMPTS
@MAX_TOKENS
@TEMPERATURE
@SEED
@PARAMS
@RETRIES
@TIMEOUT
@waits
@CACHE
@NO_CACHE
@MAX_PIXELS
@click.option(
    "--artifacts",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write each row's system prompt, user prompt and conversation.json (every message of every"
    " turn) under DIR/<run>/<id>/.",
)
@EXEC_CMD
@PRICES
@MAX_COST
@BATCH
@click.option(
    "--dry-run",
    is_flag=True,
    help="Send nothing (no key needed): print rows, requests, cached replies, image bytes, estimated"
    " tokens and, with --prices, what it would cost.",
)
@QUIET
@SKIP_BAD
def rollout(
    inputs: tuple[str, ...],
    backend: str,
    model: str | None,
    base_urls: tuple[str, ...],
    api_key: str | None,
    jobs: int,
    ordered: bool,
    shard: str | None,
    repeats: int,
    max_turns: int,
    templates: Any,
    max_tokens: int | None,
    temperature: float | None,
    seed: int | None,
    extra_params: tuple[str, ...],
    retries: int,
    timeout: float,
    rate_limit_patience: float,
    connect_timeout: float,
    first_byte_timeout: float | None,
    read_timeout: float | None,
    stall_notice: float,
    cache_path: Path | None,
    no_cache: bool,
    max_pixels: int | None,
    artifacts: Path | None,
    exec_cmd: str | None,
    prices: str | None,
    max_cost: float | None,
    batch: bool,
    dry_run: bool,
    quiet: bool,
    skip_bad: bool,
) -> int:
    """Send prompt records to a model, concurrently, with retries and a cache.

    Every row is written as soon as it finishes (with --ordered, in input order); a row
    whose requests failed is written with `error` set and is retried by the next run. Re-run
    the same command after a crash or Ctrl-C: finished replies come from the cache.

    \b
    Examples:
      bv prompt items.jsonl | bv rollout -m gpt-4o -j 32 > rollouts.jsonl
      bv rollout --base-url http://gpu1:8000/v1 --base-url http://gpu2:8000/v1 -m Qwen2.5-VL-7B p.jsonl
      bv rollout --backend chance --repeats 3 prompts.jsonl
      bv rollout -m MODEL --repeats 3 -p 'reasoning={"enabled": true}' paper-prompts.jsonl
      bv rollout -m gpt-4o --repeats 3 --dry-run prompts.jsonl   # what it would send and cost
      bv rollout -m gpt-4o --repeats 3 --batch prompts.jsonl     # as batch jobs; re-run to resume
      bv rollout --backend exec -m gpt-5-codex --artifacts runs/ \\
        --exec-cmd 'codex exec --skip-git-repo-check -C {workdir} -i {image}
        --output-last-message {last_message} {prompt}'
    """
    from bv.core.jsonl import JsonlWriter, Problems
    from bv.engine.progress import input_lines
    from bv.stages.rollout import dry_run_rollout, read_prompt_records, run_rollout

    config = rollout_config(click.get_current_context())
    endpoint = config.backend_config.get("endpoint")
    if endpoint is not None and not quiet:
        from bv.engine.params import temperature_warning

        warning = temperature_warning(endpoint.rule, endpoint.model, config.temperature)
        if warning:
            click.echo(f"bv rollout: warning: {printable(cli_words(warning))}", err=True)
    problems = Problems()
    records = read_prompt_records(inputs, problems)
    if dry_run:
        lines = dry_run_rollout(records, config)
        click.echo("bv rollout --dry-run: nothing sent", err=True)
        for line in lines:
            click.echo(f"  {cli_words(line)}", err=True)
        return finish(Outcome(), problems, skip_bad)
    stdin_notice(inputs, "prompt records", quiet)
    total = input_lines(inputs) if config.shard is None else None
    return finish(run_rollout(records, config, JsonlWriter().write, total=total), problems, skip_bad)


# Options of the commands that are wiring, not settings of the stage (files, streams, exit status).
WIRING = {"inputs", "dry_run", "skip_bad", "no_cache"}


def rollout_config(ctx: click.Context) -> Any:
    """The rollout's config from the parsed options (bv.stages.rollout_config.RolloutConfig), as
    bv.api builds it from keywords. A backend-only setting that came from the environment
    (BV_MODEL) is dropped for a backend that does not use it; given as an option, it is refused."""
    from bv.stages.rollout_config import RolloutConfig

    settings = stage_settings(ctx)
    settings["shard"] = parse_shard(settings["shard"])
    settings["extra_body"] = parse_params(settings["extra_body"])
    for name in unused_from_environment(ctx, settings["backend"]):
        settings[name] = None
    return checked(RolloutConfig, settings)


def unused_from_environment(ctx: click.Context, backend: str) -> list[str]:
    """The backend-only settings that came from the environment (BV_MODEL) and that `backend` does
    not use: a default for the backends that take them, not a request to the others."""
    from bv.stages.rollout_config import BACKEND_ONLY, BACKEND_SETTINGS

    unused = [name for name in BACKEND_ONLY if name not in BACKEND_SETTINGS.get(backend, BACKEND_ONLY)]
    return [name for name in unused if from_environment(ctx, name)]


def judge_config(ctx: click.Context) -> Any:
    """The judge's config from the parsed options (bv.stages.judge_config.JudgeConfig), as bv.api
    builds it from keywords."""
    from bv.stages.judge_config import JudgeConfig

    settings = stage_settings(ctx)
    settings["judge_params"] = parse_params(settings["judge_params"], "--judge-param")
    return checked(JudgeConfig, settings)


def stage_settings(ctx: click.Context) -> dict[str, Any]:
    """The command's options by the names of its stage's settings, the cache resolved."""
    params = ctx.params
    settings = {SETTING_NAMES.get(k, k): v for k, v in params.items() if k not in WIRING}
    settings["cache"] = None if params["no_cache"] else params["cache_path"] or default_cache()
    settings["dry_run"] = params.get("dry_run", False)  # no key needed: nothing is sent
    return settings


def from_environment(ctx: click.Context, setting: str) -> bool:
    names = {v: k for k, v in SETTING_NAMES.items()}
    source = ctx.get_parameter_source(names.get(setting, setting))
    return source is click.core.ParameterSource.ENVIRONMENT


def checked(config_type: Any, settings: dict[str, Any]) -> Any:
    """The stage's config, or the command's error: a setting that cannot work is a usage error
    (exit 2), an endpoint that cannot is an error (exit 1), each worded with the options."""
    from bv.core.errors import BadConfig, Fatal

    try:
        return config_type(**settings)
    except BadConfig as exc:
        raise click.UsageError(cli_words(str(exc))) from None
    except Fatal as exc:
        raise type(exc)(cli_words(str(exc))) from None  # NoEndpoint stays itself


@click.command()
@INPUTS
@JUDGE_MODE
@JUDGE_MODEL
@JUDGE_BASE_URL
@JUDGE_API_KEY
@JUDGE_PARAM
@PROMPTS
@JOBS
@RETRIES
@TIMEOUT
@waits
@CACHE
@NO_CACHE
@PRICES
@MAX_COST
@click.option(
    "--dry-run",
    is_flag=True,
    help="Send nothing (no key needed): print what the rules decide, what goes to the LLM judge, its"
    " cached replies, estimated tokens and, with --prices, what it would cost.",
)
@BATCH
@QUIET
@SKIP_BAD
def judge(
    inputs: tuple[str, ...],
    mode: str,
    judge_model: str | None,
    judge_base_url: str | None,
    judge_api_key: str | None,
    judge_param_pairs: tuple[str, ...],
    templates: Any,
    jobs: int,
    retries: int,
    timeout: float,
    rate_limit_patience: float,
    connect_timeout: float,
    first_byte_timeout: float | None,
    read_timeout: float | None,
    stall_notice: float,
    cache_path: Path | None,
    no_cache: bool,
    prices: str | None,
    max_cost: float | None,
    dry_run: bool,
    batch: bool,
    quiet: bool,
    skip_bad: bool,
) -> int:
    """Extract each reply's answer and decide whether it is right.

    Rules decide first; an LLM judge, if configured, decides what they cannot. Rows keep
    their input order. Re-judging a file replaces only the judge fields.

    \b
    Examples:
      bv judge rollouts.jsonl > results.jsonl
      bv judge --mode llm --judge-model gpt-4o-mini rollouts.jsonl > results.jsonl
      bv judge --mode llm --judge-model gpt-5-mini --judge-param reasoning_effort=minimal r.jsonl
      bv judge --mode llm --judge-model gpt-4o-mini --batch rollouts.jsonl > results.jsonl
    """
    from bv.core.jsonl import JsonlWriter, Problems
    from bv.engine.progress import input_lines
    from bv.stages.judge import read_rollout_rows, run_judge
    from bv.stages.judge_plan import dry_run_judge

    config = judge_config(click.get_current_context())
    problems = Problems()
    if dry_run:
        lines = dry_run_judge(read_rollout_rows(inputs, problems), config)
        click.echo("bv judge --dry-run: nothing sent", err=True)
        for line in lines:
            click.echo(f"  {cli_words(line)}", err=True)
        return finish(Outcome(), problems, skip_bad)
    if config.no_judge_notice and not quiet:
        click.echo(f"bv judge: {cli_words(config.no_judge_notice)}", err=True)
    stdin_notice(inputs, "rollout rows", quiet)
    # The total is for the progress display only: --quiet shows none, so the input is not read twice.
    total = None if quiet else input_lines(inputs)
    outcome = run_judge(read_rollout_rows(inputs, problems), config, JsonlWriter().write, total=total)
    return finish(outcome, problems, skip_bad)
