"""bv's command line: options are parsed here and streams wired; each stage's logic lives in its module."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from bv import __version__
from bv.cli import ending
from bv.cli.common import (
    CACHE,
    IDS,
    IMAGE_DETAIL,
    INPUTS,
    LIMIT,
    PROMPTS,
    SKILL,
    SKIP_BAD,
    STYLE,
    SUBTYPES,
    TYPES,
    Finite,
    cli_words,
    default_cache,
    error,
    reader_may_leave,
)
from bv.cli.data_commands import data, export, models
from bv.cli.ending import finish_rows
from bv.cli.eval_command import eval_
from bv.cli.optimize_command import optimize
from bv.cli.request_commands import judge, rollout
from bv.cli.result_commands import merge, report
from bv.cli.template_commands import templates
from bv.core import environment
from bv.core.errors import BadConfig, BVError, Interrupted, StdoutClosed
from bv.core.run_context import RunContext, current, running
from bv.core.terminal import printable


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="bv")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Evaluate multimodal LLMs on BabyVision-style visual questions.

    Each stage reads JSONL (files, or stdin when none) and writes JSONL to stdout;
    progress and errors go to stderr.

    \b
      bv data --out data/       # the official 388 items (or a sample: bv synth --out data/)
      bv prompt data/meta_data.jsonl | bv rollout -m MODEL -j 32 | bv judge > results.jsonl
      bv report results.jsonl

    Exit status: 0 all rows succeeded, 1 some rows failed (every row still written), 2 usage
    error, 130 Ctrl-C, 143 SIGTERM (docs/exit-status.md).
    """
    run = current()
    run.stage = ctx.invoked_subcommand or ""
    command = cli.commands.get(run.stage)
    run.words = lambda message: cli_words(message, command)  # the library's settings as our options


cli.add_command(rollout)
cli.add_command(judge)
cli.add_command(data)
cli.add_command(export)
cli.add_command(models)
cli.add_command(templates)
cli.add_command(merge)
cli.add_command(report)
cli.add_command(eval_)
cli.add_command(optimize)


