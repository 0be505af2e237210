"""A setting declared once, on the typed config that holds it: its flag, help, environment
variable, default, type and check, as a dataclass field's metadata (`setting(...)`).

The command line's options are made from these declarations (bv.cli.declared), bv.api's keywords
take their defaults from them (`api_default`), and every config checks its declared bounds and choices the
same way (`check`), so no face writes a default, a range or a flag of its own. No click here:
this is the declaration, not the command line.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any

from bv.core.errors import BadConfig


class _Same:
    """`api_default` not declared: bv.api's default is the config's."""

    def __repr__(self) -> str:
        return "the config's default"


SAME: Any = _Same()


@dataclass(frozen=True)
class Setting:
    """How one setting is given: `flags` on the command line (empty: bv.api only), `kind` (int,
    float, str, Path, bool), the bounds (`low`/`high`) or `choices` its value must keep, and
    `convert`, which turns what either face was given (a CLI text, a keyword's value) into the
    config's value, raising BadConfig."""

    flags: tuple[str, ...] = ()
    help: str = ""
    kind: type = str
    low: float | None = None
    high: float | None = None
    open_bounds: bool = False  # `low` and `high` themselves refused (a rate: 0 < alpha < 1)
    choices: tuple[str, ...] | None = None
    envvar: str | None = None
    show_envvar: bool = False
    show_default: bool = False
    metavar: str | None = None
    multiple: bool = False
    exists: bool = False  # a path that must exist (a file, or with `folder`, a folder)
    folder: bool = False
    convert: Callable[[Any], Any] | None = None
    off: tuple[str, str] | None = None  # (flag, help) of the option that turns it off (--no-cache)
    api_default: Any = SAME  # both faces' default where it is not the config's (a library is quiet)


def setting(
    default: Any = MISSING, *flags: str, factory: Any = MISSING, secret: bool = False, **declared: Any
) -> Any:
    """A dataclass field declaring a setting (see Setting); `factory` for a mutable default, and
    a `secret` kept out of the config's repr."""
    meta = {"setting": Setting(flags=flags, **declared)}
    if factory is not MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta, repr=not secret)
    return dataclasses.field(default=default, metadata=meta, repr=not secret)


def part(record_type: Any) -> Any:
    """A field holding a record of settings declared on `record_type` (RolloutConfig's `request`,
    a RequestParams): both faces give those settings by their own names, beside the config's, and
    `converted` makes the record of them, so it is built once and handed down whole."""
    return dataclasses.field(default_factory=record_type, metadata={"part": record_type})


def _fields(config_type: Any) -> dict[str, dataclasses.Field[Any]]:
    """A config's fields by name, a part's own in the part's place (the names the faces take)."""
    found: dict[str, dataclasses.Field[Any]] = {}
    for f in dataclasses.fields(config_type):
        found |= _fields(f.metadata["part"]) if "part" in f.metadata else {f.name: f}
    return found


def keywords(config_type: Any) -> list[str]:
    """The names a config is given by, in their order: its own fields and its parts' settings."""
    return [name for name, f in _fields(config_type).items() if f.init]


def shared(config_type: Any, name: str) -> Any:
    """A field declared as `config_type`'s `name` (another config taking the same setting)."""
    f = _fields(config_type)[name]
    if f.default_factory is not MISSING:
        return dataclasses.field(default_factory=f.default_factory, metadata=f.metadata, repr=f.repr)
    return dataclasses.field(default=f.default, metadata=f.metadata, repr=f.repr)


def declared(config_type: Any) -> dict[str, Setting]:
    """The declared settings of a config, by name, in their order."""
    fields = _fields(config_type).items()
    return {name: f.metadata["setting"] for name, f in fields if "setting" in f.metadata}


def default_of(config_type: Any, name: str) -> Any:
    """The config's own default of a field (MISSING for one that must be given)."""
    f = _fields(config_type)[name]
    return f.default_factory() if f.default_factory is not MISSING else f.default


def api_default(config_type: Any, name: str) -> Any:
    """bv.api's default of a setting: its declared `api_default`, else the config's."""
    decl = _fields(config_type)[name].metadata.get("setting")
    if decl is not None and decl.api_default is not SAME:
        return decl.api_default
    return default_of(config_type, name)


