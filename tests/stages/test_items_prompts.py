"""Items in both schemas, and the chat messages bv prompt builds from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from bv.core.errors import BadRecord
from bv.core.images import resolve_image, sniff_format
from bv.core.items import parse_item
from bv.core.records import without_stage
from bv.stages.prompt import PromptOptions, Skill, build_prompt, refine_text, system_prompt, user_text

OFFICIAL = {
    "taskId": 445,
    "question": "Which tiger is different?",
    "image": "images/445.png",
    "ansType": "choice",
    "options": ["(1,1)", "(4,7)", "(6,2)"],
    "choiceAns": 1,
    "blankAns": None,
    "type": "Fine-grained Discrimination",
    "subtype": "Find the different",
    "coT": "Look at tails.",
}


def test_official_item_is_normalised():
    item = parse_item(OFFICIAL)
    assert item["id"] == "445" and item["ans_type"] == "choice"
    assert item["choices"] == [
        {"label": "A", "text": "(1,1)"},
        {"label": "B", "text": "(4,7)"},
        {"label": "C", "text": "(6,2)"},
    ]
    assert (
        item["answer"] == ["B"] and item["images"] == ["images/445.png"] and item["cot"] == "Look at tails."
    )
    assert not {"taskId", "ansType", "options", "choiceAns", "blankAns", "coT"} & set(item)


def test_bv_item_forms():
    item = parse_item(
        {
            "id": "q1",
            "question": "How many?",
            "images": ["a.png"],
            "ans_type": "blank",
            "answer": "5",
            "type": "Spatial Perception",
            "subtype": "Count",
            "source": "mine",
        }
    )
    assert item["answer"] == ["5"] and item["images"] == ["a.png"] and item["source"] == "mine"
    choice = parse_item(
        {
            "id": 7,
            "question": "Which?",
            "image": "a.png",
            "ans_type": "choice",
            "choices": [{"label": "A", "text": "x"}, {"label": "B", "text": "y"}],
            "answer": "B",
        }
    )
    assert choice["id"] == "7" and choice["answer"] == ["B"]


@pytest.mark.parametrize(
    "change,why",
    [
        ({"question": ""}, "missing or empty 'question'"),
        ({"question": None}, "missing or empty 'question'"),
        ({"ansType": "essay"}, "unknown answer type"),
        ({"choiceAns": 3}, "out of range"),
        ({"choiceAns": None}, "no gold answer"),
        ({"choiceAns": True}, "no gold answer"),
        ({"image": None}, "missing 'image'"),
        ({"options": []}, "without 'options'"),
        ({"ansType": "blank", "blankAns": ""}, "no gold answer"),
    ],
)
def test_bad_official_items_say_why(change, why):
    with pytest.raises(BadRecord, match=why):
        parse_item({**OFFICIAL, **change})


def test_bad_bv_choice_gold():
    with pytest.raises(BadRecord, match="not one of the labels"):
        parse_item(
            {
                "id": "1",
                "question": "?",
                "image": "a.png",
                "ans_type": "choice",
                "choices": ["x", "y"],
                "answer": "C",
            }
        )


@pytest.mark.parametrize(
    "choices,why",
    [
        ([{"label": "A", "text": "x"}, {"label": "A", "text": "y"}], "distinct"),
        ([{"label": "", "text": "x"}, {"label": "B", "text": "y"}], "distinct"),
        ([f"option {i}" for i in range(27)], "at most 26"),
    ],
)
def test_bad_bv_choice_labels(choices, why):
    with pytest.raises(BadRecord, match=why):
        parse_item(
            {
                "id": "1",
                "question": "?",
                "image": "a.png",
                "ans_type": "choice",
                "choices": choices,
                "answer": "B",
            }
        )


def test_not_an_object():
    with pytest.raises(BadRecord, match="JSON object"):
        parse_item([1, 2])


def test_system_prompt_skill_section_only_when_given():
    plain = system_prompt(None)
    assert "## Skill" not in plain and "\\boxed{}" in plain
    assert system_prompt(Skill("empty", "")) == plain
    with_skill = system_prompt(Skill("v2", "Count twice before answering."))
    assert "## Skill\n\nCount twice before answering." in with_skill
    assert with_skill.index("## Skill") < with_skill.index("## Task Format")


def test_user_text_for_choice_and_blank():
    item = parse_item(OFFICIAL)
    text = user_text(item)
    assert text.startswith("## Question\n\nWhich tiger is different?")
    assert "## Choices\n\nA. (1,1)\nB. (4,7)\nC. (6,2)" in text
    assert text.endswith("Answer using the single correct option label in \\boxed{...}.")
    blank = user_text({**item, "ans_type": "blank", "choices": []})
    assert "## Choices" not in blank and blank.endswith("Answer with a short phrase in \\boxed{...}.")


def test_trace_and_readout_sections():
    item = parse_item(OFFICIAL)
    text = user_text(item, trace="I counted rows first.", diagnostic="Explain each step.")
    assert text.index("## Previous Trace Snapshot") < text.index("## Question")
    assert "partial transcript of an earlier attempt" in text
    assert text.rstrip().endswith("## Training Readout\n\nExplain each step.")


def test_refine_text_quotes_the_previous_answer():
    text = refine_text("Long reasoning...\nSo it is the third one")
    assert text.startswith("Your previous answer was: So it is the third one")
    assert "Output the final answer in \\boxed{...}." in text


def write_png(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), "red").save(path, "PNG")


def test_build_prompt_references_image_by_path(tmp_path):
    write_png(tmp_path / "images" / "445.png")
    item = parse_item(OFFICIAL)
    record = build_prompt(item, tmp_path, PromptOptions(image_detail="auto"))
    system, user = record["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    text, image = user["content"]
    assert text["type"] == "text" and image["type"] == "image_url"
    assert image["image_url"] == {"url": (tmp_path / "images" / "445.png").resolve().as_uri()}  # no detail
    assert record["schema"] == 1 and record["skill"] is None and record["images"] == ["images/445.png"]
    assert len(json.dumps(record)) < 4000  # no image bytes in the pipe
    low = build_prompt(item, tmp_path, PromptOptions(image_detail="low", skill=Skill("v1", "Be careful.")))
    assert low["messages"][1]["content"][1]["image_url"]["detail"] == "low"
    assert low["skill"]["name"] == "v1" and len(low["skill"]["sha256"]) == 64


def test_reprompting_replaces_prompt_fields_only(tmp_path):
    write_png(tmp_path / "images" / "445.png")
    first = build_prompt(parse_item(OFFICIAL), tmp_path, PromptOptions(skill=Skill("v1", "one")))
    again = build_prompt(parse_item(first), tmp_path, PromptOptions(skill=Skill("v2", "two")))
    assert again["skill"]["name"] == "v2" and "two" in again["messages"][0]["content"]
    assert without_stage(again, "prompt") == without_stage(first, "prompt")


@pytest.mark.parametrize("fmt,ext", [("PNG", "jpg"), ("JPEG", "png"), ("WEBP", "png"), ("GIF", "png")])
def test_format_comes_from_bytes_not_name(tmp_path, fmt, ext):
    path = tmp_path / f"picture.{ext}"
    Image.new("RGB", (4, 4), "blue").save(path, fmt)
    assert sniff_format(path.read_bytes()[:16]) == fmt


def test_missing_and_non_image_files_are_refused(tmp_path):
    with pytest.raises(BadRecord, match="not found"):
        resolve_image("nope.png", tmp_path)
    (tmp_path / "notes.png").write_text("not an image")
    with pytest.raises(BadRecord, match="not an image"):
        resolve_image("notes.png", tmp_path)


def test_a_question_cannot_fill_other_slots():
    from bv.stages.judge import judge_messages

    record = {"question": "What is {{gold}}?", "ans_type": "blank", "choices": [], "answer": ["(4,7)"]}
    text = judge_messages(record, "{{question}}")[0]["content"]
    assert "What is {{gold}}?" in text and "## Extracted Answer\n\n```\n{{question}}\n```" in text


def test_skill_that_is_not_utf8_is_a_clear_error(tmp_path):
    from support.commands import bv_inproc

    skill = tmp_path / "skill.md"
    skill.write_bytes(b"\xff\xfe not text")
    result = bv_inproc(f"bv prompt --skill {skill} /dev/null")
    assert (
        result.returncode == 2 and "not UTF-8 text" in result.stderr and "internal error" not in result.stderr
    )
