"""The commands that send requests: rollout and judge (registered on the group in bv.cli.app)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from bv.cli.common import (
    API_KEY,
    BASE_URLS,
    CACHE,
    INPUTS,
    JOBS,
    NO_CACHE,
    PROMPTS,
    QUIET,
    RETRIES,
    SETTING_NAMES,
    SKIP_BAD,
    TIMEOUT,
    Finite,
    cli_words,
    default_cache,
    parse_params,
    parse_shard,
)
from bv.cli.ending import finish
from bv.core.outcome import Outcome
from bv.core.terminal import printable
from bv.engine.backends import BACKENDS

BACKEND_NAMES = list(BACKENDS)


def checked_endpoint(kind: str, **options: Any) -> Any:
    """The endpoint these options and the environment name, checked before any work (bad: exit 2)."""
    from bv.core.errors import BadConfig, Fatal
    from bv.engine.endpoints import resolve

    try:
        return resolve(kind, **options)
    except BadConfig as exc:
        raise click.UsageError(cli_words(str(exc))) from None
    except Fatal as exc:
        raise Fatal(cli_words(str(exc))) from None


@click.command()
@INPUTS
@click.option(
    "--backend",
    type=click.Choice(BACKEND_NAMES),
    default="openai",
    show_default=True,
    envvar="BV_BACKEND",
    help="Where requests go: an OpenAI-compatible API, Azure OpenAI, an external agent CLI (exec),"
    " or the offline chance baseline.",
)
@click.option("-m", "--model", envvar="BV_MODEL", help="Model name (Azure: the deployment). [env: BV_MODEL]")
@BASE_URLS
@API_KEY
@JOBS
@click.option("--ordered", is_flag=True, help="Write rows in input order (default: as they finish).")
@click.option(
    "--shard",
    metavar="K/N",
    help="Only shard K of N (0-based; by a stable hash of the id), to split a run across machines.",
)
@click.option(
    "--repeats",
    type=click.IntRange(1, 1000),
    default=1,
    show_default=True,
    help="Roll out every item K times (run 0..K-1), e.g. 3 for Avg@3.",
)
@click.option(
    "--max-turns",
    type=click.IntRange(1, 20),
    default=1,
    show_default=True,
    help="Turns per item; a reply without \\boxed{} gets a refinement turn.",
)
@PROMPTS
@click.option(
    "--max-tokens", type=click.IntRange(1), help="Cap on completion tokens per turn. [default: none]"
)
@click.option("--temperature", type=Finite(min=0), help="Sampling temperature. [default: the server's]")
@click.option("--seed", type=int, help="Sampling seed sent to the API (chance: the guess seed).")
@click.option(
    "-p",
    "--param",
    "extra_params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Extra request body field, VALUE as JSON if it parses (e.g. -p top_k=20);"
    " -p extra_body='{...}' adds each field of the object, as the openai SDK does.",
)
@RETRIES
@TIMEOUT
@CACHE
@NO_CACHE
@click.option("--max-pixels", type=click.IntRange(1), help="Downscale larger images to this many pixels.")
@click.option(
    "--artifacts",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write each row's system prompt, user prompt and conversation.json (every message of every"
    " turn) under DIR/<run>/<id>/.",
)
@click.option(
    "--exec-cmd",
    metavar="TEMPLATE",
    help="For --backend exec: the agent command, with {workdir} {prompt} {image} {model} {last_message}.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Send nothing: print rows, requests, cached replies, image bytes and estimated prompt tokens.",
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
    cache_path: Path | None,
    no_cache: bool,
    max_pixels: int | None,
    artifacts: Path | None,
    exec_cmd: str | None,
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
      bv rollout --backend exec -m gpt-5-codex --artifacts runs/ \\
        --exec-cmd 'codex exec --skip-git-repo-check -C {workdir} -i {image}
        --output-last-message {last_message} {prompt}'
    """
    from bv.core.jsonl import JsonlWriter, Problems
    from bv.engine.progress import input_lines, stdin_notice
    from bv.stages.rollout import dry_run_rollout, read_prompt_records, run_rollout

    config = rollout_config(click.get_current_context())
    endpoint = config.backend_config.get("endpoint")
    if endpoint is not None and not quiet:
        from bv.engine.params import temperature_warning

        warning = temperature_warning(endpoint.rule, endpoint.model, config.temperature)
        if warning:
            click.echo(f"bv rollout: warning: {printable(warning)}", err=True)
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
    from bv.stages.rollout_config import BACKEND_SETTINGS, RolloutConfig

    settings = stage_settings(ctx)
    settings["shard"] = parse_shard(settings["shard"])
    settings["extra_body"] = parse_params(settings["extra_body"])
    for name in ("model", "api_key", "base_url", "exec_cmd"):
        if name not in BACKEND_SETTINGS.get(settings["backend"], (name,)) and from_environment(ctx, name):
            settings[name] = None
    return checked(RolloutConfig, settings)


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
        raise Fatal(cli_words(str(exc))) from None


@click.command()
@INPUTS
@click.option(
    "--mode",
    type=click.Choice(["auto", "rules", "llm"]),
    default="auto",
    show_default=True,
    help="rules: rules only; llm: every item to the LLM judge (official protocol);"
    " auto: rules, then the LLM judge for what rules cannot decide.",
)
@click.option("--judge-model", envvar="BV_JUDGE_MODEL", help="LLM judge model. [env: BV_JUDGE_MODEL]")
@click.option(
    "--judge-base-url", envvar="BV_JUDGE_BASE_URL", help="LLM judge endpoint. [env: BV_JUDGE_BASE_URL]"
)
@click.option("--judge-api-key", help="LLM judge API key. [env: BV_JUDGE_API_KEY]")
@click.option(
    "--judge-param",
    "judge_param_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Extra field of the LLM judge's request body, as -p for rollout (e.g. --judge-param"
    " reasoning_effort=minimal). bv's default temperature 0 is sent only to models that accept it.",
)
@PROMPTS
@JOBS
@RETRIES
@TIMEOUT
@CACHE
@NO_CACHE
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
    cache_path: Path | None,
    no_cache: bool,
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
    """
    from bv.core.jsonl import JsonlWriter, Problems
    from bv.engine.progress import input_lines, stdin_notice
    from bv.stages.judge import read_rollout_rows, run_judge

    config = judge_config(click.get_current_context())
    problems = Problems()
    if config.mode == "auto" and config.endpoint is None and not quiet:
        click.echo(
            "bv judge: no LLM judge configured, so rows the rules cannot decide count wrong;"
            " give --judge-model MODEL (or BV_JUDGE_MODEL), or --mode rules to judge by rules only",
            err=True,
        )
    stdin_notice(inputs, "rollout rows", quiet)
    # The total is for the progress display only: --quiet shows none, so the input is not read twice.
    total = None if quiet else input_lines(inputs)
    outcome = run_judge(read_rollout_rows(inputs, problems), config, JsonlWriter().write, total=total)
    return finish(outcome, problems, skip_bad)
