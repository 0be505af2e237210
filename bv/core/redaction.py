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
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

_WINDOW = 12  # pieces this long of a key of 16+ characters are redacted too (servers echo keys half-masked)
_ANCHOR = _WINDOW // 2


class Secrets:
    """One run's registry of secrets, and the plans that make redacting cheap."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()
        # Made from the secrets when first needed: the length under which a text can hold no
        # secret nor a piece of one, and each secret's plan (see `_prepare`).
        self._ready: tuple[int, list[tuple[str, list[str], list[str]]]] | None = None
        self._lock = threading.Lock()  # a run's reader thread and its event loop both register

    def register(self, secret: str | None) -> None:
        if secret and len(secret) >= 4 and secret not in self._secrets:
            with self._lock:
                self._secrets.add(secret)
                self._ready = None

    def register_url(self, url: str) -> None:
        """A URL's password (http://user:password@host) and query values (?key=...) are secrets like keys."""
        parts = urlsplit(url)
        self.register(parts.password)
        for _, value in parse_qsl(parts.query):
            if len(value) >= 8:
                self.register(value)

    def redact(self, text: str) -> str:
        """The text with every registered secret, and any long piece of one, replaced by `***`."""
        shortest, plans = self._ready or self._prepare()
        if len(text) < shortest:
            return text  # a finish_reason, a model name, a short answer: nothing can be in it
        for secret, anchors, pieces in plans:
            for anchor in anchors:
                if anchor in text:
                    break
            else:
                continue  # the common case: no piece of this secret can be in the text
            text = text.replace(secret, "***")
            for piece in pieces:
                if piece in text:
                    text = text.replace(piece, "***")
        return text

    def _prepare(self) -> tuple[int, list[tuple[str, list[str], list[str]]]]:
        """For each secret, longest first: the secret, its anchors and its pieces. Every piece of
        _WINDOW characters holds one of the anchors (the secret cut into _WINDOW/2-character parts),
        so a text with no anchor needs no more scans: a few instead of one per piece, on every reply.
        With them, the shortest thing redacted (a piece, or a short secret itself): a shorter text
        is returned as it is, as most of a reply's fields are."""
        with self._lock:
            plans: list[tuple[str, list[str], list[str]]] = []
            for secret in sorted(self._secrets, key=len, reverse=True):
                if len(secret) < 16:
                    plans.append((secret, [secret], []))
                    continue
                anchors = [secret[k : k + _ANCHOR] for k in range(0, len(secret) - _ANCHOR + 1, _ANCHOR)]
                pieces = [secret[k : k + _WINDOW] for k in range(len(secret) - _WINDOW + 1)]
                plans.append((secret, anchors, pieces))
            shortest = min(
                (len(pieces[0]) if pieces else len(secret) for secret, _, pieces in plans), default=0
            )
            ready = (shortest, plans) if plans else (sys.maxsize, plans)
            self._ready = ready
            return ready


_current: list[Callable[[], Any]] = []  # bv.core.run_context.current, once imported


def _secrets() -> Secrets:
    """The secrets of the run in progress in this context (bv.core.run_context, which imports
    this module, so it is looked up on first use: an import on every call cost a reply 2 us)."""
    if not _current:
        from bv.core.run_context import current

        _current.append(current)
    return _current[0]().secrets


def register(secret: str | None) -> None:
    """Register a secret with the current run (bv.core.run_context)."""
    _secrets().register(secret)


def register_url(url: str) -> None:
    _secrets().register_url(url)


def redact(text: str) -> str:
    """The text with the current run's secrets, and any long piece of one, replaced by `***`."""
    return _secrets().redact(text)


def public_url(url: str) -> str:
    """A URL fit to print: without user:password and without its query string."""
    parts = urlsplit(url)
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
