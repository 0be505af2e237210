"""Holding a request body bv built to the `openai` SDK's own request type (through pydantic): key for
key and value for value, as OpenAI would take it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

openai_types = pytest.importorskip("openai.types.chat.completion_create_params")


pydantic = pytest.importorskip("pydantic")


REQUEST = pydantic.TypeAdapter(openai_types.CompletionCreateParamsNonStreaming)


def materialise(value: Any) -> Any:
    """The validated body with every lazily validated iterable iterated (which validates it)."""
    if isinstance(value, dict):
        return {key: materialise(item) for key, item in value.items()}
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    if isinstance(value, Iterable):
        return [materialise(item) for item in value]
    return value


def difference(sent: Any, kept: Any, path: str = "body") -> str | None:
    """Where the sent body and the validated one differ, or None."""
    if isinstance(sent, dict) and isinstance(kept, dict):
        for key in sent.keys() | kept.keys():
            if key not in kept:
                return f"{path}.{key}: not a field of the SDK's type"
            if key not in sent:
                return f"{path}.{key}: added by validation"
            found = difference(sent[key], kept[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(sent, list) and isinstance(kept, list) and len(sent) == len(kept):
        return next(
            (
                d
                for i, (a, b) in enumerate(zip(sent, kept, strict=True))
                if (d := difference(a, b, f"{path}[{i}]"))
            ),
            None,
        )
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (sent, kept))
    if numbers and sent == kept:  # JSON has one kind of number: 0 is 0.0
        return None
    if sent != kept or type(sent) is not type(kept):
        return f"{path}: sent {sent!r}, the SDK's type makes it {kept!r}"
    return None


def check_request(body: dict[str, Any], extra: Iterable[str] = ()) -> None:
    """Raise ValueError unless `body` is a chat completion request the SDK's types accept, key for
    key and value for value. `extra`: top-level fields the SDK would send through `extra_body`
    (vLLM's top_k, …), which its types do not declare."""
    declared = {key: value for key, value in body.items() if key not in set(extra)}
    try:
        kept = materialise(REQUEST.validate_python(declared))
    except pydantic.ValidationError as exc:
        raise ValueError(str(exc)) from None
    found = difference(declared, kept)
    if found:
        raise ValueError(found)
