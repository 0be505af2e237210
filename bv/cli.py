"""bv's command line: options are parsed here and streams wired; each stage's logic lives in its module."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from bv import __version__

JOBS = click.option(
    "-j",
    "--jobs",
    type=click.IntRange(1, 4096),
    default=8,
    show_default=True,
    help="Requests in flight at once.",
)
SKIP_BAD = click.option("--skip-bad", is_flag=True, help="Exit 0 even when some input lines were bad.")
QUIET = click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr.")
INPUTS = click.argument("inputs", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
RETRIES = click.option(
    "--retries",
    type=click.IntRange(0, 100),
    default=5,
    show_default=True,
    help="Retries per request on 429, 5xx, timeouts and dropped connections.",
)
TIMEOUT = click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=600.0,
    show_default=True,
    help="Seconds per try of a request.",
)
CACHE = click.option(
    "--cache",
    "cache_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Reply cache (SQLite). [default: $XDG_CACHE_HOME/bv/cache.sqlite]",
)
NO_CACHE = click.option("--no-cache", is_flag=True, help="Neither read nor write the reply cache.")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="bv")
def cli() -> None:
    """Evaluate multimodal LLMs on BabyVision-style visual questions.

    Each stage reads JSONL (files, or stdin when none) and writes JSONL to stdout;
    progress and errors go to stderr.

    \b
      bv synth --n 40 --out data/
      bv prompt data/meta_data.jsonl | bv rollout -m MODEL -j 32 | bv judge > results.jsonl
      bv report results.jsonl
    """


def _exit_for(problems: Any, skip_bad: bool, outcome: Any = None) -> None:
    """Exit with the stage's status: 130 interrupted, 1 fatal or bad input, else 0."""
    from bv.jsonl import silence_stdout

    if outcome is not None:
        if outcome.stdout_closed:
            silence_stdout()
            sys.exit(0)
        if outcome.fatal:
            _error(outcome.fatal)
            sys.exit(1)
        if outcome.interrupted:
            sys.exit(130)
    if problems.count:
        click.echo(f"bv: {problems.count} bad input line(s)" + (" skipped" if skip_bad else ""), err=True)
        if not skip_bad:
            sys.exit(1)


def _error(message: str) -> None:
    from bv.secrets import redact

    click.echo(f"bv: error: {redact(message)}", err=True)


@cli.command()
@INPUTS
@click.option(
    "--skill",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Markdown file put in the system prompt under '## Skill'.",
)
@click.option(
    "--image-detail",
    type=click.Choice(["auto", "low", "high"]),
    default="auto",
    show_default=True,
    help="The image part's 'detail' (omitted for auto).",
)
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
@SKIP_BAD
def prompt(
    inputs: tuple[str, ...],
    skill: Path | None,
    image_detail: str,
    image_root: Path | None,
    allow_any_path: bool,
    diagnostic_instruction: str | None,
    trace_context: Path | None,
    skip_bad: bool,
) -> None:
    """Turn items (official meta_data.jsonl or bv's own) into chat requests.

    \b
    Example:
      bv prompt data/meta_data.jsonl --skill skills/v2.md > prompts.jsonl
    """
    from bv.jsonl import JsonlWriter, Problems, read_records
    from bv.prompting import PromptOptions, Skill, build_prompt, load_traces
    from bv.records import BadRecord, parse_item

    options = PromptOptions(
        skill=Skill.load(skill) if skill else None,
        detail=image_detail,
        diagnostic=diagnostic_instruction,
        traces=load_traces(trace_context) if trace_context else None,
        image_root=image_root,
        allow_any_path=allow_any_path,
    )
    problems, writer = Problems(), JsonlWriter()
    for source, item in read_records(inputs, problems, parse_item):
        try:
            writer.write(build_prompt(item, source.folder, options))
        except BadRecord as exc:
            problems.report(source, str(exc))
    _exit_for(problems, skip_bad)


BACKEND_NAMES = ["openai", "azure", "chance"]


