"""Which class a backend name means: bv's own from `BUILT_IN`, any other from the installed
packages' `bv.backends` entry points, read only when a name is not bv's own (reading every
installed package's metadata costs time that `bv --help` and bv's own backends do not pay).

Both are found alike: a `module:Class` reference, imported when chosen, and held to the interface
(`BackendBase`'s name and settings). A plugin that fails to import is a BadConfig naming it and
what it raised, never a traceback."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from bv.core.errors import BadConfig

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

GROUP = "bv.backends"

# bv's own backends, written as an entry point is: name = module:Class.
BUILT_IN = {
    "openai": "bv.engine.backends.openai_compat:OpenAIBackend",
    "azure": "bv.engine.backends.openai_compat:AzureBackend",
    "exec": "bv.engine.backends.exec_agent:ExecBackend",
    "chance": "bv.engine.backends.chance:ChanceBackend",
}


def plugins() -> dict[str, EntryPoint]:
    """The installed packages' backends by name (bv's own names win: a plugin cannot replace one)."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=GROUP) if ep.name not in BUILT_IN}


def backend_names() -> list[str]:
    """Every backend `--backend` takes here: bv's own, then the installed plugins'."""
    return [*BUILT_IN, *sorted(plugins())]


def backend_class(name: str) -> Any:
    """The class of the backend called `name`, imported now; BadConfig for a name nothing
    provides, or a plugin that cannot be imported or is not a backend."""
    if name in BUILT_IN:
        module, _, attribute = BUILT_IN[name].partition(":")
        return _checked(name, getattr(importlib.import_module(module), attribute), "bv")
    found = plugins()
    if name not in found:
        known = ", ".join([*BUILT_IN, *sorted(found)])
        raise BadConfig(
            f"unknown backend {name!r}; known: {known} (a plugin package provides others: docs/backends.md)",
            option="backend",
        )
    entry = found[name]
    where = f"{entry.value}, from {entry.dist.name} {entry.dist.version}" if entry.dist else entry.value
    try:
        cls = entry.load()
    except Exception as error:  # whatever a third party's import raises: it is named, not traced
        raise BadConfig(
            f"the backend plugin {name!r} ({where}) failed to import: {type(error).__name__}: {error}",
            option="backend",
        ) from None
    return _checked(name, cls, where)


def _checked(name: str, cls: Any, where: str) -> Any:
    """The class, if it is a backend called `name`."""
    lacking = [a for a in ("name", "settings", "config_from", "complete") if not hasattr(cls, a)]
    if not isinstance(cls, type) or lacking:
        what = f"lacks {', '.join(lacking)}" if lacking else "is not a class"
        raise BadConfig(
            f"the backend plugin {name!r} ({where}) {what}: subclass bv.engine.backends.BackendBase",
            option="backend",
        )
    called = getattr(cls, "name", None)
    if called != name:
        raise BadConfig(
            f"the backend plugin {name!r} ({where}) calls itself {called!r}: its entry point"
            " and its class's `name` must agree",
            option="backend",
        )
    return cls
