"""The options several bv commands share that are no stage's setting (the files they read, the
skill and the prompts folder) or that light commands take without loading a stage (bv models' --base-url,
bv cache's --cache): flags, types, help, checks. A stage's settings are declared on its typed
config and made options by bv.cli.declared. What a command does with the values once they are
parsed is in bv.cli.common.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click


class Finite(click.FloatRange):
    """A float option that refuses NaN and infinities (which pass click's range checks)."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def share(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A click callback: a share in [0, 1] (bv.core.settings.share), else exit 2 before any work."""
    from bv.core.errors import BadConfig
    from bv.core.settings import share as checked

    try:
        return None if value is None else checked(value)
    except BadConfig as exc:
        raise click.BadParameter(str(exc)) from None


SKIP_BAD = click.option("--skip-bad", is_flag=True, help="Exit 0 even when some input lines were bad.")
INPUTS = click.argument("inputs", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
BASE_URLS = click.option(
    "--base-url",
    "base_url",
    multiple=True,
    help="OpenAI-compatible endpoint; repeat for replicas of one model. [env var: OPENAI_BASE_URL]",
)
API_KEY = click.option(
    "--api-key", help="API key. [env var: OPENAI_API_KEY, or AZURE_OPENAI_API_KEY for azure]"
)
CACHE = click.option(
    "--cache",
    "cache_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Reply cache (SQLite). [default: $XDG_CACHE_HOME/bv/cache.sqlite]",
)
SKILL = click.option(
    "--skill",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Markdown file put in the system prompt under '## Skill'.",
)
PROMPTS_HELP = "Folder of prompt templates: DIR/NAME.md replaces bv's NAME.md (`bv templates` lists them)."


def _load_templates(ctx: click.Context, param: click.Parameter, folder: Path | None) -> Any:
    """bv's templates with DIR's replacements; a folder bv cannot use is a usage error (exit 2)."""
    from bv.core.templates import TemplateError, Templates

    try:
        templates = Templates.load(folder)
    except TemplateError as exc:
        raise click.BadParameter(str(exc)) from None
    for warning in templates.warnings_for(ctx.info_name or ""):
        click.echo(f"bv: warning: {warning}", err=True)
    return templates


PROMPTS = click.option(
    "--prompts",
    "templates",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    callback=_load_templates,
    metavar="DIR",
    help=PROMPTS_HELP,
)


class Renamed(click.Command):
    """A command some of whose flags were renamed (one meaning per flag across bv's commands):
    an old spelling still works for one release, said on stderr, and is not in --help. Both
    spellings on one line are refused (exit 2): one would silently win over the other.
    `renamed`: {old flag: new flag}."""

    def __init__(self, *args: Any, renamed: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.renamed = renamed

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        end = args.index("--") if "--" in args else len(args)
        flags = {word.partition("=")[0] for word in args[:end]}
        for old, new in self.renamed.items():
            if old in flags and new in flags:
                raise click.UsageError(
                    f"{old} and {new} are one option ({old} is its old name): give one", ctx
                )
        words = []
        for index, word in enumerate(args):
            if word == "--":
                words += args[index:]
                break
            old, sep, value = word.partition("=")
            if old in self.renamed:
                new = self.renamed[old]
                click.echo(
                    f"bv {ctx.info_name}: notice: {old} is now {new}; {old} goes in the next release",
                    err=True,
                )
                word = f"{new}{sep}{value}"
            words.append(word)
        return super().parse_args(ctx, words)
