"""Keeping keys out of everything bv writes.

Backends register the secrets they were given; every message bv prints or records about a
failure, and every reply, passes through `redact`. The secrets belong to the run that was given
them (bv.core.run_context): two runs in one process, or on two threads, redact only their own.
URLs lose any user:password part and their query string (which may carry a key) before they
are shown or hashed into cache keys.
"""

from __future__ import annotations

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
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts._replace(query="", fragment=""))