@cli.command()
@INPUTS
@click.option(
    "--backend",
    type=click.Choice(BACKEND_NAMES),
    default="openai",
    show_default=True,
    envvar="BV_BACKEND",
    help="Where requests go; chance is the offline baseline.",
)
@click.option("-m", "--model", envvar="BV_MODEL", help="Model name (Azure: the deployment). [env: BV_MODEL]")
@click.option(
    "--base-url",
    "base_urls",
    multiple=True,
    help="OpenAI-compatible endpoint; repeat for replicas of one model. [env: OPENAI_BASE_URL]",
)
@click.option("--api-key", help="API key. [env: OPENAI_API_KEY, or AZURE_OPENAI_API_KEY for azure]")
@JOBS
@click.option("--ordered", is_flag=True, help="Write rows in input order (default: as they finish).")
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
@click.option(
    "--max-tokens", type=click.IntRange(1), help="Cap on completion tokens per turn. [default: none]"
)
@click.option("--temperature", type=float, help="Sampling temperature. [default: the server's]")
@click.option("--seed", type=int, help="Sampling seed sent to the API (chance: the guess seed).")
@click.option(
    "-p",
    "--param",
    "extra_params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Extra request body field, VALUE as JSON if it parses (e.g. -p top_k=20).",
)
@RETRIES
@TIMEOUT
@CACHE
@NO_CACHE
@click.option("--max-pixels", type=click.IntRange(1), help="Downscale larger images to this many pixels.")
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
    repeats: int,
    max_turns: int,
    max_tokens: int | None,
    temperature: float | None,
    seed: int | None,
    extra_params: tuple[str, ...],
    retries: int,
    timeout: float,
    cache_path: Path | None,
    no_cache: bool,
    max_pixels: int | None,
    quiet: bool,
    skip_bad: bool,
) -> None:
    """Send prompt records to a model, concurrently, with retries and a cache.

    Every row is written as soon as it finishes (with --ordered, in input order); a row
    whose requests failed is written with `error` set and is retried by the next run. Re-run
    the same command after a crash or Ctrl-C: finished replies come from the cache.

    \b
    Examples:
      bv prompt items.jsonl | bv rollout -m gpt-4o -j 32 > rollouts.jsonl
      bv rollout --base-url http://gpu1:8000/v1 --base-url http://gpu2:8000/v1 -m Qwen2.5-VL-7B p.jsonl
      bv rollout --backend chance --repeats 3 prompts.jsonl
    """
    from bv.engine import RunSettings
    from bv.rollout import RolloutOptions, run_rollout

    params: dict[str, Any] = {
        k: v
        for k, v in (("max_tokens", max_tokens), ("temperature", temperature), ("seed", seed))
        if v is not None
    }
    extra = _parse_params(extra_params)
    if extra:
        params["extra_body"] = extra
    backend_config = dict(
        model=model,
        base_urls=base_urls,
        api_key=api_key,
        timeout=timeout,
        jobs=jobs,
        max_pixels=max_pixels,
        seed=seed,
    )
    options = RolloutOptions(max_turns=max_turns, repeats=repeats, params=params)
    settings = RunSettings(
        jobs=jobs,
        retries=retries,
        timeout_s=timeout,
        quiet=quiet,
        ordered=ordered,
        cache_path=None if no_cache else cache_path or _default_cache(),
    )
    problems, outcome = run_rollout(inputs, backend, backend_config, options, settings)
    _exit_for(problems, skip_bad, outcome)


def _default_cache() -> Path:
    from bv.cache import default_path

    return default_path()


def _parse_params(pairs: tuple[str, ...]) -> dict[str, Any]:
    import json

    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="-p/--param")
        try:
            params[key] = json.loads(value)
        except ValueError:
            params[key] = value
    return params


@cli.command()
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
    jobs: int,
    retries: int,
    timeout: float,
    cache_path: Path | None,
    no_cache: bool,
    quiet: bool,
    skip_bad: bool,
) -> None:
    """Extract each reply's answer and decide whether it is right.

    Rules decide first; an LLM judge, if configured, decides what they cannot. Rows keep
    their input order. Re-judging a file replaces only the judge fields.

    \b
    Examples:
      bv judge rollouts.jsonl > results.jsonl
      bv judge --mode llm --judge-model gpt-4o-mini rollouts.jsonl > results.jsonl
    """
    from bv.engine import RunSettings
    from bv.judge import run_judge

    judge_config = dict(
        model=judge_model,
        base_urls=[judge_base_url] if judge_base_url else [],
        api_key=judge_api_key or os.environ.get("BV_JUDGE_API_KEY"),
        timeout=timeout,
        jobs=jobs,
    )
    settings = RunSettings(
        jobs=jobs,
        retries=retries,
        timeout_s=timeout,
        quiet=quiet,
        cache_path=None if no_cache else cache_path or _default_cache(),
    )
    problems, outcome = run_judge(inputs, mode, judge_config, settings)
    _exit_for(problems, skip_bad, outcome)


