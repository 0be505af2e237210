"""Hostile inputs through the real stages: images that are not files, a cache that fails, rows and
replies far over the limits, and data that tries to act on the terminal. (Replies a hostile
server sends are tested with the transport; the bad-line corpus in test_bad_input.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from support.commands import bv_inproc, jsonl, sh
from support.fakeopenai import Reply
from support.paths import FIXTURES

BAD = FIXTURES / "bad"


def with_image_url(record: dict, url: str) -> dict:
    record = json.loads(json.dumps(record))
    for message in record["messages"]:
        for part in message["content"] if isinstance(message["content"], list) else []:
            if part.get("type") == "image_url":
                part["image_url"]["url"] = url
    return record


@pytest.mark.parametrize("cache", ["--no-cache", "--cache {tmp}/cache.sqlite"])
def test_fifo_and_device_images_are_item_errors_not_hangs(prompts, server, tmp_path, cache):
    fifo = tmp_path / "image.png"
    os.mkfifo(fifo)
    good = jsonl(prompts.read_text())[:2]
    hostile = [
        {**with_image_url(good[0], "file:///dev/zero"), "id": "zero"},
        {**with_image_url(good[0], fifo.as_uri()), "id": "fifo"},
        {**with_image_url(good[0], "file:///tmp/a%00b.png"), "id": "nul"},
    ]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [*hostile, good[1]]))
    cache = cache.format(tmp=tmp_path)
    started = time.monotonic()
    result = bv_inproc(f"bv rollout --base-url {server.base_url} -m m {cache} --retries 0 {path}")
    assert time.monotonic() - started < 30 and "Traceback" not in result.stderr
    rows = {r["id"]: r for r in jsonl(result.stdout)}
    assert rows["zero"]["error"].endswith("zero: not a regular file")
    assert rows["fifo"]["error"].endswith("image.png: not a regular file")
    assert "a NUL byte in the file name" in rows["nul"]["error"]
    assert rows[good[1]["id"]]["error"] is None and len(server.seen) == 1  # only the good item was sent


def test_a_corrupt_cache_is_named_with_its_fix_before_any_request(prompts, server, tmp_path):
    cache = tmp_path / "cache.sqlite"
    cache.write_bytes(b"this is not a database, it only has the name of one" * 4)
    result = bv_inproc(f"bv rollout --base-url {server.base_url} -m m --cache {cache} {prompts}")
    assert (
        result.returncode == 1 and "Traceback" not in result.stderr and "DatabaseError" not in result.stderr
    )
    assert f"the reply cache {cache} cannot be used (file is not a database)" in result.stderr
    assert f"delete {cache}, or run with --no-cache" in result.stderr and not server.seen
    for command in ("stats", "clear"):
        named = bv_inproc(f"bv cache {command} --cache {cache}")
        assert named.returncode == 1 and f"the reply cache {cache} cannot be used" in named.stderr


@pytest.fixture
def tiny_disk(tmp_path):
    """A 160 kB tmpfs: room for the cache file and a few replies, then full."""
    if os.geteuid() != 0:
        pytest.skip("a full disk is made with a tiny tmpfs, which needs root to mount")
    mount = tmp_path / "tiny"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(mount)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_cache_disk_never_costs_a_paid_reply(prompts, server, tiny_disk, sample_dir):
    server.responder = lambda seen: Reply(content="x" * 6000 + " \\boxed{A}")
    cache = tiny_disk / "cache.sqlite"
    result = bv_inproc(f"bv rollout --base-url {server.base_url} -m m --repeats 3 --cache {cache} {prompts}")
    rows = jsonl(result.stdout)
    items = len(jsonl(prompts.read_text()))
    assert len(rows) == 3 * items and len({(r["id"], r["run"]) for r in rows}) == len(rows)
    assert all(r["error"] is None and r["response"].endswith("\\boxed{A}") for r in rows)
    assert len(server.seen) == len(rows), "a reply was paid for twice"
    assert result.stderr.count("warning: the reply cache") == 1, result.stderr
    assert f"the reply cache {cache} failed (database or disk is full)" in result.stderr
    assert "run with --no-cache" in result.stderr and "Traceback" not in result.stderr
    assert result.returncode == 0


def test_a_reply_over_the_line_limit_stays_a_readable_row(prompts, server, tmp_path):
    """A model that wrote too much: the row keeps the end of its texts, every later stage reads it."""
    first = prompts.read_text().splitlines()[0]
    (tmp_path / "one.jsonl").write_text(first + "\n")
    server.responder = lambda seen: Reply(content="blah " * 20_000 + "so \\boxed{B}")
    env = {"BV_MAX_LINE_BYTES": "32768"}
    result = sh(
        f"bv rollout --base-url {server.base_url} -m m --no-cache {tmp_path}/one.jsonl"
        f" | bv judge --mode rules > {tmp_path}/r.jsonl && bv report --format json {tmp_path}/r.jsonl",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    [row] = jsonl((tmp_path / "r.jsonl").read_text())
    assert row["extracted"] == "B" and row["response"].startswith("[bv: ") and row["error"] is None
    assert (
        "over the line limit of 32768" in result.stderr
        and json.loads(result.stdout)["inputs"][0]["overall"]["rows"] == 1
    )


def test_a_looping_model_is_judged_fast(prompts, server, tmp_path):
    """20,000 `\\boxed{` (140 kB), then 32k `<think>`: seconds, not minutes, in rollout and judge."""
    replies = iter(["\\boxed{" * 20_000, "<think>" * 32_000 + "\\boxed{A}"] * 50)
    server.responder = lambda seen: Reply(content=next(replies))
    started = time.monotonic()
    first_four = "".join(prompts.read_text().splitlines(keepends=True)[:4])
    result = bv_inproc(
        f"bv rollout --base-url {server.base_url} -m m --no-cache | bv judge --mode rules", input=first_four
    )
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 20 and len(jsonl(result.stdout)) == 4
    assert all(r["extracted"] is None for r in jsonl(result.stdout))


def surrogate_line(record: dict) -> bytes:
    """The record with a lone surrogate in its id and question, as JSON text can carry one."""
    text = json.dumps({**record, "id": "s\ud800", "question": "what? \udfff"})
    return text.encode("ascii") + b"\n"


@pytest.fixture(scope="module")
def stage_records(tmp_path_factory) -> dict[str, list[dict]]:
    good = BAD / "bom.jsonl"
    prompts = jsonl(bv_inproc(f"bv prompt {good}").stdout)
    rollouts = jsonl(bv_inproc(f"bv prompt {good} | bv rollout --backend chance --quiet").stdout)
    judged = jsonl(
        bv_inproc(f"bv prompt {good} | bv rollout --backend chance --quiet | bv judge --quiet").stdout
    )
    return {"prompts": prompts, "rollouts": rollouts, "judged": judged}


@pytest.mark.parametrize(
    "command,kind",
    [
        ("bv rollout --backend chance --quiet", "prompts"),
        ("bv judge --mode rules --quiet", "rollouts"),
        ("bv merge", "judged"),
        ("bv report --format table", "judged"),
    ],
)
def test_lone_surrogates_are_named_and_cost_nothing(command, kind, stage_records, tmp_path):
    records = stage_records[kind]
    path = tmp_path / "in.jsonl"
    path.write_bytes(json.dumps(records[0]).encode() + b"\n" + surrogate_line(records[1]))
    result = bv_inproc(f"{command} {path}")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert f"{path}:2: warning: lone surrogate" in result.stderr
    if not command.startswith("bv report"):
        rows = jsonl(result.stdout)
        assert len(rows) == 2 and rows[1]["id"] == "s\ufffd"
        result.stdout.encode("utf-8")  # valid UTF-8 all through


def test_prompt_names_a_lone_surrogate_and_keeps_the_item():
    result = bv_inproc(f"bv prompt {BAD / 'lone-surrogate.jsonl'}")
    assert result.returncode == 0 and len(jsonl(result.stdout)) == 3
    assert f"{BAD / 'lone-surrogate.jsonl'}:2: warning: lone surrogate" in result.stderr


HOSTILE_TYPE = "Spatial [/] [link=https://evil.example]click[/link] \x1b]0;pwned\x07\x1b[31m"


def test_report_table_shows_data_as_text(stage_records, tmp_path):
    rows = [{**r, "type": HOSTILE_TYPE, "subtype": "sub\nbv: forged"} for r in stage_records["judged"]]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for fmt in ("table", "markdown"):
        result = bv_inproc(f"bv report --format {fmt} {path}")
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
        assert "\x1b" not in result.stdout and "\x07" not in result.stdout
        assert "[/] [link=https://evil.example]click[/link] \\x1b]0;pwned" in result.stdout
        assert "\nbv: forged" not in result.stdout and "sub\\x0abv: forged" in result.stdout


def test_merge_warnings_cannot_forge_lines(stage_records, tmp_path):
    row = {**stage_records["judged"][0], "id": "x\nbv: all good\x1b[2J"}
    (tmp_path / "a.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "b.jsonl").write_text(json.dumps({**row, "model": "other\x1b]8;;http://e\x07"}) + "\n")
    result = bv_inproc(f"bv merge {tmp_path}/a.jsonl {tmp_path}/b.jsonl")
    assert result.returncode == 0 and "\x1b" not in result.stderr
    assert not any(line.startswith("bv: all good") for line in result.stderr.splitlines())
    assert "id x\\x0abv: all good\\x1b[2J run" in result.stderr


def test_html_report_confines_images_and_takes_any_content(stage_records, tmp_path, sample_dir):
    outside = next((sample_dir / "images").iterdir())
    row = stage_records["judged"][0]
    weird = {**with_image_url(row, outside.as_uri()), "id": "weird"}
    weird["messages"] = [*weird["messages"], {"role": "user", "content": ["a plain string part", 7, None]}]
    fifo = tmp_path / "fifo.png"
    os.mkfifo(fifo)
    piped = {**with_image_url(row, fifo.as_uri()), "id": "fifo"}
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (weird, piped)))
    page = tmp_path / "out.html"
    result = bv_inproc(f"bv report {path} --html {page}")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert f"1 image(s) outside {tmp_path} not embedded" in result.stderr
    assert "data:image/" not in page.read_text() and "image outside the results file" in page.read_text()
    allowed = bv_inproc(f"bv report {path} --html {page} --allow-any-path")
    assert allowed.returncode == 0 and "data:image/" in page.read_text()
    assert "image missing or unreadable" in page.read_text()  # the FIFO, never opened for reading


def test_html_report_is_written_atomically(stage_records, tmp_path, tiny_disk):
    path = tmp_path / "r.jsonl"
    rows = [{**r, "question": "q" * 100_000} for r in stage_records["judged"]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    page = tiny_disk / "report.html"
    page.write_text("the old report")
    result = bv_inproc(f"bv report {path} --html {page}")
    assert result.returncode == 1 and f"cannot write {page}: No space left on device" in result.stderr
    assert page.read_text() == "the old report" and [p.name for p in tiny_disk.iterdir()] == ["report.html"]


@pytest.mark.parametrize(
    "text,why",
    [
        ("[" * 5000 + "]" * 5000, "invalid JSON: nested too deep"),
        ('[{"Id": ' + "1" * 5000 + "}]", "invalid JSON: a number with more than 4300 digits"),
        ('[{"Id": 1e999}]', "a number too large for bv"),
    ],
)
def test_official_result_files_are_read_as_carefully_as_lines(text, why, tmp_path):
    path = tmp_path / "model_results_run_1.json"
    path.write_text(text)
    result = bv_inproc(f"bv import {path}")
    assert result.returncode == 1 and f"{path}: {why}" in result.stderr and "Traceback" not in result.stderr
