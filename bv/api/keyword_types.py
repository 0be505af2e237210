"""bv.api's typed keywords (bv/api/keywords.py), written from the declared settings
(bv.core.settings) so that `help()`, IDEs and mypy see each keyword and its type, and kept equal
to them by tests/api/test_keyword_types.py. After changing a setting, write them again:

    python -m bv.api.keyword_types > bv/api/keywords.py
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

# Each TypedDict: its name, the config whose settings it types, the names a function takes
# otherwise (its positional arguments), and the names it must be given.
_DICTS: tuple[tuple[str, str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("RolloutKeywords", "bv.stages.rollout_config", "RolloutConfig", (), ()),
    ("JudgeKeywords", "bv.stages.judge_config", "JudgeConfig", (), ()),
    ("EvalKeywords", "bv.evaluation.config", "EvalConfig", ("items", "out"), ()),
    (
        "OptimizeKeywords",
        "bv.optimize.setup",
        "OptimizeSettings",
        ("items",),
        ("skill", "out", "optimizer_model"),
    ),
)

_HEADER = '''"""bv.api's keywords with their types, one TypedDict per function that takes settings (written by
bv/api/keyword_types.py from the declared settings: do not edit by hand). bv.api imports it for
the type checker only; its annotations are evaluated, so that `Required` shows at run time too."""

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Required, TypedDict

from bv.core.templates import Templates
'''


def keyword_type(field: dataclasses.Field[Any]) -> str:
    """The type of what a keyword is given: what its `convert` takes (when it says), else the
    config's type of it, a path also as a str and several values as any iterable."""
    decl = field.metadata.get("setting")
    convert = decl.convert if decl is not None else None
    given = ""
    if inspect.isfunction(convert):
        parameters = list(inspect.signature(convert).parameters.values())
        annotation = parameters[0].annotation if parameters else inspect.Parameter.empty
        if isinstance(annotation, str) and annotation != "Any":
            given = annotation
    if not given:
        given = str(field.type).replace("tuple[str, ...]", "Iterable[str]")
        given = "str | Path" + given[len("Path") :] if given.startswith("Path") else given
    if field.default is None and "None" not in given.split(" | ") and given != "Any":
        given += " | None"
    return given


def keywords_of(config_type: Any, positional: tuple[str, ...]) -> dict[str, str]:
    """bv.api's keywords of a config, each with its type, in the declared order."""
    from bv.api.stages import api_keywords
    from bv.core.settings import _fields

    fields = _fields(config_type)
    return {name: keyword_type(fields[name]) for name in api_keywords(config_type) if name not in positional}


def source() -> str:
    """bv/api/keywords.py as the declarations make it."""
    import importlib

    parts = [_HEADER]
    for name, module, config, positional, required in _DICTS:
        config_type = getattr(importlib.import_module(module), config)
        lines = [f"\n\nclass {name}(TypedDict, total=False):", f'    """The keywords of {config}."""', ""]
        for keyword, typed in keywords_of(config_type, positional).items():
            lines.append(f"    {keyword}: {f'Required[{typed}]' if keyword in required else typed}")
        parts.append("\n".join(lines) + "\n")
    return "".join(parts)


if __name__ == "__main__":
    print(source(), end="")