def check(config: Any) -> None:
    """Each declared setting within its bounds and choices, or BadConfig naming it (a part's
    record checks its own)."""
    for f in dataclasses.fields(config):
        if "setting" not in f.metadata:
            continue
        name, decl, value = f.name, f.metadata["setting"], getattr(config, f.name)
        if value is None or isinstance(value, bool):
            continue
        if decl.choices is not None and value not in decl.choices:
            raise BadConfig(f"unknown `{name}` {value!r}; known: {', '.join(decl.choices)}", option=name)
        if decl.kind in (int, float):
            if not math.isfinite(value):
                raise BadConfig(f"`{name}` must be a finite number, not {value}", option=name)
            low, high, open_ = decl.low, decl.high, decl.open_bounds
            if low is not None and (value < low or (open_ and value == low)):
                least = "above" if open_ else "at least"
                raise BadConfig(f"`{name}` must be {least} {low:g}, not {value}", option=name)
            if high is not None and (value > high or (open_ and value == high)):
                most = "below" if open_ else "at most"
                raise BadConfig(f"`{name}` must be {most} {high:g}, not {value}", option=name)


def converted(config_type: Any, given: Mapping[str, Any]) -> dict[str, Any]:
    """What the faces were given, as the config takes it: each declared setting's `convert`, a
    path given as a str made a Path, and a part's settings made its record. An unknown name is a
    TypeError, as for any call."""
    own = dataclasses.fields(config_type)
    unknown = sorted(set(given) - set(keywords(config_type)) - {f.name for f in own})
    if unknown:
        raise TypeError(f"unexpected keyword(s): {', '.join(unknown)}")
    values = dict(given)
    for f in own:
        if "part" in f.metadata:
            record_type = f.metadata["part"]
            theirs = {name: values.pop(name) for name in keywords(record_type) if name in values}
            if theirs and f.name in values:
                raise TypeError(f"give `{f.name}` or its settings ({', '.join(theirs)}), not both")
            if theirs:
                values[f.name] = record_type(**converted(record_type, theirs))
    decls = {f.name: f.metadata["setting"] for f in own if "setting" in f.metadata}
    given = dict(values)
    for name, value in given.items():
        decl = decls.get(name)
        if decl is None:
            continue
        _check_kind(name, decl, value, default_of(config_type, name))
        if value is None:
            continue
        if decl.convert is not None:
            try:
                values[name] = decl.convert(value)
            except BadConfig as exc:
                raise BadConfig(f"`{name}`: {exc}", option=name) from None
        elif decl.kind is Path:
            values[name] = Path(value)
    return values


def _check_kind(name: str, decl: Setting, value: Any, default: Any) -> None:
    """A number where the setting is a number (None only where that is its default), or
    BadConfig naming it, as the command line refuses a text for a number; never a TypeError
    from deep inside."""
    if decl.kind not in (int, float) or decl.convert is not None:
        return
    if value is None and default is not None:
        raise BadConfig(f"`{name}` must be a number, not None", option=name)
    kinds = (int,) if decl.kind is int else (int, float)
    if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
        what = "a whole number" if decl.kind is int else "a number"
        raise BadConfig(f"`{name}` must be {what}, not {value!r}", option=name)


def share(given: float) -> float:
    """A share in [0, 1] (a `convert`): NaN refused, and a percentage named as one (BadConfig)."""
    if 0 <= given <= 1:  # NaN compares false with everything: refused
        return float(given)
    hint = f" (for {given:g}% write {given / 100:g})" if 1 < given <= 100 else ""
    raise BadConfig(f"{given:g} is not a share between 0 and 1{hint}")


def body_fields(given: Mapping[str, Any] | Iterable[str]) -> dict[str, Any]:
    """Request body fields: a mapping as given, or KEY=VALUE texts (the command line's), VALUE as
    JSON when it parses. `extra_body={...}` (the openai SDK's habit) is unwrapped into its
    fields, as the SDK merges them into the body; `model` and `messages` are bv's to set."""
    import json

    if isinstance(given, Mapping):
        return dict(given)
    fields: dict[str, Any] = {}
    for pair in given:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise BadConfig(f"{pair!r} is not KEY=VALUE")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        if key in ("model", "messages"):
            raise BadConfig(f"{key!r} is set by bv, not by a request field")
        if key != "extra_body":
            fields[key] = value
        elif isinstance(value, dict):
            fields.update(value)
        else:
            raise BadConfig(
                "extra_body must be a JSON object of body fields, e.g. extra_body='{\"top_k\": 20}'"
                " (or give each field as its own KEY=VALUE)"
            )
    return fields
