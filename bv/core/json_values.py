"""What JSON values bv accepts from outside: numbers a record can hold (within ±2^63, finite) and
text that can be written anywhere (lone surrogates replaced). bv.core.jsonl parses every line
with these; bv import reads official result files with them too."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from bv.core.errors import BadRecord


def unparsable(exc: RecursionError | ValueError) -> str:
    """Why json.loads gave up on valid-looking JSON: nesting past the recursion limit, or an
    integer longer than Python converts (4300 digits)."""
    if isinstance(exc, RecursionError):
        return "invalid JSON: nested too deep"
    return f"invalid JSON: a number with more than {sys.get_int_max_str_digits()} digits"


def checked_value(value: Any, raw: bytes) -> tuple[Any, str | None]:
    """A parsed JSON value made safe for bv, and a warning if it had to change: lone surrogates
    (replaced). `raw` is the JSON text, scanned first so that only values that may hold one are
    walked. (Numbers no record holds are refused while parsing, by `parse_json`.)"""
    try:
        if _ESCAPED_SURROGATE.search(raw) and _has_lone_surrogate(value):
            return without_lone_surrogates(value), "lone surrogate (\\ud800-\\udfff) replaced by U+FFFD"
    except RecursionError:
        raise BadRecord("invalid JSON: nested too deep") from None
    return value, None


# Numbers bv records hold (ids, runs, token counts, seconds) are far below 2^63; a line with a
# longer one (or NaN, Infinity, 1e999) is refused while it is parsed rather than crash a sum or
# a float() later. The parser's own hooks see each number once, so the common line costs
# nothing more than json.loads (a regular expression over every line cost 5x the parse).
TOO_LARGE = "a number too large for bv (beyond ±2^63, or NaN or Infinity)"


def _checked_int(text: str) -> int:
    if len(text) > 20:  # more digits than any value within ±2^63
        if len(text.lstrip("-")) > sys.get_int_max_str_digits():
            raise BadRecord(f"invalid JSON: a number with more than {sys.get_int_max_str_digits()} digits")
        raise BadRecord(TOO_LARGE)
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise BadRecord(TOO_LARGE)
    return value


def _checked_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadRecord(TOO_LARGE)
    return value


def _refuse_constant(text: str) -> Any:
    raise BadRecord(TOO_LARGE)


_DECODER = json.JSONDecoder(
    parse_int=_checked_int, parse_float=_checked_float, parse_constant=_refuse_constant
)


def parse_json(text: str) -> Any:
    """`json.loads`, refusing numbers no bv record holds with BadRecord (a ValueError: catch it
    first). Nesting past the recursion limit still raises RecursionError."""
    return _DECODER.decode(text)


def read_json_file(path: Path, max_bytes: int) -> Any:
    """A run folder's JSON file (config.json, test.json), read bounded: OSError when it cannot be
    read, BadRecord (saying why, not naming the file) when it is over `max_bytes`, not UTF-8, not
    JSON or nested past the recursion limit. These files are a few kB; one a user or a tool edited
    is data, never a crash."""
    with open(path, "rb") as stream:
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise BadRecord(f"over {max_bytes} bytes")
    try:
        return parse_json(data.decode("utf-8"))
    except BadRecord:
        raise
    except UnicodeDecodeError as exc:
        raise BadRecord(f"invalid UTF-8 at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise BadRecord(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except (RecursionError, ValueError) as exc:
        raise BadRecord(unparsable(exc)) from None


# A JSON string escape of a UTF-16 surrogate: paired ones decode to one character, lone ones to
# a str that cannot be encoded (to a file, a terminal, SQLite or HTTP). Only lines with such an
# escape are searched, so the cost is one byte scan per line.
_ESCAPED_SURROGATE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def _has_lone_surrogate(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def without_lone_surrogates(value: Any) -> Any:
    """A copy of a JSON value with each lone surrogate replaced by U+FFFD (pairs were joined when
    the JSON was parsed), so that every text bv holds can be written anywhere."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [without_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    return value
