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
    SKIP_BAD,
    TIMEOUT,
    Finite,
    default_cache,
    parse_params,
    parse_shard,
    waits,
)
from bv.cli.ending import finish
from bv.core.outcome import Outcome
from bv.core.terminal import printable
from bv.engine.backends import BACKENDS

BACKEND_NAMES = list(BACKENDS)


def checked_endpoint(kind: str, **options: Any) -> Any:
    """The endpoint these options and the environment name, checked before any work (bad: exit 2)."""
    from bv.engine.endpoints import BadEndpoint, resolve

    try:
        return resolve(kind, **options)
    except BadEndpoint as exc:
        raise click.UsageError(str(exc)) from None


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
@waits
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
    help="For --backend exec: the agent command, with {workdir} {prompt} {image} {model} {last_message}"
    " {system} {system_toml} (docs/backends.md).",
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
    from bv.engine.caller import RunSettings
    from bv.stages.artifacts import Artifacts
    from bv.stages.rollout import RolloutOptions, run_rollout

    params: dict[str, Any] = {
        k: v
        for k, v in (
            ("max_tokens", max_tokens),
            ("temperature", temperature),
            ("seed", seed),
            ("max_pixels", max_pixels),
        )
        if v is not None
    }
    extra = parse_params(extra_params)
    if extra:
        params["extra_body"] = extra
    from bv.engine.backends import backend_config
    from bv.engine.endpoints import BadEndpoint

    try:
        config = backend_config(
            backend,
            model=model,
            base_urls=base_urls,
            api_key=api_key,
            timeout=timeout,
            jobs=jobs,
            seed=seed,
            exec_cmd=exec_cmd,
            connect_timeout=connect_timeout,
            first_byte_timeout=first_byte_timeout,
            read_timeout=read_timeout,
        )
    except BadEndpoint as exc:
        raise click.UsageError(str(exc)) from None
    if "endpoint" in config and not quiet:
        from bv.engine.params import temperature_warning

        warning = temperature_warning(config["endpoint"].rule, config["endpoint"].model, temperature)
        if warning:
            click.echo(f"bv rollout: warning: {printable(warning)}", err=True)
    options = RolloutOptions(
        max_turns=max_turns,
        repeats=repeats,
        params=params,
        shard=parse_shard(shard),
        artifacts=None if artifacts is None else Artifacts(artifacts),
        templates=templates,
    )
    settings = RunSettings(
        jobs=jobs,
        retries=retries,
        timeout_s=timeout,
        rate_limit_patience_s=rate_limit_patience,
        stall_notice_s=stall_notice,
        quiet=quiet,
        ordered=ordered,
        cache_path=None if no_cache else cache_path or default_cache(),
    )
    if dry_run:
        from bv.stages.rollout import dry_run_rollout

        return finish(Outcome(), dry_run_rollout(inputs, backend, config, options, settings), skip_bad)
    problems, outcome = run_rollout(inputs, backend, config, options, settings)
    if options.artifacts is not None:
        options.artifacts.finish()
    return finish(outcome, problems, skip_bad)


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
@waits
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
    rate_limit_patience: float,
    connect_timeout: float,
    first_byte_timeout: float | None,
    read_timeout: float | None,
    stall_notice: float,
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
    from bv.engine.caller import RunSettings
    from bv.engine.endpoints import BadEndpoint, judge_endpoint
    from bv.stages.judge import run_judge

    try:
        endpoint = judge_endpoint(
            mode,
            judge_model,
            judge_base_url,
            judge_api_key,
            timeout,
            jobs,
            connect_timeout=connect_timeout,
            first_byte_timeout=first_byte_timeout,
            read_timeout=read_timeout,
        )
    except BadEndpoint as exc:
        raise click.UsageError(str(exc)) from None
    settings = RunSettings(
        jobs=jobs,
        retries=retries,
        timeout_s=timeout,
        rate_limit_patience_s=rate_limit_patience,
        stall_notice_s=stall_notice,
        quiet=quiet,
        cache_path=None if no_cache else cache_path or default_cache(),
    )
    given = parse_params(judge_param_pairs, "--judge-param")
    problems, outcome = run_judge(inputs, mode, endpoint, settings, templates, given_params=given)
    return finish(outcome, problems, skip_bad)
