"""`bv optimize`: the options of the loop, the target's (as bv rollout takes them), the judge's
(as bv judge) and the optimizer's; the loop itself is bv.optimize.loop, reached through bv.api."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click

from bv.cli.common import cli_words
from bv.cli.declared import options
from bv.cli.options import PROMPTS, Renamed
from bv.optimize.results import OptimizeOptions
from bv.optimize.setup import OptimizeSettings
from bv.stages.judge_config import JudgeConfig
from bv.stages.request_settings import WAITS
from bv.stages.rollout_config import RolloutConfig
from bv.tracking.options import TrackOptions


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
@options(OptimizeSettings, "test_judge_model", "test_judge_base_url", "test_judge_api_key")
@options(
    OptimizeSettings, "optimizer_model", "optimizer_base_url", "optimizer_api_key", "optimizer_temperature"
)
@options(
    OptimizeOptions, "ratio", "split", "split_seed", "budget", "epochs", "steps", "batch_size", "minibatch"
)
@options(OptimizeOptions, "success_share", "edits", "alpha", "gate", "refresh", "repeats", "max_skill_chars")
@options(OptimizeSettings, "search", "max_metric_calls")
@PROMPTS
@options(
    RolloutConfig,
    *("jobs", "retries", "timeout", *WAITS, "prices", "max_cost", "cache", "cache_scope"),
    max_cost={
        "help": "Stop starting requests once this run has spent this much (as a first Ctrl-C;"
        " needs --prices)."
    },
)
@options(TrackOptions, "track", "track_project", "track_entity")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Send and write nothing: print the split, the steps and the most requests by role.",
)
@options(RolloutConfig, "quiet")
def optimize(items: Path, no_cache: bool, dry_run: bool, quiet: bool, **settings: Any) -> None:
    """Improve a skill: roll out train batches, have the optimizer model propose edits from the
    failures, keep a candidate that scores higher on the selection split, and hand back the best
    skill only when the untouched test split confirms it (else the seed).

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
      bv optimize data/meta_data.jsonl --skill seed.md --out runs/opt1 -m gpt-4o \\
        --optimizer-model gpt-5 --track mlflow:http://127.0.0.1:5000   # every step, every skill
    """
    from bv import api
    from bv.cli import ending
    from bv.core import outcome
    from bv.core.errors import BadConfig, Interrupted
    from bv.engine.endpoints import BadEndpoint
    from bv.optimize.loop import OptimizeError
    from bv.optimize.report import gepa_lines, headline

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
        result = api.optimize(
            items, **settings, progress=None if quiet else lambda line: outcome.say(cli_words(line))
        )
    except (OptimizeError, BadEndpoint, BadConfig) as exc:
        raise click.UsageError(cli_words(str(exc))) from None
    except Interrupted as exc:  # a first Ctrl-C or SIGTERM, or the cost limit: the run resumes
        again = "re-run the same command to go on (finished steps are kept, paid replies cached)"
        outcome.say(f"{exc}; {again}")
        sys.exit(outcome.status_for(exc.signal or signal.SIGINT))
    from bv.optimize.gepa_adapter import GepaResult

    for line in gepa_lines(result) if isinstance(result, GepaResult) else headline(result):
        click.echo(line)
    which = "the best skill" if result.improved else "the seed"
    click.echo(f"handed back: {result.out / 'best.md'} ({which}); report: {result.out / 'report.html'}")
    failed = ", ".join(f"{n} {split}" for split, n in result.failed_rows.items() if n)
    if failed:
        outcome.say(
            f"rows failed: {failed} (left out of the figures above, never scored 0); re-run the"
            " same command to retry the test rows (finished steps are kept as history.jsonl has them)"
        )
        sys.exit(ending.ROWS_FAILED)
