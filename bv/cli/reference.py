"""The command-line reference of the docs site (docs/cli.md), written from the click commands
themselves so that it cannot drift from them: every command, its usage and help, and every
option as `--help` shows it, with its default and environment variable. `python -m
bv.cli.reference` prints it; the site's hook (docs/hooks/cli_reference.py) puts it in the page
at build time."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator

import click

from bv.cli.app import cli

_CODE = re.compile(r"(`[^`]*`)")
# What Markdown would read as markup in a help text: HTML, emphasis, a link's brackets.
_PLAIN = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "*": r"\*", "[": r"\["})


def commands(group: click.Group = cli) -> Iterator[tuple[str, click.Command, click.Context]]:
    """`bv` and every command under it by its full name ("bv cache list"), groups before their
    own, each with the context it runs in (so the help option is named as on the command line)."""
    root = click.Context(group, info_name="bv")
    yield "bv", group, root
    for name in group.list_commands(root):
        command = group.get_command(root, name)
        if command is None or command.hidden:
            continue
        ctx = click.Context(command, info_name=name, parent=root)
        yield f"bv {name}", command, ctx
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                subcommand = command.get_command(ctx, sub)
                if subcommand is not None and not subcommand.hidden:
                    yield f"bv {name} {sub}", subcommand, click.Context(subcommand, info_name=sub, parent=ctx)


def options(command: click.Command, ctx: click.Context) -> list[click.Option]:
    """The options a user can type, as --help lists them, less the help option every command has."""
    help_option = command.get_help_option(ctx)
    params = command.get_params(ctx)
    return [p for p in params if isinstance(p, click.Option) and not p.hidden and p is not help_option]


def _text(words: str) -> str:
    """Help text as Markdown: backquoted spans kept as code, the rest escaped (no markup)."""
    escaped = [part if part.startswith("`") else part.translate(_PLAIN) for part in _CODE.split(words)]
    return "".join(escaped).replace("|", r"\|")


def _help(help_text: str) -> list[str]:
    """A command's help as paragraphs; click's unwrapped blocks (after \\b) as code blocks."""
    lines: list[str] = []
    for paragraph in inspect.cleandoc(help_text).split("\n\n"):
        if paragraph.startswith("\b"):
            lines += ["```text", inspect.cleandoc(paragraph.removeprefix("\b")), "```", ""]
        else:
            lines += [_text(" ".join(paragraph.split())), ""]
    return lines


def _option_row(option: click.Option, ctx: click.Context) -> str:
    """One table row, from the option's line in --help: as typed, what it does, and the
    bracketed notes click adds (default, env var, range)."""
    record = option.get_help_record(ctx)
    typed, text = record if record else ("/".join(option.opts), "")
    what, notes = text, ""
    if text.endswith("]") and "  [" in text:  # click's own notes, two spaces after the help
        what, _, notes = text.rpartition("  [")
        notes = notes.removesuffix("]")
    return f"| `{typed}` | {_text(' '.join(what.split()))} | {_text(notes)} |"


def markdown() -> str:
    """The whole reference: a section per command, in `bv --help`'s order."""
    lines: list[str] = []
    for name, command, ctx in commands():
        heading = "###" if name.count(" ") > 1 else "##"
        usage = " ".join(command.collect_usage_pieces(ctx))
        lines += [f"{heading} {name}", "", "```text", f"{name} {usage}", "```", ""]
        lines += _help(command.help or "")
        rows = [_option_row(option, ctx) for option in options(command, ctx)]
        if rows:
            lines += ["| option | what it does | default, env var |", "|---|---|---|", *rows, ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
