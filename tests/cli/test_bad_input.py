"""Bad input costs one clear message naming file, line and why, never the run, never a traceback.

The corpus in tests/fixtures/bad/ is a set of items files, each with good lines around one bad one.
Every stage that reads items or records is run on it (for stages downstream of prompt, the bad
line is put among records that stage accepts)."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest
from support.commands import bv_inproc, jsonl, sh
from support.fakeopenai import Reply
from support.paths import FIXTURES

DATA = FIXTURES
BAD = DATA / "bad"
SECRET = DATA / "secret" / "secret.png"

# file: (line, what the message says)
ITEM_CASES = {
    "invalid-json.jsonl": (2, "invalid JSON"),
    "not-an-object.jsonl": (2, "expected a JSON object, got list"),
    "missing-question.jsonl": (2, "missing or empty 'question'"),
    "empty-question.jsonl": (2, "missing or empty 'question'"),
    "unknown-answer-type.jsonl": (2, "unknown answer type 'essay'"),
    "choiceans-out-of-range.jsonl": (2, "'choiceAns' 7 is out of range for 3 options"),
    "no-gold-answer.jsonl": (2, "no gold answer"),
    "image-missing.jsonl": (2, "image 'images/nope.png': file not found"),
    "image-unreadable.jsonl": (2, "image 'images/folder.png': not a regular file"),
    "image-not-an-image.jsonl": (2, "image 'images/notes.png': not an image"),
    "invalid-utf8.jsonl": (2, "invalid UTF-8"),
    "over-long-line.jsonl": (2, "line longer than 16384 bytes"),
    "torn-last-line.jsonl": (3, "torn last line"),
    "path-absolute.jsonl": (2, "image '/etc/passwd': absolute paths are refused"),
    "path-dotdot.jsonl": (2, "image '../secret/secret.png': resolves outside"),
    "path-symlink.jsonl": (2, "image 'images/link.png': resolves outside"),
    "deep-nesting.jsonl": (2, "invalid JSON: nested too deep"),
    "huge-integer.jsonl": (2, "invalid JSON: a number with more than 4300 digits"),
    "number-too-large.jsonl": (2, "a number too large for bv (beyond ±2^63, or NaN or Infinity)"),
    "image-nul-byte.jsonl": (2, "image 'images/ok\\x00.png': a NUL byte in a file name"),
}
# Cases about the line itself, which every stage meets the same way.
LINE_CASES = [
    "invalid-json.jsonl",
    "not-an-object.jsonl",
    "invalid-utf8.jsonl",
    "over-long-line.jsonl",
    "deep-nesting.jsonl",
    "huge-integer.jsonl",
    "number-too-large.jsonl",
]
ENV = {"BV_MAX_LINE_BYTES": "16384"}


@pytest.fixture(autouse=True)
def line_limit(monkeypatch):
    """The limit BV_MAX_LINE_BYTES sets, read by each run when it starts (the first test checks
    it in a process of its own)."""
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


def test_the_line_limit_is_set_from_the_environment(monkeypatch):
    path = BAD / "over-long-line.jsonl"
    result = sh(f"bv prompt {path}", env=ENV)
    assert_clean_failure(result, f"{path}:2", "line longer than 16384 bytes", good=2)
    monkeypatch.delenv("BV_MAX_LINE_BYTES")
    assert "line longer than" not in sh(f"bv prompt {path}").stderr


def assert_clean_failure(result, where: str, why: str, good: int, code: int = 1) -> None:
    assert result.returncode == code, result.stderr
    assert f"{where}: {why}" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert len(jsonl(result.stdout)) == good


@pytest.mark.parametrize("name", sorted(ITEM_CASES))
def test_prompt_names_each_bad_item(name):
    line, why = ITEM_CASES[name]
    path = BAD / name
    result = bv_inproc(f"bv prompt {path}")
    assert_clean_failure(result, f"{path}:{line}", why, good=2)
    assert bv_inproc(f"bv prompt --skip-bad {path}").returncode == 0


@pytest.mark.parametrize("name", [n for n in sorted(ITEM_CASES) if not n.startswith(("image-", "path-"))])
def test_import_names_each_bad_item(name):
    line, why = ITEM_CASES[name]
    path = BAD / name
    assert_clean_failure(bv_inproc(f"bv import {path}"), f"{path}:{line}", why, good=2)


def test_bom_is_named_but_not_an_error():
    result = bv_inproc(f"bv prompt {BAD / 'bom.jsonl'}")
    assert result.returncode == 0 and len(jsonl(result.stdout)) == 3
    assert f"{BAD / 'bom.jsonl'}:1: warning: UTF-8 byte order mark ignored" in result.stderr


def test_an_unterminated_string_is_named_once_with_its_column():
    result = bv_inproc("bv report --format json", input='{"id": "x", "run": 0, "torn\n')
    assert "<stdin>:1: invalid JSON: Unterminated string starting at column 23" in result.stderr


@pytest.fixture(scope="module")
def stage_inputs(tmp_path_factory) -> dict[str, Path]:
    """Good records for each stage: prompt records, rollout rows, judged rows."""
    folder = tmp_path_factory.mktemp("stages")
    good = BAD / "bom.jsonl"
    commands = {
        "prompts": f"bv prompt {good}",
        "rollouts": f"bv prompt {good} | bv rollout --backend chance --quiet",
        "judged": f"bv prompt {good} | bv rollout --backend chance --quiet | bv judge --mode rules --quiet",
    }
    paths = {}
    for name, command in commands.items():
        paths[name] = folder / f"{name}.jsonl"
        paths[name].write_text(bv_inproc(command).stdout)
    return paths


STAGES = {  # stage command, the records it reads
    "rollout": ("bv rollout --backend chance --quiet", "prompts"),
    "judge": ("bv judge --mode rules --quiet", "rollouts"),
    "merge": ("bv merge", "judged"),
    "report": ("bv report --format json", "judged"),
}


def spliced(good: Path, bad_line: bytes, out: Path) -> Path:
    lines = good.read_bytes().splitlines(keepends=True)
    out.write_bytes(lines[0] + bad_line + b"".join(lines[1:]))
    return out


@pytest.mark.parametrize("stage", sorted(STAGES))
@pytest.mark.parametrize("case", [*LINE_CASES, "torn-last-line.jsonl"])
def test_every_stage_names_bad_lines(stage, case, stage_inputs, tmp_path):
    command, kind = STAGES[stage]
    good = stage_inputs[kind]
    if case == "torn-last-line.jsonl":
        path = tmp_path / "in.jsonl"
        path.write_bytes(good.read_bytes() + good.read_bytes().splitlines()[0][:50])
        line, why = 4, "torn last line"
    else:
        path = spliced(good, (BAD / case).read_bytes().splitlines(keepends=True)[1], tmp_path / "in.jsonl")
        line, why = ITEM_CASES[case]
    result = bv_inproc(f"{command} {path}")
    assert result.returncode == 1 and f"{path}:{line}: {why}" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    if stage != "report":
        assert len(jsonl(result.stdout)) == 3  # every good line went through


@pytest.mark.parametrize(
    "stage,fed,why",
    [
        (
            "rollout",
            "items",
            "not a prompt record: missing 'id', 'messages' (is this the output of bv prompt?)",
        ),
        ("judge", "prompts", "not a rollout record: missing 'response'"),
        ("report", "rollouts", "a rollout row: bv report reads judged rows"),  # one error, naming the file
    ],
)
def test_records_of_the_wrong_stage_are_named(stage, fed, why, stage_inputs, tmp_path):
    command, _ = STAGES[stage]
    path = BAD / "bom.jsonl" if fed == "items" else stage_inputs[fed]
    result = bv_inproc(f"{command} {path}")
    line = 1 if stage == "report" else 2
    assert result.returncode == 1 and f"{path}:{line}: {why}" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_path_escapes_never_send_the_file(server, tmp_path):
    """Absolute, .. and symlink escapes: the secret image's bytes never reach the server."""
    items = tmp_path / "data" / "items.jsonl"
    shutil.copytree(BAD / "images", tmp_path / "data" / "images", symlinks=True)
    (tmp_path / "secret").mkdir()
    shutil.copy(SECRET, tmp_path / "secret" / "secret.png")  # where the symlink and .. point
    lines = [
        (BAD / "path-dotdot.jsonl").read_bytes().splitlines()[1],
        (BAD / "path-symlink.jsonl").read_bytes().splitlines()[1],
    ]
    absolute = json.loads(lines[0])
    absolute["image"] = str(SECRET.resolve())
    lines.append(json.dumps(absolute).encode())
    lines.append((BAD / "bom.jsonl").read_bytes().splitlines()[1])  # one good item
    items.write_bytes(b"\n".join(lines) + b"\n")
    server.responder = lambda seen: Reply(content="\\boxed{1}")
    result = bv_inproc(
        f"bv prompt --skip-bad {items} | bv rollout --base-url {server.base_url} -m m --no-cache"
    )
    assert result.returncode == 0 and len(jsonl(result.stdout)) == 1
    assert result.stderr.count("resolves outside") == 2 and "absolute paths are refused" in result.stderr
    secret = base64.b64encode(SECRET.read_bytes()).decode()
    assert len(server.seen) == 1 and secret not in json.dumps(server.seen[0].body)
    # --allow-any-path is the explicit way to lift the confinement.
    assert len(jsonl(bv_inproc(f"bv prompt --allow-any-path {items}").stdout)) == 4


def test_debug_shows_a_traceback_only_when_asked(tmp_path):
    items = BAD / "bom.jsonl"
    quiet = bv_inproc(f"bv prompt {items} | bv rollout -m m")
    assert quiet.returncode == 1 and "Traceback" not in quiet.stderr and "no model endpoint" in quiet.stderr
    loud = sh(f"bv prompt {items} | bv rollout -m m", env={"BV_DEBUG": "1"})  # the interpreter's traceback
    assert loud.returncode == 1 and "Traceback" in loud.stderr


def test_full_disk_and_unwritable_output_are_clear_errors(stage_inputs, tmp_path):
    for command in (
        f"bv prompt {BAD / 'bom.jsonl'}",
        f"bv rollout --backend chance {stage_inputs['prompts']}",
    ):
        result = sh(f"{command} > /dev/full")
        assert result.returncode == 1, command
        assert (
            "cannot write the output: No space left on device" in result.stderr
            and "Traceback" not in result.stderr
        )
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = bv_inproc(f"bv merge {stage_inputs['judged']} -o {blocker}/out.jsonl")
    assert result.returncode == 1 and f"cannot write {blocker}/out.jsonl" in result.stderr
    assert "Traceback" not in result.stderr
