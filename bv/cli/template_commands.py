"""`bv templates`: the prompt templates a `--prompts DIR` folder may replace (registered in bv.cli.app)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from bv.cli.common import reader_may_leave
from bv.cli.options import PROMPTS


@click.command()
@click.argument("names", nargs=-1)
@PROMPTS
@click.option(
    "--copy-to",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Write the templates (with --prompts' replacements) into DIR, to edit and pass as --prompts.",
)
def templates(names: tuple[str, ...], templates: Any, copy_to: Path | None) -> None:
    """List the prompt templates: name, SHA-256, where each comes from, placeholders.

    A file NAME.md in the folder given to --prompts replaces bv's NAME.md in every stage
    that renders it (prompt, rollout's refinement turns, the LLM judge).

    \b
    Examples:
      bv templates --copy-to my-prompts/ judge.md && $EDITOR my-prompts/judge.md
      bv templates --prompts my-prompts/
    """
    from bv.core.stats import counted
    from bv.core.templates import TemplateError, copy_templates, describe

    if copy_to is None:
        if names:
            raise click.UsageError("template names go with --copy-to")
        with reader_may_leave():
            for line in describe(templates):
                click.echo(line)
        return
    try:
        written = copy_templates(templates, copy_to, names)
    except TemplateError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(f"bv templates: wrote {counted(written, 'template')} to {copy_to}", err=True)
