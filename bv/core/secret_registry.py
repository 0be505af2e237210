"""One run's registry of secrets (bv.core.run_context holds it; bv.core.redaction uses it):
below both, so that the run context and the redaction it serves import each other in no circle."""

from __future__ import annotations

import sys
import threading
from urllib.parse import parse_qsl, urlsplit

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
