"""`bv eval`: the whole evaluation of one model into a run folder (bv.evaluation.evaluate does it)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import click

from bv.cli.common import cli_words
from bv.cli.declared import config_of, options
from bv.cli.options import PROMPTS_HELP, SKILL, SKIP_BAD
from bv.core.selection import Selection
from bv.core.settings import keywords
from bv.evaluation.config import EvalConfig
from bv.stages.judge_config import JudgeConfig
from bv.stages.prompt import PromptOptions
from bv.stages.request_settings import SENDING
from bv.stages.rollout_config import RolloutConfig
from bv.tracking.options import TrackOptions


def default_out(backend: str, model: str | None, skill: Path | None = None) -> Path:
    """runs/<model>, or runs/<model>-<skill> with a skill (two skills of one model are two runs),
    made one safe folder name (Qwen/Qwen2.5-VL-7B with v2.md: Qwen_Qwen2.5-VL-7B-v2)."""
    name = model if model and backend != "chance" else backend
    if skill is not None:
        name = f"{name}-{skill.stem}"
    return Path("runs") / (re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "run")


@click.command("eval")
@click.argument("items", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="The run folder; re-run the same command to resume it. [default: runs/<model>, with"
    " --skill runs/<model>-<skill's file stem>]",
)
@options(EvalConfig, "label")
@options(RolloutConfig, "backend", "model", "base_url", "api_key")
@options(JudgeConfig, "mode", "judge_model", "judge_base_url", "judge_api_key", "judge_params", "panel")
@options(JudgeConfig, "calibrate")
@options(RolloutConfig, "repeats", "max_turns", "max_tokens", "temperature", "seed", "extra_body")
@options(RolloutConfig, "max_pixels", "exec_cmd")
@options(PromptOptions, "style")
@SKILL
@click.option(
    "--prompts",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    metavar="DIR",
    help=PROMPTS_HELP,
)
@options(PromptOptions, "image_detail")
@options(Selection, *keywords(Selection), sample={"help": "N items stratified by subtype."})
@options(RolloutConfig, *SENDING, "batch")
@options(TrackOptions, "track", "track_project", "track_entity")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Send nothing, write nothing (no key needed): print the rollout's and the judge's requests,"
    " cached replies, estimated tokens and, with --prices, what each would cost.",
)
@options(RolloutConfig, "quiet")
@SKIP_BAD
def eval_(items: Path | None, out: Path | None, dry_run: bool, **settings: Any) -> None:
    """Evaluate one model: prompt, rollout, judge and report, into one run folder.

    ITEMS is a meta_data.jsonl (default: the set `bv data` wrote). The folder gets
    results.jsonl, config.json (every option, the endpoints, bv's version, the items' and the
    skill's SHA-256; never a key), summary.json (the figures bv report runs/ reads, kept as
    the run goes), report.md, report.html and logs/ (what each stage said). Options are those of bv prompt,
    bv rollout and bv judge (--mode is the judge's); --max-cost bounds the rollout's and the
    judge's spend together, --batch sends both as batch jobs. Stopped (Ctrl-C, SIGTERM, a
    kill, a failed request, --max-cost), re-run the same command: finished replies come from
    the reply cache, so only what did not finish is sent again. Exit status as the stages':
    0, 1 when rows failed, 2 usage error, 130 Ctrl-C or --max-cost, 143 SIGTERM.

    \b
    Examples:
      bv eval -m gpt-4o --judge-model gpt-4o-mini
      bv eval data/meta_data.jsonl -m Qwen/Qwen2.5-VL-7B-Instruct \\
        --base-url http://localhost:8000/v1 --repeats 3 -o runs/qwen-7b
      bv eval data/meta_data.jsonl --backend chance --repeats 3 -o runs/chance
      bv eval -m gpt-4o --judge-model gpt-4o-mini --prices genai-prices --dry-run
      bv eval -m gpt-4o --judge-model gpt-4o-mini --prices genai-prices --max-cost 20
      bv eval -m gpt-4o --judge-model gpt-4o-mini --track mlflow:http://127.0.0.1:5000
    """
    from bv.cli.request_commands import unused_from_environment
    from bv.core.errors import BadConfig
    from bv.evaluation.config import BadOption
    from bv.evaluation.evaluate import run_eval

    if "model" in unused_from_environment(click.get_current_context(), settings["backend"]):
        settings["model"] = None
    if items is None:
        from bv.data.writer import default_dir

        items = default_dir() / "meta_data.jsonl"
        if not items.is_file():
            raise click.UsageError(
                f"no ITEMS given and no data set at {items}: run `bv data` first, or give a meta_data.jsonl"
            )
    out = out or default_out(settings["backend"], settings["model"], settings["skill"])
    config: EvalConfig = config_of(EvalConfig, settings, items=items, out=out)
    try:
        if dry_run:
            sys.exit(_dry_run(config))
        result = run_eval(config)
    except (BadOption, BadConfig) as exc:
        raise click.UsageError(cli_words(str(exc))) from None
    say_result(result)
    sys.exit(result.status)


def _dry_run(config: Any) -> int:
    """`--dry-run`: the two stages' figures on stderr (as bv rollout --dry-run prints its own)."""
    from bv.core.outcome import OK
    from bv.core.run_context import current
    from bv.core.terminal import printable
    from bv.evaluation.eval_dry_run import dry_run_eval

    current().stage = "prompt"
    lines = dry_run_eval(config)
    click.echo("bv eval --dry-run: nothing sent, nothing written", err=True)
    for line in lines:
        click.echo(printable(f"  {cli_words(line)}"), err=True)
    return OK


def say_result(result: Any) -> None:
    """The closing line: what the folder holds, or why the run stopped and how to resume it."""
    from bv.core.outcome import say
    from bv.core.run_context import current
    from bv.core.stats import counted, dollars

    current().stage = "eval"
    spent = "" if result.spent_usd is None else f"{dollars(result.spent_usd)} spent; "
    if result.stopped is not None:
        again = "re-run the same command to go on (finished replies come from the cache, at no cost)"
        if result.fatal is not None:  # re-running alone would stop again: the fix comes first
            again = "once that is fixed, re-run the same command (finished replies come from the cache)"
        say(f"{result.stopped}; {spent}{again}; no results written to {result.folder}")
        return
    accuracy = "" if result.accuracy is None else f", accuracy {100 * result.accuracy:.1f}%"
    files = ", ".join([*result.written[1:], "config.json", "logs/"])
    say(f"{counted(result.row_count, 'row')}{accuracy}; {spent}wrote {result.folder}/: {files}")