@cli.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write here (atomically) instead of stdout.",
)
@click.option("--sort", is_flag=True, help="Order rows by (id, run).")
@SKIP_BAD
def merge(inputs: tuple[str, ...], output: Path | None, sort: bool, skip_bad: bool) -> None:
    """Combine runs and shards: one row per (id, run), a later file winning.

    \b
    Example:
      bv merge shard-0.jsonl shard-1.jsonl --sort -o results.jsonl
    """
    from bv.jsonl import Problems, read_records
    from bv.merge import merge_rows, ordered_rows, row_key, write_rows
    from bv.records import BadRecord

    problems = Problems()

    def keyed() -> Any:
        for source, record in read_records(inputs, problems):
            try:
                row_key(record)
            except BadRecord as exc:
                problems.report(source, str(exc))
                continue
            yield source, record

    result = merge_rows(keyed())
    for conflict in result.conflicts:
        click.echo(f"bv merge: warning: {conflict}", err=True)
    rows = ordered_rows(result, sort)
    write_rows(rows, output)
    click.echo(
        f"bv merge: {result.rows_in} rows in, {len(rows)} rows out, {result.replaced} duplicates replaced",
        err=True,
    )
    _exit_for(problems, skip_bad)


@cli.command()
@click.argument("inputs", nargs=-1, type=str)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "markdown", "csv"]),
    default="table",
    show_default=True,
)
@SKIP_BAD
def report(inputs: tuple[str, ...], fmt: str, skip_bad: bool) -> None:
    """Accuracy overall, by type and by subtype; several inputs side by side.

    Label an input with NAME=PATH. Several runs (--repeats) give Avg@k ± std.

    \b
    Examples:
      bv report results.jsonl
      bv report skill-v1=a.jsonl skill-v2=b.jsonl --format markdown
    """
    from bv.jsonl import Problems, read_records
    from bv.render import render_csv, render_json, render_markdown, render_table
    from bv.report import summarize

    problems = Problems()
    summaries = []
    for name, path in _labelled(inputs or ("-",)):
        summaries.append(summarize((record for _, record in read_records([path], problems)), name=name))
    if fmt == "json":
        render_json(summaries[0] if len(summaries) == 1 else {"inputs": summaries}, sys.stdout)
    else:
        {"table": render_table, "markdown": render_markdown, "csv": render_csv}[fmt](summaries, sys.stdout)
    _exit_for(problems, skip_bad)


def _labelled(inputs: tuple[str, ...]) -> list[tuple[str, str]]:
    out = []
    for spec in inputs:
        name, sep, path = spec.partition("=")
        if sep and name and not os.path.exists(spec):
            out.append((name, path))
        else:
            out.append(("stdin" if spec == "-" else Path(spec).stem, spec))
    return out


@cli.command()
@click.option("--n", "count", type=click.IntRange(1), default=40, show_default=True, help="Number of items.")
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
    from bv.synth import write_sample_set

    written = write_sample_set(out, count, seed)
    click.echo(f"bv synth: wrote {written} items to {out / 'meta_data.jsonl'}", err=True)


@cli.group()
def cache() -> None:
    """Inspect or clear the reply cache.

    \b
    Examples:
      bv cache stats
      bv cache clear --model gpt-4o
    """


@cache.command("stats")
@CACHE
def cache_stats(cache_path: Path | None) -> None:
    """Replies cached, per backend and model, as JSON."""
    import json

    from bv.cache import ReplyCache

    path = cache_path or _default_cache()
    if not path.exists():
        click.echo(json.dumps({"path": str(path), "replies": 0, "models": []}, indent=2))
        return
    click.echo(json.dumps(ReplyCache(path).stats(), indent=2))


@cache.command("clear")
@CACHE
@click.option("--model", help="Only this model's replies.")
@click.option("--older-than", type=click.FloatRange(min=0), help="Only replies older than this many days.")
def cache_clear(cache_path: Path | None, model: str | None, older_than: float | None) -> None:
    """Delete cached replies (all, one model's, or old ones)."""
    from bv.cache import ReplyCache

    path = cache_path or _default_cache()
    deleted = (
        ReplyCache(path).clear(model, None if older_than is None else older_than * 86400)
        if path.exists()
        else 0
    )
    click.echo(f"bv cache: deleted {deleted} replies from {path}", err=True)


def main() -> None:
    """Entry point: no traceback for expected failures (BV_DEBUG=1 shows one), quiet on a closed stdout."""
    from bv.jsonl import StdoutClosed, silence_stdout

    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        sys.exit(130)
    except (StdoutClosed, BrokenPipeError):
        silence_stdout()
        sys.exit(0)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if os.environ.get("BV_DEBUG"):
            raise
        from bv.records import BadRecord
        from bv.retry import Fatal

        kind = (
            "" if isinstance(exc, (Fatal, BadRecord, OSError)) else f"internal error ({type(exc).__name__}): "
        )
        _error(kind + str(exc) + ("" if kind == "" else " (set BV_DEBUG=1 for a traceback)"))
        sys.exit(1)
