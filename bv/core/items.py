"""Items: the two forms bv reads, normalised into `records.Item`.

The official BabyVision `meta_data.jsonl` (`taskId`, `ansType`, `options`, `choiceAns`,
`blankAns`, `image`, `coT`) and bv's own form (`id`, `ans_type`, `choices`, `answer`, `image` or
`images`, `cot`); docs/formats.md shows both.
"""

from __future__ import annotations

import math
from typing import Any, cast

from bv.core.errors import BadRecord
from bv.core.records import ANS_TYPES, LABELS, Item, check_schema

BENCHMARK_REPO = "UnipatAI/BabyVision"  # the official set on the Hugging Face Hub (bv data fetches it)


def id_text(value: Any, key: str = "taskId") -> str:
    """An item id as bv keeps it, a string: a string as it is, an integer in its digits, a float
    only when it is a whole number (`1.0` is id `1`, so `--ids 1` finds it); BadRecord for the
    rest (NaN, 1.5, a list, null, empty). Two ids that differ as text stay apart (`0445`, `445`)."""
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value is None or value == "":
        raise BadRecord(f"missing or empty {key!r}")
    raise BadRecord(f"{key!r} must be a string or a whole number, not {value!r}")


def answer_text(value: Any) -> str | None:
    """A gold answer as text: numbers in their plain spelling (`4.0` is `4`); None for what
    is no answer (null, blank, NaN or infinity, which a data frame writes for a missing cell)."""
    if value is None or isinstance(value, bool):
        return None if value is None else str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
    text = str(value)
    return text if text.strip() else None


def _text(obj: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise BadRecord(f"missing or empty {key!r}")
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise BadRecord(f"{key!r} must be a string, not {type(value).__name__}")
    return value


def _answers(value: Any, key: str) -> list[str]:
    """Accepted blank answers as a non-empty list of strings."""
    values = value if isinstance(value, list) else [value]
    answers = [text for v in values if (text := answer_text(v)) is not None]
    if not answers:
        raise BadRecord(f"no gold answer ({key!r} is empty)")
    return answers


def _images(obj: dict[str, Any]) -> list[str]:
    images = obj.get("images", obj.get("image"))
    if isinstance(images, str):
        images = [images]
    if not isinstance(images, list) or not images or not all(isinstance(p, str) and p for p in images):
        raise BadRecord("missing 'image' (a path) or 'images' (a list of paths)")
    return images


def _official_choice(obj: dict[str, Any]) -> tuple[list[dict[str, str]], list[str]]:
    """Choices and gold of an official item: `options` labelled A, B, C…, `choiceAns` an index."""
    options = obj.get("options")
    if not isinstance(options, list) or not options:
        raise BadRecord("choice item without 'options'")
    if len(options) > len(LABELS):
        raise BadRecord(f"{len(options)} options; at most {len(LABELS)} can be labelled")
    index = obj.get("choiceAns")
    if isinstance(index, bool) or not isinstance(index, int):
        raise BadRecord(f"no gold answer ('choiceAns' must be an option index, not {index!r})")
    if not 0 <= index < len(options):
        raise BadRecord(f"'choiceAns' {index} is out of range for {len(options)} options")
    return [{"label": LABELS[i], "text": str(t)} for i, t in enumerate(options)], [LABELS[index]]


def _bv_choice(obj: dict[str, Any]) -> tuple[list[dict[str, str]], list[str]]:
    """Choices and gold of a bv item: `choices` as {label, text} (or plain texts), `answer` a label."""
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices:
        raise BadRecord("choice item without 'choices'")
    if len(choices) > len(LABELS):
        raise BadRecord(f"{len(choices)} choices; at most {len(LABELS)} can be labelled")
    parsed = []
    for i, choice in enumerate(choices):
        if isinstance(choice, str):
            choice = {"label": LABELS[i], "text": choice}
        if not isinstance(choice, dict) or not isinstance(choice.get("label"), str):
            raise BadRecord(f"choice {i + 1} must be {{'label': 'A', 'text': '...'}}")
        parsed.append({"label": choice["label"].strip(), "text": str(choice.get("text", ""))})
    labels = [c["label"] for c in parsed]
    if any(not label or " " in label for label in labels) or len(set(labels)) < len(labels):
        raise BadRecord(f"choice labels must be distinct words: {labels!r}")
    gold = obj.get("answer")
    gold = gold[0] if isinstance(gold, list) and len(gold) == 1 else gold
    if not isinstance(gold, str) or not gold.strip():
        raise BadRecord("no gold answer ('answer' must be the correct choice label)")
    if gold.strip() not in labels:
        raise BadRecord(f"gold answer {gold!r} is not one of the labels {', '.join(labels)}")
    return parsed, [gold.strip()]


# Field names of the two item forms: the official meta_data.jsonl, and bv's own.
_OFFICIAL: dict[str, Any] = {
    "id": "taskId",
    "ans_type": "ansType",
    "blank": "blankAns",
    "cot": "coT",
    "choice": _official_choice,
}
_BV: dict[str, Any] = {
    "id": "id",
    "ans_type": "ans_type",
    "blank": "answer",
    "cot": "cot",
    "choice": _bv_choice,
}


def parse_item(obj: Any) -> Item:
    """Normalise one item, official or bv form, into bv's item fields; raise BadRecord if unusable.

    Normalised, `answer` is always a list of accepted strings (for choice items, one label),
    and `images` always a list of paths as written in the items file.
    """
    if not isinstance(obj, dict):
        raise BadRecord(f"expected a JSON object, got {type(obj).__name__}")
    check_schema(obj)
    form = _OFFICIAL if "taskId" in obj or "ansType" in obj else _BV
    ans_type = obj.get(form["ans_type"])
    if ans_type not in ANS_TYPES:
        raise BadRecord(f"unknown answer type {ans_type!r} ({form['ans_type']} must be 'choice' or 'blank')")
    item: dict[str, Any] = {
        "id": id_text(obj.get(form["id"]), form["id"]),
        "question": _text(obj, "question"),
        "ans_type": ans_type,
    }
    if ans_type == "choice":
        item["choices"], item["answer"] = form["choice"](obj)
    else:
        item["choices"], item["answer"] = [], _answers(obj.get(form["blank"]), form["blank"])
    item["type"] = _text(obj, "type", required=False) or "unknown"
    item["subtype"] = _text(obj, "subtype", required=False) or "unknown"
    item["images"] = _images(obj)
    if obj.get(form["cot"]):
        item["cot"] = str(obj[form["cot"]])
    # Fields of later stages are carried forward untouched, so items may hold extra metadata.
    extra = {k: v for k, v in obj.items() if k not in item and k not in _OFFICIAL_KEYS}
    return cast(Item, {**item, **extra})


_OFFICIAL_KEYS = {"taskId", "ansType", "options", "choiceAns", "blankAns", "image", "coT"}
