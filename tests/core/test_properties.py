"""Property tests: adversarial strings for the extractor, the rules and the JSONL reader.

Hypothesis builds texts from the tokens that made the old code quadratic (`\\boxed{`, braces,
`<think>`, brackets, GLM box tokens), repeated thousands of times. Each case must finish well
inside a time bound (work linear in the text), and on short texts the one-pass code must agree
with the plain definitions below (what a non-greedy regex and a brace-matching scan give).
"""

from __future__ import annotations

import io
import json
import re
import time
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bv.core.extract import extract_answer, last_boxed, strip_thinking
from bv.core.json_values import without_lone_surrogates
from bv.core.jsonl import Problems, _parse_stream, fitting_line
from bv.core.rules import decide, normalise

SETTINGS = settings(
    max_examples=60,
    deadline=timedelta(seconds=2),  # a case that is not linear takes minutes, not seconds
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
TOKENS = [
    "\\boxed{", "\\fbox{", "\\text{", "{", "}", "\\{", "\\}", "<think>", "</think>", "<THINK>",
    "<|begin_of_box|>", "<|end_of_box|>", "(", ")", "[", "]", "<", ">", "A", "1", ",", " ", "$",
    "option", ":", ".",
]  # fmt: skip


def texts(repeat: int = 3000) -> st.SearchStrategy[str]:
    """A few tokens, each repeated up to `repeat` times: the shape of a model stuck in a loop."""
    run = st.tuples(st.sampled_from(TOKENS), st.integers(1, repeat)).map(lambda t: t[0] * t[1])
    return st.lists(run, min_size=1, max_size=8).map("".join)


def short_texts() -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(TOKENS), max_size=30).map("".join)


def within(seconds: float, func, *args):
    """`func(*args)` within `seconds` of this thread's CPU: a quadratic blow-up still burns it, but
    waiting for a core on a loaded machine does not count (wall time failed under load)."""
    started = time.thread_time()
    result = func(*args)
    assert time.thread_time() - started < seconds, f"{func.__name__} took too long on {len(args[0])} chars"
    return result


# The plain definitions, quadratic but obviously right, that the one-pass code must agree with.
def reference_strip_thinking(text: str) -> str:
    text = re.sub(r"<think>.*?</think>", " ", text, flags=re.DOTALL | re.IGNORECASE)
    lower = text.lower()
    if "</think>" in lower:
        return text[lower.rindex("</think>") + len("</think>") :]
    if "<think>" in lower:
        return text[: lower.index("<think>")]
    return text


def reference_last_boxed(text: str) -> str | None:
    found = None
    for match in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        depth, i = 0, match.end() - 1
        while i < len(text):
            if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in "{}":
                i += 2
                continue
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                found = text[match.end() : i]
                break
            i += 1
    return found


@SETTINGS
@given(texts())
def test_extraction_is_fast_on_adversarial_replies(reply):
    within(0.5, extract_answer, reply)


@SETTINGS
@given(short_texts())
def test_one_pass_extraction_agrees_with_the_definitions(reply):
    assert strip_thinking(reply) == reference_strip_thinking(reply)
    assert last_boxed(reply) == reference_last_boxed(reply)


@SETTINGS
@given(texts(), texts(300))
def test_rules_are_fast_on_adversarial_answers(answer, gold):
    within(0.5, normalise, answer)
    blank = {"ans_type": "blank", "answer": [gold], "choices": [], "error": None}
    choice = {"ans_type": "choice", "answer": ["A"], "choices": [{"label": "A", "text": gold}], "error": None}
    for record in (blank, choice):
        verdict = within(0.5, decide, record, answer)
        assert verdict.hard in (0, 1, None)


@SETTINGS
@given(st.integers(0, 20000), st.sampled_from("([{<"))
def test_nested_brackets_normalise_right(depth, opening):
    """Every layer of enclosing brackets goes, at any depth. (How fast, beside a bare one-pass
    loop over the same text, is measured by bench/rows_bench.py: a wall-clock bound here failed
    on a loaded machine.)"""
    closing = {"(": ")", "[": "]", "{": "}", "<": ">"}[opening]
    assert normalise(opening * depth + "4,7" + closing * depth) == "4,7"


