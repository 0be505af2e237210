"""The command-line reference of the docs site (bv.cli.reference, shown as docs/cli.md): every
command and every option a user can type has its entry, walked from the click app independently
of the generator, so a command or option added without one fails here."""

from __future__ import annotations

import re

import click
from support.paths import ROOT

from bv.cli.app import COMMANDS, cli
from bv.cli.reference import markdown


def every_command(group: click.Group, prefix: str, ctx: click.Context):
    """(full name, command, context) of every visible command under `group`, at any depth."""
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        if command.hidden:
            continue
        sub_ctx = click.Context(command, info_name=name, parent=ctx)
        yield f"{prefix} {name}", command, sub_ctx
        if isinstance(command, click.Group):
            yield from every_command(command, f"{prefix} {name}", sub_ctx)


def sections(text: str) -> dict[str, str]:
    """The reference's sections by heading ("bv cache list": its usage, help and options)."""
    parts = re.split(r"^#{2,3} (bv(?: [\w-]+)*)\n", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_command_and_option_has_its_entry():
    pages = sections(markdown())
    root = click.Context(cli, info_name="bv")
    walked = [("bv", cli, root), *every_command(cli, "bv", root)]
    assert {name for name, _, _ in walked} == set(pages)
    assert {f"bv {name}" for name in COMMANDS} <= set(pages)
    for name, command, ctx in walked:
        page = pages[name]
        assert f"```text\n{name} " in page, f"{name}: no usage line"
        first = (command.help or "").strip().splitlines()[0]
        assert " ".join(first.split()).replace("<", "&lt;") in page, f"{name}: its help is missing"
        for param in command.get_params(ctx):
            if not isinstance(param, click.Option) or param.hidden or param is command.get_help_option(ctx):
                continue
            for flag in [*param.opts, *param.secondary_opts]:
                assert re.search(rf"`[^`]*{re.escape(flag)}\b", page), f"{name}: no entry for {flag}"


def test_an_option_row_says_its_default_and_environment_variable():
    rollout = sections(markdown())["bv rollout"]
    backend = next(line for line in rollout.splitlines() if line.startswith("| `--backend"))
    assert "env var: BV_BACKEND" in backend and "default: openai" in backend
    jobs = next(line for line in rollout.splitlines() if line.startswith("| `-j, --jobs"))
    assert "default: 8" in jobs


def test_help_text_is_shown_as_written_never_as_markup():
    """`<model>`, `*` and `[...]` in a help text are text on the page, not HTML, emphasis or links."""
    text = markdown()
    assert "runs/&lt;model&gt;" in text and "<model>" not in text.replace("`", "")
    assert "reset-\\*" in text


def test_the_page_holds_the_marker_the_site_hook_replaces():
    hook = (ROOT / "docs" / "hooks" / "cli_reference.py").read_text()
    marker = re.search(r'^MARKER = "(.*)"$', hook, re.M).group(1)
    assert (ROOT / "docs" / "cli.md").read_text().count(marker) == 1
