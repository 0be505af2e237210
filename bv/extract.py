"""The one answer extractor: the final answer a reply commits to.

Reasoning in `<think>` blocks is dropped first (a box inside it was not the answer), then
the last `\\boxed{...}` (or `\\fbox{...}`) is taken with a real brace-matching scan, so
nested braces at any depth and several boxes in one reply are handled; the last box wins,
since models retract earlier ones. Failing that, the last `<|begin_of_box|>...<|end_of_box|>`.
"""

from __future__ import annotations

import re

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_BOX_START = re.compile(r"\\(?:boxed|fbox)\s*\{")
_GLM_BOX = re.compile(r"<\|begin_of_box\|>(.*?)<\|end_of_box\|>", re.DOTALL)
_WRAPPER = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname)\s*\{")


def strip_thinking(text: str) -> str:
    """Drop `<think>...</think>`; a lone `</think>` drops all before it, a lone `<think>` all after."""
    text = _THINK_BLOCK.sub(" ", text)
    lower = text.lower()
    if "</think>" in lower:
        text = text[lower.rindex("</think>") + len("</think>") :]
    elif "<think>" in lower:
        text = text[: lower.index("<think>")]
    return text


def _balanced(text: str, open_at: int) -> int | None:
    """Index of the brace closing the one at `open_at`, or None if it never closes."""
    depth = 0
    i = open_at
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text) and text[i + 1] in "{}":
            i += 2  # an escaped brace is content, not structure
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def last_boxed(text: str) -> str | None:
    """Content of the last complete `\\boxed{...}` / `\\fbox{...}` in text, or None."""
    found = None
    for match in _BOX_START.finditer(text):
        close = _balanced(text, match.end() - 1)
        if close is not None:
            found = text[match.end() : close]
    return found


def _unwrap(text: str) -> str:
    """`\\text{B}` -> `B`, at any depth, for each wrapper command."""
    while True:
        match = _WRAPPER.search(text)
        if not match:
            return text
        close = _balanced(text, match.end() - 1)
        if close is None:
            return text[: match.start()] + text[match.end() :]
        text = text[: match.start()] + text[match.end() : close] + text[close + 1 :]


def clean(answer: str) -> str:
    """Strip LaTeX text wrappers, `$` and outer spaces from a boxed answer."""
    return _unwrap(answer).replace("$", "").strip()


def extract_answer(reply: str | None) -> str | None:
    """The reply's final answer, cleaned; None when it commits to none (`\\boxed{}` gives "")."""
    if not reply:
        return None
    text = strip_thinking(reply)
    boxed = last_boxed(text)
    if boxed is None:
        glm = _GLM_BOX.findall(text)
        if not glm:
            return None
        boxed = glm[-1]
    return clean(boxed)


def has_answer(reply: str | None) -> bool:
    """Whether the reply commits to a final answer (what refinement turns and progress count)."""
    return extract_answer(reply) is not None
