"""The one module that reads the environment: every variable bv reads, by what it sets.

bv.engine.endpoints reads the endpoint variables (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_ORG_ID,
OPENAI_PROJECT_ID, AZURE_OPENAI_*, BV_JUDGE_API_KEY, BV_PARAM_RULES) from `variables()`, or from a mapping its
caller passes; the command line's `[env: BV_MODEL]`-style option defaults are click's, shown in
--help. tests/test_api.py checks that no other module of bv reads os.environ.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def variables() -> Mapping[str, str]:
    """The whole environment (for bv.engine.endpoints, and for agents' keys to redact)."""
    return os.environ


def debug() -> bool:
    """BV_DEBUG: let an internal error raise with its traceback instead of a one-line message."""
    return bool(os.environ.get("BV_DEBUG"))


def number(name: str, default: float) -> float:
    """A numeric limit: BV_MAX_WAIT_S, BV_RETRY_BASE_S, BV_PROGRESS_EVERY_S (docs/rollout.md),
    BV_BATCH_POLL_S (docs/batch.md)."""
    return float(os.environ.get(name, default))


def integer(name: str, default: int) -> int:
    """A size limit: BV_MAX_LINE_BYTES, BV_HTML_MAX_ITEMS (docs/safety.md, docs/reports.md),
    BV_BATCH_MAX_REQUESTS, BV_BATCH_MAX_BYTES (docs/batch.md)."""
    return int(os.environ.get(name, default))


def text(name: str) -> str | None:
    """A setting given as text, None when unset or empty: BV_EXEC_KEEP (docs/backends.md)."""
    return os.environ.get(name) or None


def cache_home() -> Path:
    """$XDG_CACHE_HOME, else ~/.cache: where the reply cache lives."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path("~/.cache").expanduser())


def data_home() -> Path:
    """$XDG_DATA_HOME, else ~/.local/share: where `bv data` puts the official set."""
    return Path(os.environ.get("XDG_DATA_HOME") or Path("~/.local/share").expanduser())
