"""Edit operations from an optimizer's reply: read within bounds, each checked alone, merged, capped."""

from __future__ import annotations

import json

import pytest

from bv.optimize.edits import (
    MAX_EDITS_READ,
    Edit,
    ReplyProblem,
    apply_edit,
    guarded_items,
    propose,
    read_reply,
    recorded,
)

SKILL = "## Counting\n\n- Count twice.\n\n## Format\n\n- Box the answer."
ITEMS = [
    {"id": "1", "question": "How many red blocks are in the stack?", "answer": ["7"], "choices": []},
    {
        "id": "2",
        "question": "Which figure completes the pattern shown?",
        "answer": ["B"],
        "choices": [{"label": "A", "text": "square"}, {"label": "B", "text": "green triangle"}],
    },
    {"id": "3", "question": "Where is the odd tile hidden in this grid?", "answer": ["(4,7)"], "choices": []},
]
GUARDED = guarded_items(ITEMS, train_ids={"1", "2"})


def run(ops, step=4, cap=2000, text=SKILL):
    return propose(text, [ops], GUARDED, cap, step)


def test_each_op_applies_where_it_says():
    assert apply_edit(SKILL, Edit("append", content="## New\n- x")).endswith(
        "- Box the answer.\n\n## New\n- x"
    )
    inserted = apply_edit(SKILL, Edit("insert_after", target="## Counting", content="- Point at each."))
    assert inserted.startswith("## Counting\n- Point at each.\n\n- Count twice.")
    assert "Count three times" in apply_edit(
        SKILL, Edit("replace", target="Count twice", content="Count three times")
    )
    assert (
        apply_edit(SKILL, Edit("delete", target="- Count twice."))
        == "## Counting\n\n## Format\n\n- Box the answer."
    )


@pytest.mark.parametrize(
    "reply",
    [
        '{"edits": [{"op": "append", "content": "- a"}]}',
        '```json\n{"patch": {"reasoning": "r", "edits": [{"op": "append", "content": "- a"}]}}\n```',
        'Here you are: {"patch": [{"op": "append", "content": "- a"}]} hope it helps',
    ],
)
def test_the_reference_shapes_are_read(reply):
    assert read_reply(reply) == [{"op": "append", "content": "- a"}]


@pytest.mark.parametrize(
    "reply, kind",
    [
        ("", "empty_reply"),
        ("I would add a counting rule {not json", "malformed_reply"),
        ('{"edits": "append things"}', "malformed_reply"),
        ("[" * 100_000, "malformed_reply"),
        ('{"edits": []}' + " " * 300_000, "oversized_reply"),
    ],
)
def test_an_unreadable_reply_is_named(reply, kind):
    with pytest.raises(ReplyProblem) as caught:
        read_reply(reply)
    assert caught.value.kind == kind


def test_every_operation_is_checked_on_its_own():
    candidate, checked = run(
        [
            {"op": "append", "content": "- Look at the corners."},
            {"op": "replace", "target": "not in the skill", "content": "x"},
            {"op": "delete", "target": "- "},  # three times in the skill
            {"op": "explode", "target": "x"},
            "append",
            {"op": "append", "content": "- bell\x07"},
            {"op": "append", "content": "- How many red blocks are in the stack? It is 7."},
            {"op": "append", "content": "x" * 3000},
            {"op": "replace", "target": "Count twice", "content": "Count twice"},
        ]
    )
    statuses = [c.status for c in checked]
    assert statuses == [
        "applied",
        "absent",
        "ambiguous",
        "malformed",
        "malformed",
        "control_chars",
        "leak",
        "too_large",
        "no_change",
    ]
    assert candidate == SKILL + "\n\n- Look at the corners."
    assert json.loads(json.dumps([c.to_json() for c in checked]))[4]["raw"] == "append"


def test_a_choice_answer_is_a_leak_by_its_text_or_its_label_beside_the_question():
    _, checked = run(
        [
            {"op": "append", "content": "Which figure completes the pattern shown? The green triangle."},
            {"op": "append", "content": "which figure completes  the pattern shown? -> B"},
            {"op": "append", "content": "Which figure completes the pattern shown? Compare the rows."},
        ]
    )
    assert [c.status for c in checked] == ["leak", "leak", "applied"]


def test_a_held_out_question_is_refused_even_without_its_answer():
    _, checked = run([{"op": "append", "content": "Where is the odd tile hidden in this grid? Think."}])
    assert checked[0].status == "leak" and "held-out" in checked[0].why


def test_duplicates_merge_and_the_most_supported_go_first_up_to_the_step_size():
    a = {"op": "append", "content": "- Rule A."}
    b = {"op": "append", "content": "- Rule  B."}
    c = {"op": "append", "content": "- Rule C."}
    candidate, checked = propose(SKILL, [[a, b], [c, {**b, "content": "- rule b."}]], GUARDED, 2000, 2)
    assert [c.status for c in checked] == ["applied", "applied", "over_step", "duplicate"]
    assert checked[1].edit is not None and checked[1].edit.support == 2
    assert candidate.endswith("- Rule  B.\n\n- Rule A.")  # B had two minibatches behind it


def test_an_edit_whose_target_an_earlier_one_removed_is_a_conflict():
    _, checked = run(
        [
            {"op": "delete", "target": "- Count twice."},
            {"op": "replace", "target": "Count twice", "content": "Count thrice"},
        ]
    )
    assert [c.status for c in checked] == ["applied", "conflict"]


def test_the_skill_size_cap_holds_after_the_edit():
    _, checked = run([{"op": "append", "content": "y" * 100}], cap=len(SKILL) + 50)
    assert checked[0].status == "too_large" and "over the cap" in checked[0].why


def test_a_reply_with_too_many_operations_is_read_to_a_bound():
    ops = [{"op": "append", "content": f"- rule {i}"} for i in range(MAX_EDITS_READ + 5)]
    _, checked = run(ops, step=1, cap=100_000)
    over = [c for c in checked if c.status == "over_limit"]
    assert len(over) == 1 and over[0].count == 5 and over[0].to_json()["count"] == 5  # one entry, tallied
    assert [c.status for c in checked].count("applied") == 1


def test_a_reply_past_the_bound_is_recorded_as_over_limit():
    """docs/optimize.md: the operations past a reply's first 64 are one `over_limit` entry with
    their count, in the history's `edits`, however many entries came before it (they were
    tallied in `edits_not_recorded` once 64 entries were recorded)."""
    ops = [{"op": "append", "content": f"- rule {i}"} for i in range(MAX_EDITS_READ + 6)]
    _, checked = run(ops, step=2, cap=100_000)
    entries, tally = recorded(checked)
    over = [e for e in entries if e["status"] == "over_limit"]
    assert len(over) == 1 and over[0]["count"] == 6, (over, tally)
    assert "over_limit" not in tally and [e["status"] for e in entries].count("applied") == 2
