"""What the bv commands share once their options are parsed: option values turned into request
parameters and settings, library messages worded as options, error lines, stdout that may close.

The option declarations themselves are in bv.cli.options; how a stage ends (exit statuses,
signals, the closing summary) lives in bv.core.outcome.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from bv.core.errors import StdoutClosed


def request_params(
    max_tokens: int | None,
    temperature: float | None,
    seed: int | None,
    max_pixels: int | None,
    extra_params: tuple[str, ...],
) -> dict[str, Any]:
    """The request parameters rollout records per row and keys its cache by, from its options."""
    params: dict[str, Any] = {
        k: v
        for k, v in (
            ("max_tokens", max_tokens),
            ("temperature", temperature),
            ("seed", seed),
            ("max_pixels", max_pixels),
        )
        if v is not None
    }
    extra = parse_params(extra_params)
    if extra:
        params["extra_body"] = extra
    return params


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


# Options whose setting has another name (bv optimize's --split FILE is the loop's `split`).
SETTING_NAMES = {"split_file": "split"}


def error(message: str) -> None:
    """`bv CMD: error: …` on stderr, a key redacted, settings named as options (outcome.say)."""
    from bv.core.outcome import say
    from bv.core.redaction import redact

    say(f"error: {redact(message)}")


def default_cache() -> Path:
    from bv.engine.cache import default_path

    return default_path()


def parse_shard(spec: str | None) -> tuple[int, int] | None:
    """--shard: K/N, or auto (auto/N) from the scheduler's variables (bv.core.environment.shard_spec)."""
    if spec is None:
        return None
    from bv.core.environment import shard_spec
    from bv.core.errors import BadConfig

    try:
        return shard_spec(spec)
    except BadConfig as exc:
        raise click.BadParameter(cli_words(str(exc)), param_hint="--shard") from None


def parse_params(pairs: tuple[str, ...], option: str = "-p/--param") -> dict[str, Any]:
    """KEY=VALUE pairs as request body fields (bv.core.settings.body_fields), a bad one a usage error."""
    from bv.core.errors import BadConfig
    from bv.core.settings import body_fields

    try:
        return body_fields(pairs)
    except BadConfig as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None
