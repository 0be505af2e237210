"""`bv optimize`: the options of the loop, the target's (as bv rollout takes them), the judge's
(as bv judge) and the optimizer's; the loop itself is bv.optimize.loop, reached through bv.api."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click

from bv.cli.common import cli_words
from bv.cli.declared import option, options
from bv.cli.options import PROMPTS, Finite, Renamed, share
from bv.optimize.results import OptimizeOptions
from bv.stages.judge_config import JudgeConfig
from bv.stages.request_settings import WAITS
from bv.stages.rollout_config import RolloutConfig


def _ratio(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, int, int]:
    from bv.optimize.split import parse_ratio

    try:
        return parse_ratio(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command(cls=Renamed, renamed={"--batch": "--batch-size", "--seed": "--split-seed"})
@click.argument("items", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--skill",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="The seed skill (Markdown), put in the target's system prompt as bv prompt --skill does.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Run folder: skills/, history.jsonl, best.md, report.md, report.html; the same command resumes it.",
)
@options(
    RolloutConfig,
    *("backend", "model", "base_url", "api_key", "max_turns", "max_tokens", "temperature", "extra_body"),
    model={"help": "Target model."},
    max_turns={"help": "Target turns per item."},
    max_tokens={"help": "Target's cap on completion tokens per turn."},
    temperature={"help": "Target's sampling temperature. [default: the server's]"},
    extra_body={"help": "Extra target request field, as bv rollout's -p."},
)
@options(JudgeConfig, "mode", "judge_model", "judge_base_url", "judge_api_key", "judge_params")
@click.option(
    "--test-judge-model",
    envvar="BV_TEST_JUDGE_MODEL",
    help="The final test's own LLM judge, so a skill that sways the gate's judge cannot sway the"
    " test's. [default: --judge-model] [env: BV_TEST_JUDGE_MODEL]",
)
@click.option(
    "--test-judge-base-url",
    envvar="BV_TEST_JUDGE_BASE_URL",
    help="Its endpoint. [default: --judge-base-url] [env: BV_TEST_JUDGE_BASE_URL]",
)
@click.option(
    "--test-judge-api-key",
    help="Its API key. [env: BV_TEST_JUDGE_API_KEY; default: the judge's, when the endpoint is the same]",
)
@click.option(
    "--optimizer-model",
    envvar="BV_OPTIMIZER_MODEL",
    help="The model that writes edits. [env: BV_OPTIMIZER_MODEL]",
)
@click.option(
    "--optimizer-base-url", envvar="BV_OPTIMIZER_BASE_URL", help="Its endpoint. [env: BV_OPTIMIZER_BASE_URL]"
)
@click.option("--optimizer-api-key", help="Its API key. [env: BV_OPTIMIZER_API_KEY]")
@click.option("--optimizer-temperature", type=Finite(min=0), help="Its sampling temperature.")
@click.option(
    "--ratio",
    default="2:1:7",
    show_default=True,
    callback=_ratio,
    help="train:selection:test, stratified by subtype.",
)
@click.option(
    "--split",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='A split to use instead: {"train": [ids], "selection": [...], "test": [...]}.',
)
@click.option(
    "--split-seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the split, the batch order and the successes sent.",
)
@click.option(
    "--epochs", type=click.IntRange(1), default=4, show_default=True, help="Passes over the train split."
)
@click.option(
    "--steps",
    type=click.IntRange(0),
    help="At most this many steps in all. [default: every batch of every epoch]",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1),
    default=64,
    show_default=True,
    help="Train items rolled out per step.",
)
@click.option(
    "--minibatch",
    type=click.IntRange(1),
    default=8,
    show_default=True,
    help="Attempts per optimizer request.",
)
@click.option(
    "--success-share",
    type=float,
    default=0.25,
    show_default=True,
    callback=share,
    help="Share of a batch's successes shown to the optimizer.",
)
@click.option(
    "--edits",
    type=click.IntRange(1),
    default=4,
    show_default=True,
    help="Step size: edits applied at most per step.",
)
@click.option(
    "--alpha",
    type=Finite(min=0, max=1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="The run's false-accept rate: the chance that a run whose edits cannot help ends with any"
    " accepted edit (the j-th gate decision is tested at alpha/2^j).",
)
@click.option(
    "--gate",
    type=click.Choice(["paired", "greater"]),
    default="paired",
    show_default=True,
    help="paired: a one-sided paired per-item test at --alpha; greater: any higher selection score"
    " (the reference's rule).",
)
@option(OptimizeOptions, "repeats")
@click.option(
    "--max-skill-chars", type=click.IntRange(1), default=16_000, show_default=True, help="Skill size cap."
)
@click.option(
    "--search",
    type=click.Choice(["loop", "gepa"]),
    default="loop",
    show_default=True,
    help="loop: bv's loop and its gate; gepa: GEPA on bv's evaluator, the same split, the same test"
    " comparison (the extra gepa; docs/optimize.md).",
)
@click.option(
    "--max-metric-calls",
    type=click.IntRange(1),
    help="GEPA's budget in target rollouts on train and selection. [default: what the loop plans]",
)
@PROMPTS
@options(
    RolloutConfig,
    *("jobs", "retries", "timeout", *WAITS, "prices", "max_cost", "cache", "cache_scope"),
    max_cost={
        "help": "Stop starting requests once this run has spent this much (as a first Ctrl-C;"
        " needs --prices)."
    },
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Send and write nothing: print the split, the steps and the most requests by role.",
)
@options(RolloutConfig, "quiet")
def optimize(items: Path, no_cache: bool, dry_run: bool, quiet: bool, **settings: Any) -> None:
    """Improve a skill: roll out train batches, have the optimizer model propose edits from the
    failures, keep a candidate only when a paired per-item test on the selection split finds it
    better, and compare the best skill with the seed on the test split at the end.

    Re-run the same command after a crash, Ctrl-C or kill: it goes on from the last finished
    step, and the reply cache answers every request already paid for (docs/optimize.md).
    --max-cost bounds every role's spend (target, judge, optimizer) over the run: reached, it
    stops as a first Ctrl-C does (exit 130; history.jsonl and report.md say where).

    \b
    Examples:
      bv optimize data/meta_data.jsonl --skill seed.md --out runs/opt1 -m gpt-4o \\
        --optimizer-model gpt-5
      bv optimize data/meta_data.jsonl --skill seed.md --out runs/opt1 -m gpt-4o \\
        --optimizer-model gpt-5 --dry-run   # the split, the steps, the most requests by role
    """
    from bv import api
    from bv.cli import ending
    from bv.core import outcome
    from bv.core.errors import BadConfig, Interrupted
    from bv.engine.endpoints import BadEndpoint
    from bv.optimize.loop import OptimizeError
    from bv.optimize.report import gepa_lines, headline

    if not settings["optimizer_model"] and not dry_run:
        raise click.UsageError(
            "bv optimize needs --optimizer-model (or BV_OPTIMIZER_MODEL): the model that writes edits"
        )
    settings["cache"] = None if no_cache else settings["cache"] or api.DEFAULT_CACHE
    settings["quiet"] = quiet or not sys.stderr.isatty()  # each stage's progress: live on a terminal only
    try:
        if dry_run:
            from bv.core.terminal import printable

            plan = api.plan_optimize(items, **settings)
            click.echo("bv optimize --dry-run: nothing sent, nothing written", err=True)
            for line in plan.lines():
                click.echo(printable(f"  {cli_words(line)}"), err=True)
            return
        result = api.optimize(items, **settings, progress=None if quiet else lambda line: outcome.say(line))
    except (OptimizeError, BadEndpoint, BadConfig) as exc:
        raise click.UsageError(cli_words(str(exc))) from None
    except Interrupted as exc:  # a first Ctrl-C or SIGTERM, or the cost limit: the run resumes
        again = "re-run the same command to go on (finished steps are kept, paid replies cached)"
        outcome.say(f"{exc}; {again}")
        sys.exit(outcome.status_for(exc.signal or signal.SIGINT))
    from bv.optimize.gepa_adapter import GepaResult

    for line in gepa_lines(result) if isinstance(result, GepaResult) else headline(result):
        click.echo(line)
    click.echo(f"best skill: {result.out / 'best.md'}; report: {result.out / 'report.html'}")
    failed = result.test.get("failed_rows", 0)
    if failed:
        outcome.say(f"{failed} test rows failed (left out of the figures above); re-run to retry them")
        sys.exit(ending.ROWS_FAILED)
