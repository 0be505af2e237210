"""The options several bv commands share, declared once: flags, types, defaults, help, checks.

Each command module decorates itself with these, so an option reads, defaults and is checked the
same in every command that takes it (bv rollout's and bv eval's --jobs alike). What a command
does with the values once they are parsed is in bv.cli.common.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click

from bv.engine.backends import BACKENDS


class Finite(click.FloatRange):
    """A float option that refuses NaN and infinities (which pass click's range checks)."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def share(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A click callback: a share in [0, 1]; NaN and percentages refused (exit 2 before any work)."""
    if value is None or 0 <= value <= 1:  # NaN compares false with everything: refused
        return value
    hint = f" (for {value:g}% write {value / 100:g})" if 1 < value <= 100 else ""
    raise click.BadParameter(f"{value:g} is not a share between 0 and 1{hint}")


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
    help="Retries per request on 5xx, timeouts and dropped connections (429s: --rate-limit-patience).",
)
TIMEOUT = click.option(
    "--timeout",
    type=Finite(min=0.1),
    default=600.0,
    show_default=True,
    help="Seconds per try of a request, all told.",
)
_WAITS = (
    click.option(
        "--rate-limit-patience",
        type=Finite(min=0),
        default=900.0,
        show_default=True,
        metavar="SECONDS",
        help="How long a request keeps retrying 429s (rate limits), from its first one, waiting as the"
        " server asks (retry-after, x-ratelimit-reset-*); fewer requests are in flight meanwhile.",
    ),
    click.option(
        "--connect-timeout",
        type=Finite(min=0.1),
        default=10.0,
        show_default=True,
        metavar="SECONDS",
        help="Seconds to open a connection to the endpoint.",
    ),
    click.option(
        "--first-byte-timeout",
        type=Finite(min=0.1),
        metavar="SECONDS",
        help="Seconds from sending a request to the first byte of its reply (without streaming, most"
        " of the model's time). [default: --timeout]",
    ),
    click.option(
        "--read-timeout",
        type=Finite(min=0.1),
        metavar="SECONDS",
        help="Seconds from a reply's first byte to its last. [default: --timeout]",
    ),
    click.option(
        "--stall-notice",
        type=Finite(min=0.1),
        default=30.0,
        show_default=True,
        metavar="SECONDS",
        help="When no reply has come for this long, the progress line says so (the endpoint, the"
        " requests in flight).",
    ),
)


def waits(command: Any) -> Any:
    """The options of how long a request stage waits: 429 patience, the timeouts, the stall notice."""
    for option in reversed(_WAITS):
        command = option(command)
    return command


