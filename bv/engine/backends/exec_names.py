"""What an agent command template names: the agent's program and the model it is given.

A template may start with `env` (its options, `VAR=value` words) to set the agent's environment,
as no shell runs it (docs/backends.md); the agent is the first word after those, and rows name
it, not `env`. The model is bv's `-m`, else the value of the template's own `-m`/`--model`.
"""

from __future__ import annotations

import re
from pathlib import Path

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)
_ENV_WITH_VALUE = frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"})
MODEL_FLAGS = ("-m", "--model")


def program_index(argv: list[str]) -> int:
    """Where the agent's program is in `argv`: past `env`, its options and `VAR=value` words."""
    i = 0
    if argv and Path(argv[0]).name == "env":
        i = 1
        while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
            i += 2 if argv[i] in _ENV_WITH_VALUE else 1
        i += i < len(argv) and argv[i] == "--"
    while i < len(argv) and _ASSIGNMENT.fullmatch(argv[i]):
        i += 1
    return min(i, len(argv) - 1)


def program_name(argv: list[str]) -> str:
    return Path(argv[program_index(argv)]).name


def template_model(argv: list[str]) -> str | None:
    """The model the template itself passes (`-m NAME`, `--model NAME`, `--model=NAME`), if any:
    None for a `{model}` placeholder (that is bv's own `-m`)."""
    words = argv[program_index(argv) + 1 :]
    for i, word in enumerate(words):
        name, sep, value = word.partition("=")
        if sep and name == "--model":
            found = value
        elif word in MODEL_FLAGS and i + 1 < len(words):
            found = words[i + 1]
        else:
            continue
        return None if "{" in found else found
    return None
