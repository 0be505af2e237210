"""Click options made from the settings the typed configs declare (bv.core.settings), and the
configs made from what the options parsed: a command names the settings it takes, in the order
its help lists them, and writes no flag, default, range or help of its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING
from pathlib import Path
from typing import Any

import click

from bv.cli.common import cli_words
from bv.cli.options import Finite
from bv.core.settings import Setting, converted, declared, default_of


def _type(decl: Setting) -> Any:
    """The click type of a declared setting, its bounds checked as the config checks them."""
    if decl.choices is not None:
        return click.Choice(list(decl.choices))
    if decl.kind is Path:
        return click.Path(file_okay=not decl.folder, dir_okay=decl.folder, exists=decl.exists, path_type=Path)
    if decl.kind is int:
        bounded = decl.low is not None or decl.high is not None
        return click.IntRange(decl.low, decl.high) if bounded else int  # type: ignore[arg-type]
    if decl.kind is float:
        if decl.low is None and decl.high is None:
            return float
        return Finite(min=decl.low, max=decl.high, min_open=decl.open_bounds, max_open=decl.open_bounds)
    return None


def option(config_type: Any, name: str, **changes: Any) -> Callable[[Any], Any]:
    """The option of `config_type`'s setting `name` (and the one turning it off, if declared);
    `changes`: what this command says otherwise (bv optimize's "Target model.")."""
    decl = declared(config_type)[name]
    attrs: dict[str, Any] = {"help": decl.help}
    if decl.kind is bool:
        attrs["is_flag"] = True
    elif (kind := _type(decl)) is not None:
        attrs["type"] = kind
    default = default_of(config_type, name)
    if default is not MISSING and default is not None and not decl.multiple and decl.off is None:
        attrs["default"] = default
    for key in ("show_default", "envvar", "show_envvar", "metavar", "multiple"):
        if getattr(decl, key):
            attrs[key] = getattr(decl, key)
    attrs |= changes
    made = click.option(*decl.flags, name, **attrs)
    if decl.off is None:
        return made
    off = click.option(decl.off[0], _off_name(decl), is_flag=True, help=decl.off[1])
    return lambda command: made(off(command))


def options(config_type: Any, *names: str, **changes: Mapping[str, Any]) -> Callable[[Any], Any]:
    """The options of these settings, in this order (`changes` by setting name)."""

    def decorate(command: Any) -> Any:
        for name in reversed(names):
            command = option(config_type, name, **changes.get(name, {}))(command)
        return command

    return decorate


def _off_name(decl: Setting) -> str:
    assert decl.off is not None
    return decl.off[0].lstrip("-").replace("-", "_")


def config_of(config_type: Any, parsed: Mapping[str, Any], **fixed: Any) -> Any:
    """The config of a command's parsed settings (and `fixed`, what the command sets itself), or
    the command's error (`checked`)."""
    given = dict(parsed)
    for name, decl in declared(config_type).items():
        if decl.off is not None and name in given:  # --no-cache: none; not given: the default one
            off = given.pop(_off_name(decl), False)
            given[name] = None if off else given[name] or decl.api_default
    return checked(lambda **settings: config_type(**converted(config_type, settings)), {**given, **fixed})


def checked(make: Any, settings: Mapping[str, Any]) -> Any:
    """What `make` makes of the settings, or the command's error: a setting that cannot work is a
    usage error (exit 2), an endpoint that cannot is an error (exit 1), each worded with the options."""
    from bv.core.errors import BadConfig, Fatal

    try:
        return make(**settings)
    except BadConfig as exc:
        raise click.UsageError(cli_words(str(exc))) from None
    except Fatal as exc:
        raise type(exc)(cli_words(str(exc))) from None  # NoEndpoint stays itself