BASE_URLS = click.option(
    "--base-url",
    "base_urls",
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
NO_CACHE = click.option("--no-cache", is_flag=True, help="Neither read nor write the reply cache.")
PRICES = click.option(
    "--prices",
    metavar="FILE|genai-prices",
    envvar="BV_PRICES",
    show_envvar=True,
    help="Price each row (cost_usd): a JSON file of USD per million tokens per model, or genai-prices"
    " (pip install 'babyvision-bv[prices]'); docs/formats.md#prices.",
)
MAX_COST = click.option(
    "--max-cost",
    type=Finite(min=0),
    metavar="USD",
    help="Stop starting requests once this run has spent this much (as a first Ctrl-C; needs --prices)."
    " With --batch it also needs a token limit, and submits only the requests whose worst case fits"
    " (docs/batch.md).",
)
BATCH = click.option(
    "--batch",
    is_flag=True,
    help="Send the requests as batch jobs (OpenAI's or Azure's Batch API: about half the price, done"
    " within 24 h) and wait for them: the same rows and cache as online; run the same command again"
    " to resume a batch still running (docs/batch.md).",
)


class SharedOption:
    """An option several commands take: a decorator, as click.option's; `but(...)` is the same
    option for a command that names it or says it otherwise (bv optimize's target model)."""

    def __init__(self, *decls: str, **attrs: Any) -> None:
        self.decls, self.attrs = decls, attrs

    def __call__(self, command: Any) -> Any:
        return click.option(*self.decls, **self.attrs)(command)

    def but(self, *decls: str, **changes: Any) -> SharedOption:
        """This option with other declarations (`decls`: a parameter name, say) and attributes."""
        return SharedOption(*self.decls, *decls, **{**self.attrs, **changes})


# The options of bv rollout and bv judge, shared with bv eval, which takes them all, and bv optimize.
BACKEND_NAMES = list(BACKENDS)
BACKEND = SharedOption(
    "--backend",
    type=click.Choice(BACKEND_NAMES),
    default="openai",
    show_default=True,
    envvar="BV_BACKEND",
    show_envvar=True,
    help="Where requests go: an OpenAI-compatible API, Azure OpenAI, an external agent CLI (exec),"
    " or the offline chance baseline.",
)
MODEL = SharedOption(
    "-m", "--model", envvar="BV_MODEL", show_envvar=True, help="Model name (Azure: the deployment)."
)
REPEATS = click.option(
    "--repeats",
    type=click.IntRange(1, 1000),
    default=1,
    show_default=True,
    help="Roll out every item K times (run 0..K-1), e.g. 3 for Avg@3.",
)
MAX_TURNS = SharedOption(
    "--max-turns",
    type=click.IntRange(1, 20),
    default=1,
    show_default=True,
    help="Turns per item; a reply without \\boxed{} gets a refinement turn.",
)
MAX_TOKENS = SharedOption(
    "--max-tokens", type=click.IntRange(1), help="Cap on completion tokens per turn. [default: none]"
)
TEMPERATURE = SharedOption(
    "--temperature", type=Finite(min=0), help="Sampling temperature. [default: the server's]"
)
SEED = click.option("--seed", type=int, help="Sampling seed sent to the API (chance: the guess seed).")
PARAMS = SharedOption(
    "-p",
    "--param",
    "extra_params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Extra request body field, VALUE as JSON if it parses (e.g. -p top_k=20);"
    " -p extra_body='{...}' adds each field of the object, as the openai SDK does.",
)
MAX_PIXELS = click.option(
    "--max-pixels", type=click.IntRange(1), help="Downscale larger images to this many pixels."
)
EXEC_CMD = click.option(
    "--exec-cmd",
    metavar="TEMPLATE",
    help="For --backend exec: the agent command, with {workdir} {prompt} {image} {model} {last_message}"
    " {system} {system_toml} (docs/backends.md).",
)
JUDGE_MODE = SharedOption(
    "--mode",
    type=click.Choice(["auto", "rules", "llm"]),
    default="auto",
    show_default=True,
    help="rules: rules only; llm: every item to the LLM judge (official protocol);"
    " auto: rules, then the LLM judge for what rules cannot decide.",
)
JUDGE_MODEL = SharedOption(
    "--judge-model", envvar="BV_JUDGE_MODEL", show_envvar=True, help="LLM judge model."
)
JUDGE_BASE_URL = SharedOption(
    "--judge-base-url", envvar="BV_JUDGE_BASE_URL", show_envvar=True, help="LLM judge endpoint."
)
JUDGE_PARAM = click.option(
    "--judge-param",
    "judge_param_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Extra field of the LLM judge's request body, as -p for rollout (e.g. --judge-param"
    " reasoning_effort=minimal). bv's default temperature 0 is sent only to models that accept it.",
)
JUDGE_API_KEY = SharedOption("--judge-api-key", help="LLM judge API key. [env var: BV_JUDGE_API_KEY]")


# The options of bv prompt, shared with bv eval.
STYLE = click.option(
    "--style",
    type=click.Choice(["bv", "official"]),
    default="bv",
    show_default=True,
    help="bv: system prompt (with the skill), text then image. official: the paper's layout,"
    " no system prompt, image then text (docs/protocol.md).",
)
SKILL = click.option(
    "--skill",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Markdown file put in the system prompt under '## Skill'.",
)
IMAGE_DETAIL = click.option(
    "--image-detail",
    type=click.Choice(["auto", "low", "high"]),
    default="auto",
    show_default=True,
    help="The image part's 'detail' (omitted for auto).",
)
IDS = click.option("--ids", "ids", multiple=True, metavar="A,B,...", help="Only these item ids (repeatable).")
TYPES = click.option("--type", "types", multiple=True, help="Only items of this type (repeatable; any case).")
SUBTYPES = click.option(
    "--subtype", "subtypes", multiple=True, help="Only items of this subtype (repeatable)."
)
LIMIT = click.option(
    "-n", "--limit", type=click.IntRange(0), metavar="N", help="At most N items (after the other filters)."
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
