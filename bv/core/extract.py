"""The one answer extractor: the final answer a reply commits to.

Reasoning in `<think>` blocks is dropped first (a box inside it was not the answer), then
the last `\\boxed{...}` (or `\\fbox{...}`) is taken with a real brace-matching scan, so
nested braces at any depth and several boxes in one reply are handled; the last box wins,
since models retract earlier ones. Failing that, the last `<|begin_of_box|>...<|end_of_box|>`.

Replies are hostile (a model stuck in a loop writes `\\boxed{` 20,000 times), so every step
is one linear pass, and boxes are looked for only in the last ANSWER_TAIL_CHARS characters of
what is left after the reasoning: the answer is at the end, and the work stays bounded.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# Boxes are looked for in this many characters at the end of the reply (after <think> blocks).
ANSWER_TAIL_CHARS = 64 * 1024
# Replies longer than this are examined in a worker thread, off the event loop.
EXTRACT_IN_LOOP_CHARS = 256 * 1024

_THINK_TAG = re.compile(r"<(/?)think>", re.IGNORECASE)
_BOX_START = re.compile(r"\\(?:boxed|fbox)\s*\{")
# A flat box (no brace or backslash inside), matched where the text's last backslash is: the
# common reply's answer, found without a second search or a slice (docs/performance.md)
_FLAT_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{([^{}\\]*)\}")
_GLM_TAG = re.compile(r"<\|(begin|end)_of_box\|>")
_WRAPPER = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname)\s*\{")
_BRACE = re.compile(r"\\[{}]|[{}]")  # an escaped brace is content, not structure


def strip_thinking(text: str) -> str:
    """Drop `<think>...</think>`; a lone `</think>` drops all before it, a lone `<think>` all after."""
    return split_thinking(text)[0]


def split_thinking(text: str) -> tuple[str, str]:
    """(the text without its reasoning, the reasoning): `<think>...</think>` blocks go to the
    reasoning; a lone `</think>` sends all before it there (DeepSeek-R1 opens without `<think>`),
    a lone `<think>` all after it (a reply cut off while thinking).

    One pass over the tags: a block opens at a `<think>` and closes at the first `</think>`
    after it (as a non-greedy regex would pair them, without its quadratic retries).
    """
    if "<" not in text:  # no tag at all (most replies): nothing to split, and no scan
        return text, ""
    kept: list[str] = []
    thoughts: list[str] = []
    size = 0  # characters kept so far
    start = 0  # where the text not yet kept begins
    open_at: int | None = None
    opened_end = 0  # where the open block's text begins
    after_stray: int | None = None  # in the kept text: just after the last unpaired </think>
    stray_tag = 0  # the length of that tag
    unclosed: int | None = None  # in the kept text: where an unclosed <think> was
    for tag in _THINK_TAG.finditer(text):
        if tag.group(1):  # </think>
            if open_at is not None:
                kept.append(text[start:open_at] + " ")
                thoughts.append(text[opened_end : tag.start()])
                size += open_at - start + 1
                start, open_at = tag.end(), None
            else:
                after_stray, stray_tag = size + tag.end() - start, tag.end() - tag.start()
        elif open_at is None:
            open_at, opened_end = tag.start(), tag.end()
    if open_at is not None:
        unclosed = size + open_at - start
        thoughts.append(text[opened_end:])
    kept.append(text[start:])
    out = "".join(kept)
    if after_stray is not None:
        thoughts.insert(0, out[: after_stray - stray_tag])
        return out[after_stray:], "\n\n".join(t.strip() for t in thoughts if t.strip())
    if unclosed is not None:
        out = out[:unclosed]
    return out, "\n\n".join(t.strip() for t in thoughts if t.strip())


def _closing_braces(text: str) -> dict[int, int]:
    """For each `{` that closes, the index of its `}`: one stack pass, escaped braces skipped."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for match in _BRACE.finditer(text):
        if len(match.group()) == 2:
            continue
        if match.group() == "{":
            stack.append(match.start())
        elif stack:
            pairs[stack.pop()] = match.start()
    return pairs


