"""The commands over items: `bv prompt` (items into chat requests), `bv synth` (a sample set) and
`bv import` (official files into bv records); registered on the group in bv.cli.app."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from bv.cli import ending
from bv.cli.common import cli_words, error
from bv.cli.declared import config_of, options
from bv.cli.ending import finish_rows
from bv.cli.options import INPUTS, PROMPTS, SKILL, SKIP_BAD, Renamed
from bv.core.errors import BadConfig
from bv.core.selection import Selection
from bv.core.settings import keywords
from bv.core.terminal import stdin_notice
from bv.stages.prompt import PromptOptions


@click.command(cls=Renamed, renamed={"--seed": "--sample-seed"})
@INPUTS
@options(PromptOptions, "style")
@PROMPTS
@SKILL
@options(PromptOptions, "image_detail")
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
@options(Selection, *keywords(Selection))
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
    skip_bad: bool,
    **selected: Any,
) -> None:
    """Turn items (official meta_data.jsonl or bv's own) into chat requests.

    Try a few items first with --limit, --ids, --type/--subtype or --sample (docs/data.md).

    \b
    Examples:
      bv prompt data/meta_data.jsonl --skill skills/v2.md > prompts.jsonl
      bv prompt data/meta_data.jsonl --style official > paper-prompts.jsonl
      bv prompt data/meta_data.jsonl --prompts my-prompts/ > prompts.jsonl
      bv prompt data/meta_data.jsonl --sample 22 --sample-seed 1 | bv rollout -m MODEL --dry-run
    """
    from bv.core.items import parse_item
    from bv.core.jsonl import JsonlWriter, Problems, read_records
    from bv.stages.prompt import Skill, load_traces, run_prompt

    loaded_skill = Skill.load(skill) if skill else None
    traces = load_traces(trace_context) if trace_context else None
    try:
        options = PromptOptions(
            style=style,
            templates=templates,
            skill=loaded_skill,
            image_detail=image_detail,
            diagnostic=diagnostic_instruction,
            traces=traces,
            image_root=image_root,
            allow_any_path=allow_any_path,
        )
    except BadConfig as exc:  # options that do not go together
        raise click.UsageError(cli_words(str(exc))) from None

    stdin_notice(inputs, "items")
    selection = config_of(Selection, selected)
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


@click.command()
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


@click.command("import")
@click.argument(
    "inputs", nargs=-1, type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path)
)
@click.option(
    "--run",
    type=click.IntRange(1),
    help="K (1-based) of a result file whose name has no run_K, or of an lmms-eval or VLMEvalKit file.",
)
@click.option("--model", help="Model name recorded on imported result rows.")
@click.option("--scorer", help="An inspect eval log's scorer whose verdicts to keep, when it has several.")
@click.option(
    "--items",
    "items_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="meta_data.jsonl: official results get their answer type, choices and images; VLMEvalKit's, images.",
)
@SKIP_BAD
def import_(
    inputs: tuple[Path, ...],
    run: int | None,
    model: str | None,
    scorer: str | None,
    items_path: Path | None,
    skip_bad: bool,
) -> None:
    """Import BabyVision results (official, lmms-eval, VLMEvalKit, inspect) and items into bv records.

    Result files (model_results_run_K.json) become judged rows with run K-1 and the official
    verdict kept (decided_by "imported"), so `bv report` reproduces compute_score.py and
    `bv judge` can re-judge them; meta_data.jsonl becomes bv items. lmms-eval's
    *_samples_babyvision.jsonl and VLMEvalKit's *_BabyVision_*_judge.tsv/json/xlsx become judged
    rows with their verdicts kept; VLMEvalKit's *_BabyVision.tsv/json/xlsx, rows for `bv judge`.
    inspect_ai eval logs (.eval, or .json logs; needs pip install 'babyvision-bv[inspect]') become
    judged rows, epoch K as run K-1, each score's C or I kept (docs/formats.md lists each mapping).

    \b
    Examples:
      bv import model_results_run_1.json model_results_run_2.json model_results_run_3.json | bv report
      bv import model_results_run_*.json | bv judge --mode rules | bv report
      bv import data/meta_data.jsonl > data/items.jsonl
      cat results.json | bv import --run 1 | bv report
      bv import logs/qwen/*_samples_babyvision.jsonl > qwen.jsonl && bv report qwen.jsonl llava.jsonl
      bv import GPT4o_BabyVision_openai_gpt-5.2_judge.tsv | bv report
      bv import logs/a.eval > a.jsonl && bv import logs/b.eval > b.jsonl && bv report a.jsonl b.jsonl
    """
    from bv.core.jsonl import JsonlWriter, Problems
    from bv.data.official import import_files

    stdin_notice([str(path) for path in inputs], "results to import or items")
    problems = Problems()
    paths = list(inputs) or [Path("-")]
    import_files(paths, JsonlWriter(), problems, run=run, model=model, items_path=items_path, scorer=scorer)
    finish_rows(problems, skip_bad)
