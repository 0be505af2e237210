"""Keeping keys out of everything bv writes.

Backends register the secrets they were given; every message bv prints or records about a
failure, and every reply, passes through `redact`. URLs lose any user:password part and
their query string (which may carry a key) before they are shown or hashed into cache keys.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit, urlunsplit

_SECRETS: set[str] = set()
_WINDOW = 12  # pieces this long of a key of 16+ characters are redacted too (servers echo keys half-masked)


def register(secret: str | None) -> None:
    if secret and len(secret) >= 4:
        _SECRETS.add(secret)


def register_url(url: str) -> None:
    """A URL's password (http://user:password@host) and query values (?key=...) are secrets like keys."""
    parts = urlsplit(url)
    register(parts.password)
    for _, value in parse_qsl(parts.query):
        if len(value) >= 8:
            register(value)


def redact(text: str) -> str:
    """The text with every registered secret, and any long piece of one, replaced by `***`."""
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, "***")
        if len(secret) >= 16:
            for start in range(len(secret) - _WINDOW + 1):
                piece = secret[start : start + _WINDOW]
                if piece in text:
                    text = text.replace(piece, "***")
    return text


def public_url(url: str) -> str:
    """A URL fit to print: without user:password and without its query string."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts._replace(query="", fragment=""))
