"""`redaction.redact` scans a reply for a few anchors of each key, not for every piece of it: no
piece of a key long enough to be redacted may get through that shortcut."""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from bv.core import redaction

KEY_CHARS = string.ascii_letters + string.digits + "-_"


@settings(max_examples=200, deadline=None)
@given(
    key=st.text(KEY_CHARS, min_size=16, max_size=80),
    data=st.data(),
    before=st.text(max_size=40),
    after=st.text(max_size=40),
)
def test_every_long_piece_of_a_key_is_redacted(key, data, before, after):
    redaction.register(key)
    start = data.draw(st.integers(0, len(key) - 12))
    end = data.draw(st.integers(start + 12, len(key)))
    shown = redaction.redact(before + key[start:end] + after)
    assert all(key[k : k + 12] not in shown for k in range(len(key) - 11))


def test_short_secrets_are_redacted_whole_and_text_without_them_is_unchanged():
    redaction.register("pw-4821")
    assert redaction.redact("login pw-4821 ok") == "login *** ok"
    text = "Let me look at the picture carefully. " * 50 + "\\boxed{A}"
    assert redaction.redact(text) == text


def test_a_text_as_short_as_a_piece_is_still_redacted_and_a_later_shorter_secret_counts():
    key = "sk-" + "abcdefghijklmnopqrstuvwxyz0123"
    redaction.register(key)
    assert redaction.redact(key[5:17]) == "***"  # exactly one piece long
    assert redaction.redact("stop") == "stop"
    redaction.register("pin7")  # shorter than any piece: texts of 4 characters are scanned from now on
    assert redaction.redact("pin7") == "***"
