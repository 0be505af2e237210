"""What the bv commands share once their options are parsed: library messages worded as options,
error lines, stdout that may close.

The option declarations themselves are in bv.cli.options; how a stage ends (exit statuses,
signals, the closing summary) lives in bv.core.outcome.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import click

from bv.core.errors import StdoutClosed


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
            flags[param.name] = flag
    return re.sub(r"`(\w+)`", lambda m: flags.get(m[1], m[0]), message)


def error(message: str) -> None:
    """`bv CMD: error: …` on stderr, a key redacted, settings named as options (outcome.say)."""
    from bv.core.outcome import say
    from bv.core.redaction import redact

    say(f"error: {redact(message)}")


def default_cache() -> Path:
    from bv.engine.cache import default_path

    return default_path()
