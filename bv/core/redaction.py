"""Keeping keys out of everything bv writes.

Backends register the secrets they were given; every message bv prints or records about a
failure, and every reply, passes through `redact`. The secrets belong to the run that was given
them (bv.core.run_context): two runs in one process, or on two threads, redact only their own.
URLs lose any user:password part and their query string (which may carry a key) before they
are shown or hashed into cache keys. A request parameter whose name says it is a secret
(`-p api_key=…`, token, secret, password, authorization) is recorded as `***` (`public_params`)
and its value redacted like a key wherever it is echoed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from bv.core.run_context import current


def register(secret: str | None) -> None:
    """Register a secret with the current run (bv.core.run_context; its registry: bv.core.secret_registry)."""
    current().secrets.register(secret)


def register_url(url: str) -> None:
    current().secrets.register_url(url)


def redact(text: str) -> str:
    """The text with the current run's secrets, and any long piece of one, replaced by `***`."""
    return current().secrets.redact(text)


def public_url(url: str) -> str:
    """A URL fit to print: without user:password and without its query string."""
    parts = urlsplit(url)
    if not (parts.netloc or parts.query or parts.fragment):
        return url  # sqlite:////abs/mlflow.db: nothing to hide, and rebuilt it would lose two slashes
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts._replace(query="", fragment=""))


SECRET_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "authorization",
        "auth",
        "credential",
        "credentials",
    }
)
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
HIDDEN = "***"


def secret_name(name: str) -> bool:
    """Whether a parameter's name says its value is a secret: one of its words (split at `_`,
    `-`, `.` and case changes) is key, token, secret, password, authorization… (`api_key`,
    `X-Api-Key`, `accessToken`; not `max_tokens`, `top_k`)."""
    return any(word.lower() in SECRET_WORDS for word in _WORD.findall(name))


def public_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Request parameters fit to record (rows, config.json, run.json, reports): the value of every
    secret-named field, at any depth, replaced by `***` and registered with the run as a secret."""

    def walk(value: Any, secret: bool) -> Any:
        if secret:
            if isinstance(value, str):
                register(value)
            return HIDDEN
        if isinstance(value, Mapping):
            return {k: walk(v, isinstance(k, str) and secret_name(k)) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [walk(v, False) for v in value]
        return value

    return {str(k): walk(v, secret_name(str(k))) for k, v in params.items()}
