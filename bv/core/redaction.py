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
    if secret and len(secret) >= 4 and secret not in _SECRETS:
        _SECRETS.add(secret)
        _PLANS.clear()


def register_url(url: str) -> None:
    """A URL's password (http://user:password@host) and query values (?key=...) are secrets like keys."""
    parts = urlsplit(url)
    register(parts.password)
    for _, value in parse_qsl(parts.query):
        if len(value) >= 8:
            register(value)


def redact(text: str) -> str:
    """The text with every registered secret, and any long piece of one, replaced by `***`."""
    for secret, anchors, pieces in _plans():
        if not any(anchor in text for anchor in anchors):
            continue  # the common case: no piece of this secret can be in the text
        text = text.replace(secret, "***")
        for piece in pieces:
            if piece in text:
                text = text.replace(piece, "***")
    return text


_ANCHOR = _WINDOW // 2
_PLANS: list[tuple[str, list[str], list[str]]] = []  # made from _SECRETS when first needed


def _plans() -> list[tuple[str, list[str], list[str]]]:
    """For each secret, longest first: the secret, its anchors and its pieces. Every piece of
    _WINDOW characters holds one of the anchors (the secret cut into _WINDOW/2-character parts),
    so a text with no anchor needs no more scans: a few instead of one per piece, on every reply."""
    if not _PLANS and _SECRETS:
        for secret in sorted(_SECRETS, key=len, reverse=True):
            if len(secret) < 16:
                _PLANS.append((secret, [secret], []))
                continue
            anchors = [secret[k : k + _ANCHOR] for k in range(0, len(secret) - _ANCHOR + 1, _ANCHOR)]
            pieces = [secret[k : k + _WINDOW] for k in range(len(secret) - _WINDOW + 1)]
            _PLANS.append((secret, anchors, pieces))
    return _PLANS


def public_url(url: str) -> str:
    """A URL fit to print: without user:password and without its query string."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts._replace(query="", fragment=""))