@cli.command()
@INPUTS
@STYLE
@PROMPTS
@SKILL
@IMAGE_DETAIL
@click.option(
    "--image-root",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder image paths are relative to, for items read from stdin. [default: .]",
)
@click.option("--allow-any-path", is_flag=True, help="Allow absolute image paths and paths outside the root.")
@click.option("--diagnostic-instruction", help="Text appended to each question under '## Training Readout'.")
@click.option(
    "--trace-context",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSONL of {id, text}: a trace snapshot put before the question of those items.",
)
@IDS
@TYPES
@SUBTYPES
@click.option(
    "--sample", type=click.IntRange(1), metavar="N", help="N items stratified by subtype (see --seed)."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Which --sample to draw.")
@LIMIT
@SKIP_BAD
def prompt(
    inputs: tuple[str, ...],
    style: str,
    templates: Any,
    skill: Path | None,
    image_detail: str,
    image_root: Path | None,
    allow_any_path: bool,
    diagnostic_instruction: str | None,
    trace_context: Path | None,
    ids: tuple[str, ...],
    types: tuple[str, ...],
    subtypes: tuple[str, ...],
    sample: int | None,
    seed: int,
    limit: int | None,
    skip_bad: bool,
) -> None:
    """Turn items (official meta_data.jsonl or bv's own) into chat requests.

    Try a few items first with --limit, --ids, --type/--subtype or --sample (docs/data.md).

    \b
    Examples:
      bv prompt data/meta_data.jsonl --skill skills/v2.md > prompts.jsonl
      bv prompt data/meta_data.jsonl --style official > paper-prompts.jsonl
      bv prompt data/meta_data.jsonl --prompts my-prompts/ > prompts.jsonl
      bv prompt data/meta_data.jsonl --sample 22 --seed 1 | bv rollout -m MODEL --dry-run
    """
    from bv.core.items import parse_item
    from bv.core.jsonl import JsonlWriter, Problems, read_records
    from bv.core.selection import Selection, parse_ids
    from bv.stages.prompt import PromptOptions, Skill, load_traces, run_prompt

    loaded_skill = Skill.load(skill) if skill else None
    traces = load_traces(trace_context) if trace_context else None
    try:
        options = PromptOptions(
            style=style,
            templates=templates,
            skill=loaded_skill,
            detail=image_detail,
            diagnostic=diagnostic_instruction,
            traces=traces,
            image_root=image_root,
            allow_any_path=allow_any_path,
        )
    except BadConfig as exc:  # options that do not go together
        raise click.UsageError(cli_words(str(exc))) from None
    from bv.engine.progress import stdin_notice

    stdin_notice(inputs, "items")
    selection = Selection(parse_ids(ids), types, subtypes, sample, seed, limit)
    problems = Problems()
    unmatched = run_prompt(
        read_records(inputs, problems, parse_item),
        options,
        selection,
        JsonlWriter().write,
        problems,
        cli_words,
    )
    for message in unmatched:
        error(message)
    finish_rows(problems, skip_bad)
    if unmatched:
        sys.exit(ending.ROWS_FAILED)


@cli.command()
@click.option(
    "-n", "--n", "count", type=click.IntRange(1), default=40, show_default=True, help="Number of items."
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder for meta_data.jsonl and images/.",
)
def synth(count: int, seed: int, out: Path) -> None:
    """Write a deterministic BabyVision-style sample set with exact answers.

    \b
    Example:
      bv synth --n 40 --seed 0 --out data/ && bv prompt data/meta_data.jsonl | head -1
    """
    from bv.data.synth import write_sample_set

    written = write_sample_set(out, count, seed)
    click.echo(f"bv synth: wrote {written} items to {out / 'meta_data.jsonl'}", err=True)


@cli.command("import")
@click.argument(
    "inputs", nargs=-1, type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path)
)
@click.option("--run", type=click.IntRange(1), help="K of a result file whose name has no run_K (1-based).")
@click.option("--model", help="Model name recorded on imported result rows.")
@click.option(
    "--items",
    "items_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="meta_data.jsonl, to give imported results their answer type, choices and images.",
)
@SKIP_BAD
def import_(
    inputs: tuple[Path, ...], run: int | None, model: str | None, items_path: Path | None, skip_bad: bool
) -> None:
    """Import official BabyVision files (or stdin) into bv records.

    Result files (model_results_run_K.json) become judged rows with run K-1 and the official
    verdict kept (decided_by "imported"), so `bv report` reproduces compute_score.py and
    `bv judge` can re-judge them; meta_data.jsonl becomes bv items.

    \b
    Examples:
      bv import model_results_run_1.json model_results_run_2.json model_results_run_3.json | bv report
      bv import model_results_run_*.json | bv judge --mode rules | bv report
      bv import data/meta_data.jsonl > data/items.jsonl
      cat results.json | bv import --run 1 | bv report
    """
    from bv.core.jsonl import JsonlWriter, Problems
    from bv.data.official import import_files
    from bv.engine.progress import stdin_notice

    stdin_notice([str(path) for path in inputs], "official results or items")
    problems = Problems()
    paths = list(inputs) or [Path("-")]
    import_files(paths, JsonlWriter(), problems, run=run, model=model, items_path=items_path)
    finish_rows(problems, skip_bad)


@cli.group()
def cache() -> None:
    """Inspect or clear the reply cache.

    \b
    Examples:
      bv cache stats
      bv cache list --model gpt-4o -n 5
      bv cache clear --model gpt-4o
    """


@cache.command("stats")
@CACHE
def cache_stats(cache_path: Path | None) -> None:
    """Replies cached, per backend and model, as JSON.

    \b
    Example:
      bv cache stats --cache build/cache.sqlite
    """
    import json

    from bv.engine.cache import ReplyCache

    path = cache_path or default_cache()
    stats = ReplyCache(path).stats() if path.exists() else {"path": str(path), "replies": 0, "models": []}
    with reader_may_leave():
        click.echo(json.dumps(stats, indent=2))