def parse(data: bytes, problems: Problems) -> list:
    """What every stage's reader yields for these bytes."""
    return [value for _, value in _parse_stream(io.BytesIO(data), "<test>", None, problems)]


def read_both(data: bytes) -> tuple[list, list, str, str]:
    """What the plain and the fast (orjson-first) readers yield for these bytes, and their messages."""
    plain, fast = Problems(stream=io.StringIO()), Problems(stream=io.StringIO())
    slow = [value for _, value in _parse_stream(io.BytesIO(data), "<test>", None, plain)]
    quick = [value for _, value in _parse_stream(io.BytesIO(data), "<test>", None, fast, fast=True)]
    return slow, quick, plain.stream.getvalue(), fast.stream.getvalue()


NUMBERS = (
    st.integers(-(2**70), 2**70).map(str)
    | st.floats(allow_nan=False, allow_infinity=False).map(repr)
    | st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-0", "1E5", "9223372036854775807",
                       "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
                       "18446744073709551616", "0.1234567890123456789"])
)  # fmt: skip
JSON_VALUES = st.recursive(
    st.none().map(json.dumps) | st.booleans().map(json.dumps) | NUMBERS | texts(40).map(json.dumps),
    lambda inner: (
        st.lists(inner, max_size=4).map(lambda v: "[" + ",".join(v) + "]")
        | st.dictionaries(st.text(max_size=5).map(json.dumps), inner, max_size=4).map(
            lambda d: "{" + ",".join(f"{k}:{v}" for k, v in d.items()) + "}"
        )
    ),
    max_leaves=12,
)


@SETTINGS
@given(
    st.lists(JSON_VALUES.map(lambda v: '{"v":' + v + "}") | st.binary(max_size=60).map(bytes.hex), max_size=6)
)
def test_the_fast_reader_reads_what_the_plain_one_does(lines):
    """Numbers beyond ±2^63 (which orjson reads as floats or 64-bit ints), NaN, 1e999, digits in
    texts: the orjson-first reader gives the same values and the same messages, line for line."""
    slow, quick, plain, fast = read_both(
        "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass")
    )
    assert quick == slow and fast == plain


def is_blank(line: bytes, first: bool) -> bool:
    if first and line.startswith(b"\xef\xbb\xbf"):
        line = line[3:]
    try:
        return not line.decode("utf-8").strip()
    except UnicodeDecodeError:
        return False


@SETTINGS
@given(st.lists(st.binary(max_size=200) | texts(2000).map(str.encode), max_size=6))
def test_the_reader_never_raises_and_accounts_for_every_line(lines):
    """Any bytes: each line is a value, a problem, or blank; never an exception, never slow."""
    lines = [line.replace(b"\n", b" ") for line in lines]
    problems = Problems(stream=io.StringIO())
    values = within(1.0, parse, b"".join(line + b"\n" for line in lines), problems)
    blank = sum(is_blank(line, i == 0) for i, line in enumerate(lines))
    assert len(values) + problems.count + blank == len(lines)
    assert all(line.startswith("bv: <test>:") for line in problems.stream.getvalue().splitlines())
    for value in values:  # what the reader gives, bv can write, and read back the same
        assert parse(fitting_line({"v": value}).encode() + b"\n", problems) == [{"v": value}]


@SETTINGS
@given(st.text(max_size=300), st.integers(1, 30))
def test_written_rows_are_always_read_back(text, copies):
    """A row of any text, however big against the line limit, is written as a line the reader
    takes, keeping the end of each text (where the answer is)."""
    response = text * copies
    row = {"id": "x", "run": 0, "response": response, "turns": [{"content": response}]}
    line = fitting_line(row, limit=2048)
    assert len(line.encode()) <= 2048
    problems = Problems(stream=io.StringIO())
    [read] = parse(line.encode() + b"\n", problems)
    assert problems.count == 0
    kept = read["response"]
    if kept.startswith("[bv: "):
        kept = kept.split("]", 1)[1]
    assert without_lone_surrogates(response).endswith(kept)