def _closing_brace(text: str, opening: int) -> int | None:
    """Where the `{` at `opening` closes, or None: a scan from it alone (a brace pairs with the
    first `}` after it that brings the depth back, whatever comes before it), escapes skipped."""
    close = text.find("}", opening + 1)
    if close > 0:
        inside = text[opening + 1 : close]
        if "{" not in inside and "\\" not in inside:  # a flat box: `\\boxed{B}`
            return close
    depth = 0
    for match in _BRACE.finditer(text, opening):
        brace = match.group()
        if brace == "{":
            depth += 1
        elif brace == "}":
            depth -= 1
            if not depth:
                return match.start()
    return None


def last_boxed(text: str) -> str | None:
    """Content of the last complete `\\boxed{...}` / `\\fbox{...}` in text, or None.

    The last box is found from the end and tried first, scanning only the text after it (the
    answer is at the end, so that is a few characters); only when it does not close are all
    boxes found and all braces paired in one pass, so a reply of 20,000 unclosed boxes still
    costs a few linear passes. A flat last box that starts at the last backslash is taken at once:
    no box can start after it, and it closes at its first `}`, as the scan below would find."""
    at = text.rfind("\\")
    if at < 0:  # every box starts with a backslash
        return None
    flat = _FLAT_BOX.match(text, at)
    if flat is not None:
        return flat.group(1)
    boxed = text.rfind("\\boxed")
    last = _BOX_START.match(text, max(boxed, text.rfind("\\fbox", boxed + 1), 0))
    if last is not None:  # the last box (matches cannot overlap: each starts with the only backslash)
        close = _closing_brace(text, last.end() - 1)
        if close is not None:
            return text[last.end() : close]
    starts = [match.end() for match in _BOX_START.finditer(text)]
    pairs = _closing_braces(text) if starts else {}
    for start in reversed(starts):
        close = pairs.get(start - 1)
        if close is not None:
            return text[start:close]
    return None


def _unwrap(text: str) -> str:
    """`\\text{B}` -> `B`, at any depth, for each wrapper command: its head and its closing
    brace go (an unclosed one loses its head), in one pass."""
    if "\\" not in text:  # every wrapper starts with a backslash
        return text
    pairs = _closing_braces(text)
    cuts: list[tuple[int, int]] = []
    for match in _WRAPPER.finditer(text):
        cuts.append((match.start(), match.end()))
        close = pairs.get(match.end() - 1)
        if close is not None:
            cuts.append((close, close + 1))
    if not cuts:
        return text
    cuts.sort()
    out, at = [], 0
    for begin, end in cuts:
        out.append(text[at:begin])
        at = end
    out.append(text[at:])
    return "".join(out)


def clean(answer: str) -> str:
    """Strip LaTeX text wrappers, `$` and outer spaces from a boxed answer."""
    return _unwrap(answer).replace("$", "").strip()


def _last_glm_box(text: str) -> str | None:
    """Content of the last `<|begin_of_box|>...<|end_of_box|>` (pairs as a non-greedy regex would)."""
    found, open_at = None, None
    for tag in _GLM_TAG.finditer(text):
        if tag.group(1) == "begin":
            if open_at is None:
                open_at = tag.end()
        elif open_at is not None:
            found, open_at = text[open_at : tag.start()], None
    return found


def extract_answer(reply: str | None) -> str | None:
    """The reply's final answer, cleaned; None when it commits to none (`\\boxed{}` gives "")."""
    if not reply:
        return None
    text = strip_thinking(reply)[-ANSWER_TAIL_CHARS:]
    boxed = last_boxed(text)
    if boxed is None:
        boxed = _last_glm_box(text)
        if boxed is None:
            return None
    return clean(boxed)


def has_answer(reply: str | None) -> bool:
    """Whether the reply commits to a final answer (what refinement turns and progress count)."""
    return extract_answer(reply) is not None


async def off_loop(read: Callable[[Any], T], reply: str | None) -> T:
    """`read(reply)`, in a worker thread when the reply is long enough to stall the event loop
    (where rollout and judge run); on the loop otherwise, where a thread would cost more."""
    if reply is None or len(reply) <= EXTRACT_IN_LOOP_CHARS:
        return read(reply)
    import asyncio

    return await asyncio.to_thread(read, reply)


async def extract_answer_async(reply: str | None) -> str | None:
    """`extract_answer`, off the event loop for a long reply (see `off_loop`)."""
    return await off_loop(extract_answer, reply)


async def has_answer_async(reply: str | None) -> bool:
    """`has_answer`, off the event loop when the reply is long (rollout calls it per turn)."""
    return await extract_answer_async(reply) is not None
