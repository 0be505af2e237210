"""The commands that send requests: rollout and judge (registered on the group in bv.cli.app)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from bv.cli.common import cli_words
from bv.cli.declared import checked, config_of, options
from bv.cli.ending import end_stage
from bv.cli.options import INPUTS, PROMPTS, SKIP_BAD
from bv.core.outcome import Outcome
from bv.core.terminal import printable, stdin_notice
from bv.stages.judge_config import JudgeConfig
from bv.stages.request_settings import WAITS
from bv.stages.rollout_config import RolloutConfig


def checked_endpoint(kind: str, **options: Any) -> Any:
    """The endpoint these options and the environment name, checked before any work (bad: exit 2)."""
    from functools import partial

    from bv.engine.endpoints import resolve

    return checked(partial(resolve, kind), options)


@click.command()
@INPUTS
@options(RolloutConfig, "backend", "model", "base_url", "api_key", "jobs", "ordered", "shard", "repeats")
@options(RolloutConfig, "max_turns")
@PROMPTS
@options(RolloutConfig, "max_tokens", "temperature", "seed", "extra_body", "retries", "timeout", *WAITS)
@options(
    RolloutConfig,
    "cache",
    "cache_scope",
    "max_pixels",
    "artifacts",
    "exec_cmd",
    "prices",
    "max_cost",
    "batch",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Send nothing (no key needed): print rows, requests, cached replies, image bytes, estimated"
    " tokens and, with --prices, what it would cost.",
)
@options(RolloutConfig, "quiet")
@SKIP_BAD
def rollout(inputs: tuple[str, ...], dry_run: bool, skip_bad: bool, **settings: Any) -> int:
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

    config = rollout_config(settings, dry_run)
    endpoint = config.backend_config.get("endpoint")
    if endpoint is not None and not config.quiet:
        from bv.engine.params import temperature_warning

        warning = temperature_warning(endpoint.rule, endpoint.model, config.request.temperature)
        if warning:
            click.echo(f"bv rollout: warning: {printable(cli_words(warning))}", err=True)
        if config.batch:
            from bv.engine.batch import alias_warning

            alias = alias_warning(endpoint)
            if alias:
                click.echo(f"bv rollout: warning: {printable(cli_words(alias))}", err=True)
    problems = Problems()
    records = read_prompt_records(inputs, problems)
    if dry_run:
        lines = dry_run_rollout(records, config)
        click.echo("bv rollout --dry-run: nothing sent", err=True)
        for line in lines:
            click.echo(f"  {cli_words(line)}", err=True)
        return end_stage(Outcome(), problems, skip_bad)
    stdin_notice(inputs, "prompt records", config.quiet)
    total = input_lines(inputs) if config.shard is None else None
    return end_stage(run_rollout(records, config, JsonlWriter().write, total=total), problems, skip_bad)


def rollout_config(settings: Mapping[str, Any], dry_run: bool) -> RolloutConfig:
    """The rollout's config from the parsed options, as bv.api builds it from keywords. A
    backend-only setting that came from the environment (BV_MODEL) is dropped for a backend
    that does not use it; given as an option, it is refused."""
    unused = unused_from_environment(click.get_current_context(), settings["backend"])
    cleared = {name: None for name in unused}
    config: RolloutConfig = config_of(RolloutConfig, {**settings, **cleared}, dry_run=dry_run)
    return config


def unused_from_environment(ctx: click.Context, backend: str) -> list[str]:
    """The backend-only settings that came from the environment (BV_MODEL) and that `backend` does
    not use: a default for the backends that take them, not a request to the others."""
    from bv.stages.rollout_config import BACKEND_ONLY, backend_settings

    unused = [name for name in BACKEND_ONLY if name not in backend_settings(backend)]
    environment = click.core.ParameterSource.ENVIRONMENT
    return [name for name in unused if ctx.get_parameter_source(name) is environment]


@click.command()
@INPUTS
@options(JudgeConfig, "mode", "judge_model", "judge_base_url", "judge_api_key", "judge_params", "panel")
@options(JudgeConfig, "calibrate")
@PROMPTS
@options(JudgeConfig, "jobs", "retries", "timeout", *WAITS, "cache", "cache_scope", "prices", "max_cost")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Send nothing (no key needed): print what the rules decide, what goes to the LLM judge, its"
    " cached replies, estimated tokens and, with --prices, what it would cost.",
)
@options(JudgeConfig, "batch", "quiet")
@SKIP_BAD
def judge(inputs: tuple[str, ...], dry_run: bool, skip_bad: bool, **settings: Any) -> int:
    """Extract each reply's answer and decide whether it is right.

    Rules decide first; an LLM judge, if configured, decides what they cannot. Rows keep
    their input order. Re-judging a file replaces only the judge fields.

    \b
    Examples:
      bv judge rollouts.jsonl > results.jsonl
      bv judge --mode llm --judge-model gpt-4o-mini rollouts.jsonl > results.jsonl
      bv judge --mode llm --judge-model gpt-5-mini --judge-param reasoning_effort=minimal r.jsonl
      bv judge --mode llm --judge-model gpt-4o-mini --batch rollouts.jsonl > results.jsonl
      bv judge --judge-model gpt-4o-mini --judge-model claude-haiku-4-5 \\
        --judge-base-url https://api.openai.com/v1 --judge-base-url http://localhost:4000/v1 \\
        --panel unanimous rollouts.jsonl > results.jsonl
    """
    from bv.core.jsonl import JsonlWriter, Problems
    from bv.engine.progress import input_lines
    from bv.stages.judge import read_rollout_rows, run_judge
    from bv.stages.judge_plan import dry_run_judge

    config: JudgeConfig = config_of(JudgeConfig, settings, dry_run=dry_run)
    problems = Problems()
    if dry_run:
        lines = dry_run_judge(read_rollout_rows(inputs, problems), config)
        click.echo("bv judge --dry-run: nothing sent", err=True)
        for line in lines:
            click.echo(f"  {cli_words(line)}", err=True)
        return end_stage(Outcome(), problems, skip_bad)
    stdin_notice(inputs, "rollout rows", config.quiet)
    # The total is for the progress display only: --quiet shows none, so the input is not read twice.
    total = None if config.quiet else input_lines(inputs)
    outcome = run_judge(read_rollout_rows(inputs, problems), config, JsonlWriter().write, total=total)
    return end_stage(outcome, problems, skip_bad)
