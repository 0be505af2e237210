"""`bv --help` lists the commands from bv.cli.app.COMMANDS without importing them: each entry
must name where its command lives and hold its command's own short help, so that the lazy
listing is the one click would print with every command loaded (at any terminal width)."""

from __future__ import annotations

import importlib

import click
import pytest
from click.testing import CliRunner

from bv.cli.app import COMMANDS, LazyGroup, cli


def loaded(name: str) -> click.Command:
    module, _, attr = COMMANDS[name][0].partition(":")
    return getattr(importlib.import_module(module), attr)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_entry_names_its_command_and_holds_its_short_help(name):
    command = loaded(name)
    assert command.name == name
    assert command.get_short_help_str(10**6) == COMMANDS[name][1]


@pytest.mark.parametrize("width", [30, 80, 100, 200])
def test_the_lazy_listing_is_the_eager_one(width):
    """The same group with every command added up front (a plain click listing) prints the
    same help, byte for byte."""
    eager = click.Group(
        name=cli.name,
        callback=cli.callback,
        params=cli.params,
        help=cli.help,
        context_settings=cli.context_settings,
    )
    for name in COMMANDS:
        eager.add_command(loaded(name), name)
    fresh = LazyGroup(
        name=cli.name,
        callback=cli.callback,
        params=cli.params,
        help=cli.help,
        context_settings=cli.context_settings,
        lazy=COMMANDS,
    )
    runner = CliRunner()
    env = {"COLUMNS": str(width)}
    lazy_help = runner.invoke(fresh, ["--help"], prog_name="bv", env=env, terminal_width=width)
    eager_help = runner.invoke(eager, ["--help"], prog_name="bv", env=env, terminal_width=width)
    assert lazy_help.exit_code == eager_help.exit_code == 0
    assert "Commands:" in lazy_help.output and not fresh.commands  # listed, none imported
    assert lazy_help.output == eager_help.output


def test_a_mistyped_command_is_matched_against_every_name():
    result = CliRunner().invoke(cli, ["reprot"], prog_name="bv")
    assert result.exit_code == 2
    assert "Did you mean one of: 'export', 'prompt', 'report'?" in result.output
