"""The paper's protocol (`bv prompt --style official`) and templates users replace (`--prompts DIR`)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from PIL import Image
from support.commands import bv_inproc, jsonl
from support.fakeopenai import Reply

from bv.core.errors import BadConfig
from bv.core.items import parse_item
from bv.core.templates import STAGE_TEMPLATES, Templates, names, packaged
from bv.stages.judge import judge_version
from bv.stages.prompt import PromptOptions, Skill

INSTRUCTION = packaged("official_answer").strip()
PAPER_WORDING = "Think about the question and give your final answer in \\boxed{Answer} format."

CHOICE = {
    "taskId": 7,
    "question": "Where does the line from point 3 end?",
    "image": "images/7.png",
    "ansType": "choice",
    "options": ["End A", "End B", "End C"],
    "choiceAns": 2,
    "blankAns": None,
    "type": "Visual Tracking",
    "subtype": "Connect the lines",
}
BLANK = {
    "taskId": 8,
    "question": "Which tiger is different? Answer as (row,col).",
    "image": "images/8.png",
    "ansType": "blank",
    "options": [],
    "choiceAns": None,
    "blankAns": "(4,7)",
    "type": "Fine-grained Discrimination",
    "subtype": "Find the different",
}


@pytest.fixture
def items(tmp_path: Path) -> Path:
    """An official meta_data.jsonl with one choice and one blank item, and their images."""
    (tmp_path / "images").mkdir()
    for name in ("7", "8"):
        Image.new("RGB", (8, 8), "red").save(tmp_path / "images" / f"{name}.png")
    path = tmp_path / "meta_data.jsonl"
    path.write_text(json.dumps(CHOICE) + "\n" + json.dumps(BLANK) + "\n")
    return path


def image_url(items: Path, name: str) -> dict:
    return {"type": "image_url", "image_url": {"url": (items.parent / "images" / name).resolve().as_uri()}}


def test_official_style_has_exactly_the_papers_message_structure(items):
    result = bv_inproc(f"bv prompt --style official {items}")
    assert result.returncode == 0, result.stderr
    choice, blank = jsonl(result.stdout)
    assert choice["messages"] == [
        {
            "role": "user",
            "content": [
                image_url(items, "7.png"),
                {
                    "type": "text",
                    "text": "Where does the line from point 3 end?\n"
                    "Choices:\n(A) End A\n(B) End B\n(C) End C\n" + INSTRUCTION,
                },
            ],
        }
    ]
    assert choice["answer"] == ["C"] and choice["style"] == "official" and choice["skill"] is None
    assert blank["messages"] == [
        {
            "role": "user",
            "content": [
                image_url(items, "8.png"),
                {"type": "text", "text": "Which tiger is different? Answer as (row,col).\n" + INSTRUCTION},
            ],
        }
    ]
    assert "\\boxed{Answer}" in INSTRUCTION and "\n" not in INSTRUCTION
    assert "templates" not in choice  # nothing replaced, nothing recorded


def test_default_style_is_unchanged(items):
    default = jsonl(bv_inproc(f"bv prompt {items}").stdout)
    assert default == jsonl(bv_inproc(f"bv prompt --style bv {items}").stdout)
    system, user = default[0]["messages"]
    assert system["role"] == "system" and [p["type"] for p in user["content"]] == ["text", "image_url"]
    assert "## Choices\n\nA. End A" in user["content"][0]["text"]
    assert "style" not in default[0] and "templates" not in default[0]


def test_official_style_refuses_a_skill_and_bv_sections(items, tmp_path):
    skill = tmp_path / "skill.md"
    skill.write_text("Count twice.")
    for option in (f"--skill {skill}", "--diagnostic-instruction 'Explain.'"):
        result = bv_inproc(f"bv prompt --style official {option} {items}")
        assert result.returncode == 2 and result.stdout == ""
        assert "--style official has no system prompt" in result.stderr and "Traceback" not in result.stderr
        assert "use --style bv for skill work" in result.stderr  # the library's settings, as options
    with pytest.raises(BadConfig, match="use `style` bv for skill work"):  # the library's own words
        PromptOptions(style="official", skill=Skill("v1", "Count twice."))


def write_prompts(folder: Path, **texts: str) -> Path:
    folder.mkdir(exist_ok=True)
    for name, text in texts.items():
        (folder / name).write_text(text)
    return folder


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_replaced_template_changes_the_text_and_is_recorded_by_hash(items, tmp_path):
    prompts = write_prompts(
        tmp_path / "prompts",
        **{
            "question.md": "QUESTION: {{question}}\n",
            "official_answer.md": PAPER_WORDING + "\n",
            "judge.md": "Q {{question}} G {{gold}} A {{answer}}",
        },
    )
    bv_style = jsonl(bv_inproc(f"bv prompt --prompts {prompts} {items}").stdout)[0]
    assert bv_style["messages"][1]["content"][0]["text"].startswith("QUESTION: Where does the line")
    # only the templates this stage rendered: judge.md is the judge's
    assert bv_style["templates"] == {"question": sha(prompts / "question.md")}
    official = jsonl(bv_inproc(f"bv prompt --style official --prompts {prompts} {items}").stdout)[1]
    assert official["messages"][0]["content"][1]["text"].endswith("(row,col).\n" + PAPER_WORDING)
    assert official["templates"] == {"official_answer": sha(prompts / "official_answer.md")}
    edited = write_prompts(tmp_path / "edited", **{"question.md": "Q: {{question}}\n"})
    again = jsonl(bv_inproc(f"bv prompt --prompts {edited} {items}").stdout)[0]
    assert again["templates"]["question"] != bv_style["templates"]["question"]
    listing = bv_inproc(f"bv templates --prompts {prompts}").stdout
    assert (
        f"question.md\t{sha(prompts / 'question.md')}\t{prompts / 'question.md'}\t{{{{question}}}}" in listing
    )
    assert f"blank.md\t{hashlib.sha256(packaged('blank').encode()).hexdigest()}\tbv\t-" in listing


@pytest.mark.parametrize(
    "files,message",
    [
        ({"questoin.md": "{{question}}"}, "questoin.md: not one of bv's templates"),
        ({"question.txt": "{{question}}"}, "question.txt: not one of bv's templates"),
        ({"question.md": "{{questoin}}"}, "unknown placeholder {{questoin}} in question.md"),
        ({"question.md": "{{ question }}"}, "unknown placeholder {{ question }} in question.md"),
        ({"blank.md": "Answer {{answer}}"}, "(it may use no placeholders)"),
        ({"judge.md": "\\boxed{{Answer}} {{question}}"}, "unknown placeholder {{Answer}}"),
        (
            {"question.md": "Q: {{question}\n"},
            "a `{{` that opens no placeholder in question.md: '{{question}\\n'",
        ),
    ],
)
def test_a_template_folder_bv_cannot_use_is_a_usage_error(items, tmp_path, files, message):
    prompts = write_prompts(tmp_path / "prompts", **files)
    for command in (
        f"bv prompt --prompts {prompts} {items}",
        f"bv rollout --backend chance --prompts {prompts} /dev/null",
        f"bv judge --mode rules --prompts {prompts} /dev/null",
    ):
        result = bv_inproc(command)
        assert result.returncode == 2, (command, result.stderr)
        assert message in result.stderr and "--prompts" in result.stderr and result.stdout == ""
        assert "Traceback" not in result.stderr


def test_template_files_that_are_hidden_or_not_text(items, tmp_path):
    prompts = write_prompts(tmp_path / "prompts", **{".DS_Store": "junk", "refine.md": "Again: {{previous}}"})
    assert bv_inproc(f"bv prompt --prompts {prompts} {items}").returncode == 0  # dot files are ignored
    (prompts / "question.md").write_bytes(b"\xff\xfe{{question}}")
    result = bv_inproc(f"bv prompt --prompts {prompts} {items}")
    assert result.returncode == 2 and "question.md: not UTF-8 text" in result.stderr
    (prompts / "question.md").write_text("No question here.")
    result = bv_inproc(f"bv prompt --prompts {prompts} {items}")
    assert result.returncode == 0 and "question.md leaves out {{question}}" in result.stderr
    judge = bv_inproc(f"bv judge --mode rules --prompts {prompts} /dev/null")
    assert judge.returncode == 0 and "leaves out" not in judge.stderr  # the judge does not render it


def test_every_template_is_rendered_by_a_stage():
    assert set(sum(STAGE_TEMPLATES.values(), ())) == set(names())


def test_the_judge_version_follows_the_judge_template(tmp_path):
    replaced = write_prompts(tmp_path / "prompts", **{"judge.md": "Same? {{question}} {{gold}} {{answer}}"})
    copied = write_prompts(tmp_path / "copied", **{"judge.md": packaged("judge")})
    assert judge_version(Templates.load(replaced)) != judge_version()
    assert judge_version(Templates.load(copied)) == judge_version() == judge_version(Templates.load(None))


def test_llm_judge_sends_the_replaced_template_and_rows_record_it(server, tmp_path):
    row = {
        **parse_item(CHOICE),
        "run": 0,
        "model": "m",
        "response": "It ends at the third. \\boxed{C}",
        "error": None,
    }
    rollouts = tmp_path / "rollouts.jsonl"
    rollouts.write_text(json.dumps(row) + "\n")
    prompts = write_prompts(tmp_path / "prompts", **{"judge.md": "GT={{gold}} ANS={{answer}} Q={{question}}"})
    server.responder = lambda seen: Reply(content="True")
    judge = (
        f"bv judge --mode llm --judge-model j --judge-base-url {server.base_url} --judge-api-key k --no-cache"
    )
    default = jsonl(bv_inproc(f"{judge} {rollouts}").stdout)[0]
    result = bv_inproc(f"{judge} --prompts {prompts} {rollouts}")
    assert result.returncode == 0, result.stderr
    replaced = jsonl(result.stdout)[0]
    sent = server.seen[-1].body["messages"][0]["content"]
    assert sent.startswith("GT=```\nC\n``` ANS=```\nC\n``` Q=```\nWhere does the line")
    assert replaced["judge_version"] != default["judge_version"] and replaced["hard"] == 1
    assert replaced["judge_templates"] == {"judge": sha(prompts / "judge.md")}
    assert "judge_templates" not in default


def test_official_rollout_sends_the_image_first_with_extra_body_unchanged(items, server, tmp_path):
    prompts = write_prompts(tmp_path / "prompts", **{"refine.md": "Box it, please. You said: {{previous}}"})
    replies = iter([Reply(content="The third one."), Reply(content="\\boxed{C}")] + [Reply()] * 4)
    server.responder = lambda seen: next(replies)
    result = bv_inproc(
        f"bv prompt --style official {items} | bv rollout --base-url {server.base_url} -m m --api-key k"
        f" -j 1 --ordered --no-cache --max-turns 2 --prompts {prompts}"
        " -p 'reasoning={\"enabled\": true}' -p include_reasoning=true"
    )
    assert result.returncode == 0, result.stderr
    first = server.seen[0].body
    assert first["reasoning"] == {"enabled": True} and first["include_reasoning"] is True
    [user] = first["messages"]  # no system message
    image, text = user["content"]
    assert image["type"] == "image_url" and text["type"] == "text"
    assert image["image_url"]["url"].startswith("data:image/png;base64,")
    assert base64.b64decode(image["image_url"]["url"].split(",", 1)[1]).startswith(b"\x89PNG")
    assert text["text"].startswith("Where does the line from point 3 end?\nChoices:\n(A) End A")
    refinement = server.seen[1].body["messages"]
    assert [m["role"] for m in refinement] == ["user", "assistant", "user"]
    assert refinement[-1]["content"] == "Box it, please. You said: The third one."
    choice, blank = jsonl(result.stdout)
    assert choice["response"] == "\\boxed{C}" and len(choice["turns"]) == 2
    assert choice["params"] == {"extra_body": {"reasoning": {"enabled": True}, "include_reasoning": True}}
    assert choice["rollout_templates"] == {"refine": sha(prompts / "refine.md")}
    assert blank["style"] == "official"


def test_chance_baseline_reads_official_choices(items):
    result = bv_inproc(
        f"bv prompt --style official {items} | bv rollout --backend chance --repeats 3 --ordered -q"
    )
    rows = jsonl(result.stdout)
    choice_guesses = {r["response"][-3:-1] for r in rows if r["ans_type"] == "choice"}
    assert choice_guesses and choice_guesses <= {"{A", "{B", "{C"}
    assert all(r["response"].endswith("\\boxed{}") for r in rows if r["ans_type"] == "blank")


def test_templates_copy_to_gives_files_to_edit(tmp_path):
    folder = tmp_path / "mine"
    result = bv_inproc(f"bv templates --copy-to {folder} judge.md refine")
    assert result.returncode == 0 and sorted(p.name for p in folder.iterdir()) == ["judge.md", "refine.md"]
    assert (folder / "judge.md").read_text() == packaged("judge")
    again = bv_inproc(f"bv templates --copy-to {folder} judge")
    assert again.returncode == 2 and "judge.md exists" in again.stderr
    assert bv_inproc(f"bv templates --copy-to {folder} nope").returncode == 2
    assert "bv templates --copy-to" in bv_inproc("bv templates --help").stdout
