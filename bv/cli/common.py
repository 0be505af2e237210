"""What the bv commands share: option decorators, option checks, error messages.

How a stage ends (exit statuses, signals, the closing summary) lives in bv.core.outcome.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from bv.core.errors import StdoutClosed


class Finite(click.FloatRange):
    """A float option that refuses NaN and infinities (which pass click's range checks)."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


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
    type=Finite(min=0.1),
    default=600.0,
    show_default=True,
    help="Seconds per try of a request.",
)
BASE_URLS = click.option(
    "--base-url",
    "base_urls",
    multiple=True,
    help="OpenAI-compatible endpoint; repeat for replicas of one model. [env: OPENAI_BASE_URL]",
)
API_KEY = click.option("--api-key", help="API key. [env: OPENAI_API_KEY, or AZURE_OPENAI_API_KEY for azure]")
CACHE = click.option(
    "--cache",
    "cache_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Reply cache (SQLite). [default: $XDG_CACHE_HOME/bv/cache.sqlite]",
)
NO_CACHE = click.option("--no-cache", is_flag=True, help="Neither read nor write the reply cache.")


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
    help="Folder of prompt templates: DIR/NAME.md replaces bv's NAME.md (`bv templates` lists them).",
)


@contextlib.contextmanager
def reader_may_leave() -> Iterator[None]:
    """Writing a command's output to stdout after its whole input was read (report, merge, export,
    listings): a reader that leaves (`| head`) drops the rest of the output quietly, and the
    command goes on to its messages and its exit status, the same as had the reader stayed (1 when
    rows failed), where click would turn the broken pipe into exit 1 and a bare StdoutClosed into 0."""
    try:
        yield
        sys.stdout.flush()
    except (BrokenPipeError, StdoutClosed):
        from bv.core.jsonl import silence_stdout

        silence_stdout()


def cli_words(message: str, command: click.Command | None = None) -> str:
    """A library message in the command line's words: each setting it names in backquotes
    (`base_url`) becomes the option that sets it (--base-url), for `command` (by default the
    running one). Settings the command has no option for keep their name."""
    import re

    if command is None:
        ctx = click.get_current_context(silent=True)
        command = ctx.command if ctx is not None else None
    flags: dict[str, str] = {}
    for param in command.params if command is not None else []:
        if isinstance(param, click.Option) and param.name:
            flag = "/".join(param.opts)
            flags[param.name] = flags[SETTING_NAMES.get(param.name, param.name)] = flag
    return re.sub(r"`(\w+)`", lambda m: flags.get(m[1], m[0]), message)


# Options whose setting in a stage's config has another name (bv.stages.*_config).
SETTING_NAMES = {
    "base_urls": "base_url",
    "extra_params": "extra_body",
    "cache_path": "cache",
    "judge_param_pairs": "judge_params",
}


def error(message: str) -> None:
    from bv.core.outcome import say
    from bv.core.redaction import redact

    say(f"error: {redact(message)}")


def share(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A click callback: a share in [0, 1]; NaN and percentages refused (exit 2 before any work)."""
    if value is None or 0 <= value <= 1:  # NaN compares false with everything: refused
        return value
    hint = f" (for {value:g}% write {value / 100:g})" if 1 < value <= 100 else ""
    raise click.BadParameter(f"{value:g} is not a share between 0 and 1{hint}")


def default_cache() -> Path:
    from bv.engine.cache import default_path

    return default_path()


def parse_shard(spec: str | None) -> tuple[int, int] | None:
    if spec is None:
        return None
    k, sep, n = spec.partition("/")
    if not (sep and k.isdigit() and n.isdigit() and 0 <= int(k) < int(n)):
        raise click.BadParameter(f"{spec!r} is not K/N with 0 <= K < N", param_hint="--shard")
    return int(k), int(n)


def parse_params(pairs: tuple[str, ...], option: str = "-p/--param") -> dict[str, Any]:
    """KEY=VALUE pairs as request body fields, VALUE as JSON when it parses. `extra_body={...}`
    (the openai SDK's habit) is unwrapped into its fields, as the SDK merges them into the body;
    `model` and `messages` are bv's to set."""
    import json

    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint=option)
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        if key in ("model", "messages"):
            raise click.BadParameter(f"{key!r} is set by bv, not by {option}", param_hint=option)
        if key != "extra_body":
            params[key] = value
        elif isinstance(value, dict):
            params.update(value)
        else:
            raise click.BadParameter(
                f"extra_body must be a JSON object of body fields, e.g. extra_body='{{\"top_k\": 20}}'"
                f" (or give each field as its own {option} KEY=VALUE)",
                param_hint=option,
            )
    return params