@cache.command("clear")
@CACHE
@click.option("--model", help="Only this model's replies.")
@click.option("--older-than", type=Finite(min=0), help="Only replies older than this many days.")
@click.option("--all", "everything", is_flag=True, help="Every reply; needed when no filter is given.")
def cache_clear(
    cache_path: Path | None, model: str | None, older_than: float | None, everything: bool
) -> None:
    """Delete cached replies (one model's, old ones, or --all).

    \b
    Examples:
      bv cache clear --model gpt-4o
      bv cache clear --older-than 30
      bv cache clear --all
    """
    from bv.engine.cache import ReplyCache

    path = cache_path or default_cache()
    cache = ReplyCache(path) if path.exists() else None
    if cache is not None and model is None and older_than is None and not everything:
        replies = cache.stats()["replies"]
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            raise click.UsageError(
                f"this would delete all {replies} cached replies in {path}; add --all to do so,"
                " or choose some with --model or --older-than"
            )
        if not click.confirm(f"Delete all {replies} cached replies in {path}?", err=True):
            click.echo("bv cache: nothing deleted", err=True)
            return
    deleted = cache.clear(model, None if older_than is None else older_than * 86400) if cache else 0
    click.echo(f"bv cache: deleted {deleted} {'reply' if deleted == 1 else 'replies'} from {path}", err=True)
    if cache is not None and model is not None and deleted == 0 and older_than is None:
        click.echo(
            printable(f"bv cache: no replies of model {model!r}; the cache holds: {cache.holds()}"), err=True
        )


@cache.command("list")
@CACHE
@click.option("--model", help="Only this model's replies.")
@click.option(
    "-n", "--limit", type=click.IntRange(0), default=20, show_default=True, help="The newest N (0: all)."
)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object per reply: created, backend, model, reply."
)
def cache_list(cache_path: Path | None, model: str | None, limit: int, as_json: bool) -> None:
    """Browse stored replies, newest first: when (UTC), backend, model and the reply's start.

    \b
    Examples:
      bv cache list
      bv cache list --model gpt-4o -n 50
      bv cache list --json -n 0 | jq -r .reply.content
    """
    import json

    from bv.engine.cache import ReplyCache

    path = cache_path or default_cache()
    if not path.exists():
        click.echo(f"bv cache: no cache at {path}", err=True)
        return
    cache = ReplyCache(path)
    entries = cache.entries(model, limit)
    with reader_may_leave():
        for entry in entries:
            if as_json:
                click.echo(json.dumps(entry, ensure_ascii=False))
                continue
            content = " ".join(str(entry["reply"].get("content") or "").split())
            start = content[:100] + ("…" if len(content) > 100 else "")
            click.echo(printable(f"{entry['created']}  {entry['backend']}  {entry['model']}  {start}"))
    if model is not None and not entries:
        click.echo(
            printable(f"bv cache: no replies of model {model!r}; the cache holds: {cache.holds()}"), err=True
        )


# Commands that load the HTTP stack: they leave without interpreter teardown (bv.cli.ending.leave).
_FAST_EXIT = ("rollout", "judge")


def run(args: list[str] | None = None, context: RunContext | None = None) -> int:
    """Run one bv command line in this process and return its exit status, ending nothing: no
    traceback for expected failures (BV_DEBUG=1 shows one), quiet on a closed stdout. The command
    runs in a run context of its own (bv.core.run_context: its secrets, notes and limits), whose
    second Ctrl-C or SIGTERM quits the process (bv.cli.ending.quit_soon)."""
    with running(context or RunContext(hard_stop=ending.quit_soon)):
        return _run(args)


def _run(args: list[str] | None) -> int:
    import signal

    ending.install_sigterm()
    try:
        status = cli.main(args, prog_name="bv", standalone_mode=False)
        return status if isinstance(status, int) else 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        return ending.interrupted(signal.SIGINT)
    except ending.Terminated:
        return ending.interrupted(signal.SIGTERM)
    except (StdoutClosed, BrokenPipeError):
        from bv.core.jsonl import silence_stdout

        silence_stdout()
        return 0
    except Interrupted as exc:  # a second signal, where no event loop ran (the rules judge)
        return ending.status_for(exc.signal or signal.SIGINT)
    except BadConfig as exc:  # raised by a command's own checks: worded with its options
        click.UsageError(cli_words(str(exc), cli.commands.get(current().stage))).show()
        return 2
    except Exception as exc:
        if environment.debug():
            raise
        kind = "" if isinstance(exc, (BVError, OSError)) else f"internal error ({type(exc).__name__}): "
        message = cli_words(str(exc), cli.commands.get(current().stage))
        error(kind + message + ("" if kind == "" else " (set BV_DEBUG=1 for a traceback)"))
        return ending.ROWS_FAILED


def main() -> None:
    """The `bv` script: run the command line, then end the process with its status."""
    context = RunContext(hard_stop=ending.quit_soon)
    status = run(None, context)
    if context.stage in _FAST_EXIT:
        ending.leave(status)
    sys.exit(status)
