"""The commands around the stages: getting the data (`bv data`), exporting results
(`bv export`) and asking an endpoint what it serves (`bv models`); registered in bv.cli.app."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bv.cli.common import error, reader_may_leave
from bv.cli.ending import ROWS_FAILED, finish_rows
from bv.cli.options import API_KEY, BASE_URLS, SKIP_BAD
from bv.core.terminal import stdin_notice


@click.command("data")
@click.option(
    "--from",
    "source",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Convert this parquet file or official babyvision_data.zip instead of fetching.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to write. [default: $XDG_DATA_HOME/bv/babyvision]",
)
@click.option("--revision", help="Dataset revision to fetch: a branch, tag or commit (pins the data).")
@click.option(
    "--repo", default="UnipatAI/BabyVision", show_default=True, help="Hugging Face dataset to fetch."
)
@click.option("--where", is_flag=True, help="Print the folder bv data writes to, and do nothing else.")
@SKIP_BAD
def data(
    source: Path | None, out: Path | None, revision: str | None, repo: str, where: bool, skip_bad: bool
) -> None:
    """Get the BabyVision items: meta_data.jsonl + images/, checked (docs/data.md).

    Fetches the official set from the Hugging Face Hub (needs the [data] extra; the HF cache,
    HF_TOKEN, HF_ENDPOINT and HF_HUB_OFFLINE work as usual), or converts a file you have. Every
    image is decoded, the counts are printed and, for the official set, compared with the
    published ones. The folder is replaced atomically, and only when its content changes;
    its path is printed on stdout.

    \b
    Examples:
      bv data && make eval MODEL=gpt-4o
      bv data --revision 3f1c2a9 --out data/babyvision
      bv data --from babyvision_data.zip --out data/babyvision
      bv prompt "$(bv data --where)/meta_data.jsonl" --sample 22 | bv rollout -m MODEL --dry-run
    """
    from bv.data.sources import fetch, is_official, read_source, source_sha256
    from bv.data.writer import default_dir, differences, write_set

    out = out or default_dir()
    if where:
        click.echo(out)
        return
    if source is None:
        click.echo(f"bv data: fetching {repo} (revision {revision or 'main'}) with huggingface_hub", err=True)
        path, origin = fetch(repo, revision)
    else:
        path, origin = source, f"file:{source.name}"
    provenance = {"source": origin, "source_sha256": source_sha256(path)}  # the file the set was made from
    summary, changed = write_set(read_source(path), out, provenance, skip_bad)
    for line in summary.lines():
        click.echo(f"bv data: {line}", err=True)
    differs = differences(summary) if is_official(source, origin) else []
    if differs:
        error("this is not the published official set; results on it are not comparable with the paper's:")
    for line in differs:
        click.echo(f"bv data:   {line}", err=True)
    if is_official(source, origin) and not differs:
        click.echo("bv data: matches the published figures of the official set", err=True)
    click.echo(f"bv data: {'wrote' if changed else 'already up to date:'} {out}", err=True)
    click.echo(out)
    if differs:
        sys.exit(ROWS_FAILED)


@click.command("export")
@click.argument("inputs", nargs=-1, type=click.Path(allow_dash=True))  # files, or bv eval run folders
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["official", "csv", "eee", "hf-eval-results", "inspect"]),
    required=True,
    help="official: model_results_run_K.json per run, as compute_score.py reads them;"
    " csv: one row per (id, run); eee: Every Eval Ever records (data/babyvision/...);"
    " hf-eval-results: the Hub's .eval_results/*.yaml, one file per protocol variant;"
    " inspect: an inspect_ai eval log (.eval) for inspect view.",
)
@click.option(
    "-o",
    "--out",
    type=click.Path(path_type=Path),
    help="official, eee, hf-eval-results: the folder to write, replaced whole (required);"
    " csv: the file (atomically) [default: stdout]; inspect: the .eval file (required).",
)
@SKIP_BAD
def export(inputs: tuple[str, ...], fmt: str, out: Path | None, skip_bad: bool) -> None:
    """Write judged rows for the official scorer or for spreadsheets (docs/data.md).

    Also writes Every Eval Ever (EEE) records and the Hub's eval results, one score per protocol
    variant (model, style, skill, templates, params, judge version) with bv's interval over
    items, and inspect_ai eval logs (needs pip install 'babyvision-bv[inspect]'): one sample per
    (id, run), epoch run+1, scored C or I, with the accuracy bv report prints (docs/formats.md).
    Every format but CSV writes rows without a verdict (judge errors) as false (an inspect
    sample: I), as bv report counts them wrong, and names them on stderr with exit 1; undecided
    rows (no LLM judge) are written as false too, and named. The CSV keeps them with `hard`
    empty. Reads files, bv eval run folders (their results.jsonl), or stdin.

    \b
    Examples:
      bv export results.jsonl --format official --out official/   # model_results_run_K.json
      bv export results.jsonl --format csv > results.csv
      bv export runs/gpt-4o --format official --out official/
      bv export results.jsonl --format eee --out eee/          # eee/data/babyvision/...
      bv export results.jsonl --format hf-eval-results --out hub/   # hub/.eval_results/*.yaml
      bv export runs/gpt-4o --format inspect --out gpt-4o.eval && inspect view
    """
    import itertools
    from collections import deque

    from bv.core.atomic import atomic_output
    from bv.core.errors import Fatal
    from bv.core.jsonl import Problems, read_records
    from bv.core.records import check_judged_row
    from bv.core.stats import counted
    from bv.reporting.export import SHOWN, Export, exported_rows, write_csv, write_folder

    if fmt == "inspect":
        if out is None:
            raise click.UsageError("--format inspect needs --out FILE.eval")
        from bv.reporting.inspect_log import needs_inspect

        needs_inspect()  # before the input is read
    elif fmt != "csv" and out is None:
        raise click.UsageError(f"--format {fmt} needs --out DIR (its files go there)")
    from bv.core.run_inputs import results_path

    inputs = tuple(results_path(path) for path in inputs)
    stdin_notice(inputs, "judged rows")
    problems, export = Problems(), Export()
    stream_rows = exported_rows(
        read_records(inputs, problems, check_judged_row, fast=True), problems, export, fmt
    )
    first = next(stream_rows, None)
    if first is None:  # as bv report refuses it: a header alone is not an export
        where = "stdin" if not inputs or inputs == ("-",) else ", ".join(inputs)
        problems.finish()
        raise Fatal(f"{where}: no judged rows (empty input, or no line could be read): nothing to export")
    rows = itertools.chain([first], stream_rows)
    if fmt == "csv" and out is None:
        with reader_may_leave():
            write_csv(rows, sys.stdout)
        deque(rows, maxlen=0)  # a reader that left: the rest is still read, for the exit status
    elif fmt == "csv" and out is not None:
        with atomic_output(out, newline="") as stream:
            write_csv(rows, stream)
        click.echo(f"bv export: wrote {out} ({export.rows} rows)", err=True)
    elif fmt == "inspect" and out is not None:
        from bv.reporting.inspect_log import write_inspect

        samples, missing = write_inspect(rows, out)
        click.echo(f"bv export: wrote {out} ({samples} samples)", err=True)
        if missing:
            error(
                f"{counted(len(missing), 'image')} could not be read, named by path in the log: {missing[0]}"
            )
    else:
        assert out is not None
        for path, count in write_folder(fmt, rows, out):
            click.echo(f"bv export: wrote {path} ({count} rows)", err=True)
    if export.unjudged and fmt != "csv":
        shown = ", ".join(f"{i}#{run}" for i, run in export.unjudged)
        more = f" and {export.unjudged_count - SHOWN} more" if export.unjudged_count > SHOWN else ""
        error(
            f"{counted(export.unjudged_count, 'row')} without a verdict (judge errors) written as false:"
            f" {shown}{more};"
            " re-run bv judge on them, then export again"
        )
    if export.undecided and fmt != "csv":
        shown = ", ".join(f"{i}#{run}" for i, run in export.undecided)
        more = f" and {export.undecided_count - SHOWN} more" if export.undecided_count > SHOWN else ""
        click.echo(
            f"bv export: {counted(export.undecided_count, 'undecided row')} (no LLM judge decided them)"
            f" written as false, as bv report counts them: {shown}{more}; judge them with"
            " bv judge --judge-model MODEL, then export again",
            err=True,
        )
    finish_rows(problems, skip_bad)
    if export.unjudged and fmt != "csv":
        sys.exit(ROWS_FAILED)


@click.command("models")
@click.option(
    "--backend",
    type=click.Choice(["openai", "azure"]),
    default="openai",
    show_default=True,
    help="An OpenAI-compatible API, or Azure OpenAI (AZURE_OPENAI_* in the environment).",
)
@BASE_URLS
@API_KEY
@click.option("--timeout", type=click.FloatRange(min=0.1), default=30.0, show_default=True, help="Seconds.")
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object per model: id, owned_by, created, endpoint."
)
def models(
    backend: str, base_url: tuple[str, ...], api_key: str | None, timeout: float, as_json: bool
) -> None:
    """List the models an endpoint serves (its /v1/models), one per line.

    Takes the endpoint options of bv rollout, so a model name can be checked before a run.

    \b
    Examples:
      bv models --base-url http://localhost:8000/v1
      OPENAI_API_KEY=... bv models | grep gpt-4o
    """
    import json

    from bv.cli.request_commands import checked_endpoint
    from bv.core.terminal import printable
    from bv.engine.endpoints import NoEndpoint
    from bv.engine.models import ANY_MODEL, list_models

    try:
        endpoint = checked_endpoint(
            backend, model=ANY_MODEL, base_url=base_url, api_key=api_key, timeout=timeout
        )
    except NoEndpoint:
        error(
            "no endpoint to ask: give --base-url URL (a vLLM or SGLang server, a proxy), or set"
            " OPENAI_BASE_URL, or OPENAI_API_KEY for OpenAI's"
        )
        sys.exit(ROWS_FAILED)
    found = list_models(endpoint)
    with reader_may_leave():
        for model in found:
            click.echo(json.dumps(model) if as_json else printable(model["id"]))
    if not found:
        click.echo("bv models: the endpoint lists no models", err=True)
