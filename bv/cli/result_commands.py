"""The commands over result rows: combining them (`bv merge`) and scoring them (`bv report`);
registered in bv.cli.app."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bv.cli import ending
from bv.cli.common import cli_words, error, reader_may_leave
from bv.cli.ending import finish_rows
from bv.cli.options import SKIP_BAD, share
from bv.core.terminal import stdin_notice
from bv.reporting.runs import SORTS

if TYPE_CHECKING:
    from bv.reporting.report import Input


@click.command()
@click.argument("inputs", nargs=-1, type=click.Path(allow_dash=True))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write here (atomically) instead of stdout.",
)
@click.option("--sort", is_flag=True, help="Order rows by (id, run).")
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 1 and write nothing when a shard is missing or shards of different counts are mixed (for CI).",
)
@SKIP_BAD
def merge(inputs: tuple[str, ...], output: Path | None, sort: bool, strict: bool, skip_bad: bool) -> None:
    """Combine runs and shards: one row per (id, run), a later file winning (files, or stdin).

    An input may be a bv eval run folder (its results.jsonl). With -o, any input error (a
    missing file, or a bad line without --skip-bad) leaves the output file as it was: a
    partial merge never replaces a good file. Rows of `--shard` runs record their shard: the
    shards present are named, and a missing one (or shards of mixed counts) is warned about,
    an error with --strict.

    \b
    Examples:
      bv merge shard-0.jsonl shard-1.jsonl --sort -o results.jsonl
      bv merge runs/gpt-4o more-runs.jsonl -o all.jsonl && bv report all.jsonl
    """
    from bv.core.jsonl import Problems, read_records
    from bv.core.records import check_row
    from bv.core.run_inputs import results_path
    from bv.core.shards import described
    from bv.core.shards import problems as shard_problems
    from bv.core.terminal import printable
    from bv.stages.merge import check_inputs, merge_rows, ordered_keys, write_rows

    inputs = tuple(results_path(path) for path in inputs)
    check_inputs(inputs)
    stdin_notice(inputs, "rows")
    problems = Problems()
    result = merge_rows(read_records(inputs, problems, check_row, fast=True), problems)
    if output is not None and problems.count and not skip_bad:
        problems.finish()
        error(
            f"{problems.count} bad input line(s): {output} not written (fix them, or merge the readable"
            " rows with --skip-bad)"
        )
        sys.exit(ending.ROWS_FAILED)
    shards = result.shards.as_json()
    wrong = shard_problems(shards)
    for line in wrong:
        click.echo(printable(f"bv merge: {'error' if strict else 'warning'}: {line}"), err=True)
    if strict and wrong:
        problems.finish()
        error("--strict: the shards do not make one whole run (above); nothing written")
        sys.exit(ending.ROWS_FAILED)
    keys = ordered_keys(result, sort)
    with reader_may_leave():
        write_rows(result, keys, output)
    present = f", {described(shards)}" if shards is not None else ""
    click.echo(
        f"bv merge: {result.rows_in} rows in, {len(keys)} rows out, {result.replaced} duplicates replaced"
        + present,
        err=True,
    )
    finish_rows(problems, skip_bad)


@click.command()
@click.argument("inputs", nargs=-1, type=str)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "markdown", "csv"]),
    default="table",
    show_default=True,
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report (in --format) here, atomically, instead of stdout.",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Also write a self-contained HTML viewer of every item, with its image, here"
    " (its folder made if need be; '-': the page alone to stdout).",
)
@click.option(
    "--fail-under",
    type=float,
    callback=share,
    metavar="X",
    help="Exit 1 if an input's overall accuracy is below X, a share in [0, 1] (0.45 for 45%).",
)
@click.option(
    "--by",
    type=click.Choice(["model", "skill", "style", "prompts", "judge_version"]),
    multiple=True,
    help="Split each input into side-by-side columns, one per model (skill, prompt style,"
    " replaced prompt templates, judge version).",
)
@click.option(
    "--exclude-failed",
    is_flag=True,
    help="Accuracy over finished rows only (no rollout or judge error, decided); labelled so.",
)
@click.option(
    "--image-root",
    type=click.Path(file_okay=False, path_type=Path),
    help="HTML: embed images under this folder. [default: a run folder's items folder, a results"
    " file's own folder; stdin: here]",
)
@click.option("--allow-any-path", is_flag=True, help="HTML: embed images from anywhere the rows name.")
@click.option(
    "--baseline", metavar="NAME", help="Compare every other input with this one. [default: the first]"
)
@click.option(
    "--adjust",
    type=click.Choice(["holm", "bh"]),
    default="holm",
    show_default=True,
    help="Adjust the p-values of the groups (and of several comparisons): Holm or Benjamini-Hochberg.",
)
@click.option(
    "--cluster",
    type=click.Choice(["type", "subtype"]),
    help="Cluster the standard errors of the accuracies and of the paired differences by this field"
    " (items of one subtype are not independent).",
)
@click.option(
    "--power",
    is_flag=True,
    help="Say the smallest difference these items and runs detect (80% power, alpha 0.05), and the"
    " items or runs per item a difference of 2, 3 or 5 points needs.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 1 when runs cover different items, inputs have different rows, or inputs differ"
    " in more than the one thing compared (for CI).",
)
@click.option(
    "--sort",
    type=click.Choice(SORTS),
    default=SORTS[0],
    show_default=True,
    help="A table of runs (a folder of runs): order its finished runs by this (accuracy: highest first).",
)
@SKIP_BAD
def report(
    inputs: tuple[str, ...],
    fmt: str,
    output: Path | None,
    html_path: Path | None,
    fail_under: float | None,
    by: tuple[str, ...],
    exclude_failed: bool,
    image_root: Path | None,
    allow_any_path: bool,
    baseline: str | None,
    adjust: str,
    cluster: str | None,
    power: bool,
    strict: bool,
    sort: str,
    skip_bad: bool,
) -> None:
    """Accuracy overall, by type and by subtype; several inputs side by side; a table of runs.

    The accuracy counts every row: rollout errors, judge errors and undecided rows are not
    correct (each is also counted in its own column, and a warning says how to fix them).
    An input is a results file, stdin (-), a bv eval run folder (named after its --label,
    else the folder; its images found from its config.json) or an inspect_ai eval log (.eval,
    imported as bv import does); label one with NAME=PATH.
    Several runs (--repeats) give Avg@k ± std (the run-to-run
    spread); the 95% interval [ ] is over items, each item's score its mean over its runs.
    Inputs are compared per item with the first (or --baseline): the mean difference with its
    two-sided 95% interval, items improved and regressed, and the interval's own two-sided p
    (Newcombe's interval with one run, else the t interval), by type and subtype with adjusted p;
    one line says whether it is better and by how much. An empty input, rows that are not
    judged rows, a repeated (id, run) or several models in one input are errors (exit 1).
    Exits 1 too when rows failed or input lines were bad (and with --strict, when the report
    is incomplete). docs/reports.md states the method of every number.

    A folder of bv eval run folders (bv report runs/), three or more run folders (without --html,
    --by, --power, --cluster, --exclude-failed, --fail-under), or run folders one of which has no
    results yet, give a table of runs: one row per run (its model, skill
    hash, items, accuracy with its 95% interval, errors, cost, and whether it is finished,
    running or stopped), each finished run compared per item with the first (or --baseline)
    where both ran the same items file. Name two run folders (NAME=DIR) for the side-by-side report.

    \b
    Examples:
      bv report results.jsonl
      bv report runs/ --baseline chance-seed --sort name
      bv report runs/skill-v1 runs/skill-v2 --baseline skill-v1 --html compare.html
      bv report skill-v1=a.jsonl skill-v2=b.jsonl --format markdown
      bv report logs/a.eval logs/b.eval            # two inspect_ai runs: bv's paired verdict
      bv report base=a.jsonl v2=b.jsonl v3=c.jsonl --baseline base --power
      bv report all-models.jsonl --by model
      bv report results.jsonl --html report.html --fail-under 0.30 --strict
      bv report results.jsonl --format markdown -o report.md
    """
    from bv.core.jsonl import Problems
    from bv.core.terminal import printable
    from bv.reporting.advice import below, notes, warnings
    from bv.reporting.grid import comparison_of, summaries_of
    from bv.reporting.render import render_as
    from bv.reporting.report import CompareOptions, build_report, input_names, notices
    from bv.reporting.runs import runs_asked

    not_for_runs = {
        "--html": html_path,
        "--by": by,
        "--power": power,
        "--cluster": cluster,
        "--exclude-failed": exclude_failed,
        "--fail-under": fail_under,
    }
    given = [
        name
        for name, value in not_for_runs.items()
        if value is not None and value is not False and value != ()
    ]
    table = runs_asked(inputs, side_by_side=bool(given))
    if table is not None:
        if given:
            raise click.UsageError(
                f"{', '.join(given)}: not for a table of runs; give the runs' folders by name (NAME=DIR)"
            )
        _report_runs(table, fmt, output, baseline, sort, adjust)
        return
    stdin_notice(inputs, "judged rows")
    problems = Problems()
    logs = None  # where inspect eval logs are imported for the report, when there are any
    if any(spec.lower().endswith((".eval", ".json")) for spec in inputs):
        import tempfile

        from bv.data.inspect_import import logs_as_results

        logs = Path(tempfile.mkdtemp(prefix="bv-report-"))
        try:
            inputs = logs_as_results(inputs, logs, problems)
        except BaseException:
            _remove(logs)
            raise
    sources = input_names(inputs or ("-",))
    try:
        built, rows = build_report(
            sources,
            problems,
            by=tuple(dict.fromkeys(by)),
            exclude_failed=exclude_failed,
            keep_rows=bool(html_path),
            options=CompareOptions(
                baseline=baseline, adjust=adjust, cluster=cluster, power=power, per_run=fmt == "json"
            ),
        )
        summaries = summaries_of(built)
        page_to_stdout = html_path is not None and str(html_path) == "-"
        if output is not None:
            from bv.core.atomic import atomic_output

            with atomic_output(output, newline="" if fmt == "csv" else None) as stream:
                render_as(fmt, built, stream)
            click.echo(f"bv report: wrote {output}", err=True)
        with reader_may_leave():
            if not page_to_stdout and output is None:  # stdout carries one thing: the page, or the report
                render_as(fmt, built, sys.stdout)
        if html_path is not None:
            from bv.reporting.html_page import write_html

            roots = [image_root or _image_root(row_source.source) for row_source in rows or []]
            refused = 0
            with reader_may_leave():  # the page to stdout ('-'): its reader may leave too
                refused = write_html(
                    html_path,
                    summaries,
                    rows or [],
                    comparison_of(built),
                    None if allow_any_path else roots,
                )  # rows read again from the inputs, not held
            if not page_to_stdout:
                click.echo(f"bv report: wrote {html_path}", err=True)
            if refused:
                where = ", ".join(sorted({str(r) for r in roots}))
                click.echo(
                    printable(
                        f"bv report: {refused} image(s) outside {where} not embedded"
                        " (--image-root DIR or --allow-any-path embeds them)"
                    ),
                    err=True,
                )
    finally:
        for source in sources:
            source.close()
        if logs is not None:
            _remove(logs)
    by_rules = {source.name for source in sources if source.by_rules}
    for line in notes(summaries, by_rules):
        click.echo(printable(f"bv report: note: {cli_words(line)}"), err=True)
    for line in warnings(summaries, by_rules):
        click.echo(printable(f"bv report: warning: {cli_words(line)}"), err=True)
    incomplete = notices(built, tuple(by))
    for line in incomplete:
        click.echo(printable(f"bv report: {'error' if strict else 'warning'}: {cli_words(line)}"), err=True)
    changed = [source.unconfirmed for source in sources if source.unconfirmed]
    for line in changed:  # an edited row is never reported as the run's own result
        click.echo(printable(f"bv report: error: {line}"), err=True)
    finish_rows(problems, skip_bad)
    failing = below(summaries, fail_under) if fail_under is not None else []
    for line in failing:
        click.echo(printable(f"bv report: {cli_words(line)}"), err=True)
    if strict and incomplete:
        click.echo("bv report: --strict: the report is incomplete or mixed (above); exit 1", err=True)
    if (
        failing
        or changed
        or (strict and incomplete)
        or any(s["overall"]["errors"] or s["overall"]["judge_errors"] for s in summaries)
    ):
        sys.exit(ending.ROWS_FAILED)  # a failed run never looks like a result


def _remove(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


def _report_runs(
    folders: list[Path], fmt: str, output: Path | None, baseline: str | None, sort: str, adjust: str
) -> None:
    """One row per run, its verdict against the baseline under the table (bv.reporting.runs)."""
    import shutil

    from bv.reporting.runs import FINISHED, runs_table
    from bv.reporting.runs_render import render_runs

    rows, verdicts = runs_table(folders, baseline, sort, adjust)
    width = shutil.get_terminal_size((80, 24)).columns if output is None else 80
    if output is not None:
        from bv.core.atomic import atomic_output

        with atomic_output(output, newline="" if fmt == "csv" else None) as stream:
            render_runs(rows, verdicts, fmt, stream, width)
        click.echo(f"bv report: wrote {output}", err=True)
    else:
        with reader_may_leave():
            render_runs(rows, verdicts, fmt, sys.stdout, width)
    for row in rows:
        if row.state != FINISHED:
            hint = (
                "its bv eval is writing into it now"
                if row.state == "running"
                else "re-run its bv eval to finish it"
            )
            click.echo(f"bv report: {row.name} ({row.folder}) is {row.state}: {hint}", err=True)
        elif row.problem:
            click.echo(f"bv report: error: {row.name}: {cli_words(row.problem)}", err=True)
    if any(row.problem or (row.state == FINISHED and row.errors) for row in rows):
        sys.exit(ending.ROWS_FAILED)  # a failed run never looks like a result


def _image_root(source: Input) -> Path:
    """Where an input's images are: a run folder's items folder, a file's own folder, or here (stdin)."""
    if source.image_root is not None:
        return source.image_root
    return Path.cwd() if source.path == "-" else Path(source.path).resolve().parent
