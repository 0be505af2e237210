"""Issue 23's rough edges, each as what a user sees: the exit status, the message, the rows."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from support.commands import BIN, bv_inproc, jsonl
from support.fakeopenai import FakeOpenAI, Reply
from support.terminal import on_terminal


def _judged(sample_dir, server, tmp_path, content="\\boxed{A}") -> str:
    """results.jsonl of the sample, judged by rules (blank items answered A are undecided)."""
    server.responder = lambda seen: Reply(content=content)
    out = tmp_path / "results.jsonl"
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --base-url {server.base_url} -m m -q"
        f" --cache {tmp_path}/c.sqlite | bv judge --mode rules -q > {out}"
    )
    assert result.returncode == 0, result.stderr
    return str(out)


def test_progress_from_a_pipe_is_a_count_and_a_rate_not_a_bar(sample_dir, server, tmp_path):
    server.responder = lambda seen: Reply(content="\\boxed{A}", delay=0.3)
    prompts = tmp_path / "p.jsonl"
    bv_inproc(f"bv prompt {sample_dir}/meta_data.jsonl > {prompts}")
    status, text, out = on_terminal(
        [
            "bash",
            "-c",
            f"cat {prompts} | {BIN}/bv rollout --base-url {server.base_url} -m m -j 2 --no-cache",
        ],
        columns=160,
        stdin_terminal=False,
        stdin=subprocess.DEVNULL,
        stdout_terminal=False,
    )
    assert status == 0 and len(jsonl(out.decode())) == 12
    assert "/?" not in text and "━" not in text and "╸" not in text  # no bar that cannot end
    assert re.search(r"\d+ done", text) and "rows/s" in text, text
    assert "12 rows, 0 errors" in text


def test_the_cache_finds_replies_whichever_replicas_served(sample_dir, server, tmp_path):
    server.responder = lambda seen: Reply(content="\\boxed{A}")
    other = FakeOpenAI(lambda seen: Reply(content="\\boxed{A}"))
    other.start()
    try:
        bv_inproc(f"bv prompt {sample_dir}/meta_data.jsonl > {tmp_path}/p.jsonl")
        both = bv_inproc(
            f"bv rollout --base-url {server.base_url} --base-url {other.base_url} -m m"
            f" --cache {tmp_path}/c.sqlite {tmp_path}/p.jsonl"
        )
        assert both.returncode == 0 and len(other.seen) > 0, both.stderr  # both replicas served
        sent = len(server.seen)
        alone = bv_inproc(
            f"bv rollout --base-url {server.base_url} -m m --cache {tmp_path}/c.sqlite {tmp_path}/p.jsonl"
        )
        assert alone.returncode == 0, alone.stderr
        assert "12 cache hits, 0 requests" in alone.stderr and len(server.seen) == sent
    finally:
        other.stop()


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("bv rollout --base-url http://127.0.0.1:9/v1 p.jsonl", "no model given: use -m/--model"),
        ("bv judge --mode llm p.jsonl", "--mode llm needs a judge model"),
    ],
)
def test_a_missing_argument_exits_2(tmp_path, command, said):
    (tmp_path / "p.jsonl").write_text("")
    result = bv_inproc(command, cwd=tmp_path)
    assert result.returncode == 2 and said in result.stderr, result.stderr


def test_bv_models_without_an_endpoint_gives_a_hint_that_works(server):
    result = bv_inproc("bv models")
    assert result.returncode == 1
    assert "--backend chance" not in result.stderr and "--base-url URL" in result.stderr, result.stderr
    server.models = ["served-model"]
    assert bv_inproc(f"bv models --base-url {server.base_url}").stdout == "served-model\n"


def test_a_401_says_no_key_was_set_and_which_variable(sample_dir, server, tmp_path):
    server.responder = lambda seen: Reply(status=401, content=None, body=b'{"error": {"message": "no key"}}')
    bv_inproc(f"bv prompt {sample_dir}/meta_data.jsonl --limit 1 > {tmp_path}/p.jsonl")
    unset = bv_inproc(f"bv rollout --base-url {server.base_url} -m m --no-cache {tmp_path}/p.jsonl")
    assert unset.returncode == 1
    assert "no API key was set: set OPENAI_API_KEY or give --api-key" in unset.stderr, unset.stderr
    given = bv_inproc(
        f"bv rollout --base-url {server.base_url} -m m --no-cache {tmp_path}/p.jsonl",
        env={"OPENAI_API_KEY": "sk-wrong-0123456789"},
    )
    assert "refused the API key from OPENAI_API_KEY (HTTP 401)" in given.stderr, given.stderr
    assert "sk-wrong" not in given.stderr


def test_merge_and_import_read_stdin(sample_dir, server, tmp_path):
    results = _judged(sample_dir, server, tmp_path)
    merged = bv_inproc(f"bv merge < {results}", cwd=tmp_path)
    assert merged.returncode == 0 and len(jsonl(merged.stdout)) == 12, merged.stderr
    exported = bv_inproc(f"bv export {results} --format official -o {tmp_path}/official")
    assert exported.returncode == 0, exported.stderr
    official = tmp_path / "official" / "model_results_run_1.json"
    imported = bv_inproc(f"bv import --run 1 < {official}", cwd=tmp_path)
    assert imported.returncode == 0 and len(jsonl(imported.stdout)) == 12, imported.stderr
    unnamed = bv_inproc(f"bv import < {official}", cwd=tmp_path)
    assert (
        unnamed.returncode == 1 and "<stdin>: no run number" in unnamed.stderr and "--run K" in unnamed.stderr
    )
    items = bv_inproc(f"bv import < {sample_dir}/meta_data.jsonl", cwd=tmp_path)
    assert items.returncode == 0 and len(jsonl(items.stdout)) == 12


def test_export_waiting_on_a_terminal_says_so():
    status, text, _ = on_terminal([BIN / "bv", "export", "--format", "csv"], input_bytes=b"")
    assert "reading judged rows from stdin; pipe a file or Ctrl-D" in text
    assert status == 1 and "no judged rows" in text  # then Ctrl-D: nothing to export


@pytest.mark.parametrize("command", ["bv export --format csv", "bv report"])
def test_empty_input_is_refused_alike_by_export_and_report(command, tmp_path):
    result = bv_inproc(command, input="")
    assert result.returncode == 1, result.stderr
    assert "stdin: no judged rows (empty input, or no line could be read)" in result.stderr
    assert result.stdout == ""


def test_export_official_says_undecided_rows_are_written_false(sample_dir, server, tmp_path):
    results = _judged(sample_dir, server, tmp_path)
    undecided = sum(r["undecided"] for r in jsonl(open(results).read()))
    assert undecided  # blank items answered A: the rules cannot decide
    result = bv_inproc(f"bv export {results} --format official -o {tmp_path}/official")
    assert result.returncode == 0
    assert f"{undecided} undecided rows (no LLM judge decided them) written as false" in result.stderr


def test_cache_clear_of_a_model_it_does_not_hold_lists_the_models(sample_dir, server, tmp_path):
    _judged(sample_dir, server, tmp_path)
    result = bv_inproc(f"bv cache clear --model mm --cache {tmp_path}/c.sqlite")
    assert result.returncode == 0
    assert "no replies of model 'mm'; the cache holds: m (12)" in result.stderr, result.stderr


def test_cache_list_browses_replies_by_model_and_date(sample_dir, server, tmp_path):
    _judged(sample_dir, server, tmp_path)
    listed = bv_inproc(f"bv cache list --cache {tmp_path}/c.sqlite -n 5")
    lines = listed.stdout.splitlines()
    assert listed.returncode == 0 and len(lines) == 5
    assert all(re.match(r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ  openai  m  ", line) for line in lines), lines
    as_json = jsonl(bv_inproc(f"bv cache list --cache {tmp_path}/c.sqlite --json --model m").stdout)
    assert len(as_json) == 12 and {r["model"] for r in as_json} == {"m"}
    assert as_json[0]["reply"]["content"] == "\\boxed{A}"
    none = bv_inproc(f"bv cache list --cache {tmp_path}/c.sqlite --model nope")
    assert none.stdout == "" and "the cache holds: m (12)" in none.stderr


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (
            "--type 'visual trackng'",
            "--type: no item matches 'visual trackng' (did you mean 'Visual Tracking'?)",
        ),
        ("--subtype 'count 3d block'", "(did you mean 'Count 3D blocks'?)"),
    ],
)
def test_a_near_miss_type_gets_a_suggestion(sample_dir, option, said):
    result = bv_inproc(f"bv prompt {sample_dir}/meta_data.jsonl {option}")
    assert result.returncode == 1 and said in result.stderr, result.stderr


def test_the_short_options_people_type(sample_dir, server, tmp_path):
    assert bv_inproc(f"bv synth -n 5 --out {tmp_path}/s").returncode == 0
    assert len((tmp_path / "s" / "meta_data.jsonl").read_text().splitlines()) == 5
    assert len(bv_inproc(f"bv prompt {sample_dir}/meta_data.jsonl -n 2").stdout.splitlines()) == 2
    results = _judged(sample_dir, server, tmp_path)
    report = bv_inproc(f"bv report {results} --format markdown -o {tmp_path}/report.md")
    assert report.returncode == 0 and report.stdout == ""
    assert "| **Overall** |" in (tmp_path / "report.md").read_text()


def test_help_shows_the_environment_variables():
    text = bv_inproc("bv rollout --help").stdout
    for name in ("BV_BACKEND", "BV_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        assert f"env var: {name}" in " ".join(text.split()), name
    judge = " ".join(bv_inproc("bv judge --help").stdout.split())
    assert "env var: BV_JUDGE_MODEL" in judge and "env var: BV_JUDGE_API_KEY" in judge


def test_images_not_found_are_grouped_by_cause(tmp_path):
    names = ["a.png", "b.jpg", "c.webp", "d.png", "e.gif", "f.jpeg", "g.png"]
    items = [
        {
            "id": str(k),
            "question": "q?",
            "ans_type": "blank",
            "answer": ["1"],
            "images": [f"images/{name}"],
            "type": "T",
            "subtype": "S",
        }
        for k, name in enumerate(names)
    ]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    result = bv_inproc(f"bv prompt {tmp_path}/items.jsonl")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert sum("file not found" in line for line in lines) == 4, lines  # 3 shown, then one count
    assert "… and 4 more lines like this" in result.stderr


def test_data_from_a_parquet_of_image_paths_says_it_once_with_a_count(sample_dir, tmp_path):
    from support.commands import read_items
    from support.sources import write_parquet

    records = read_items(sample_dir)
    path = write_parquet(tmp_path / "paths.parquet", records, [None] * len(records))
    result = bv_inproc(f"bv data --from {path} --out {tmp_path}/set")
    assert result.returncode == 1 and not (tmp_path / "set").exists()
    said = [line for line in result.stderr.splitlines() if "not embedded" in line]
    assert len(said) == 1, result.stderr
    assert "12 rows (paths.parquet: row 1, paths.parquet: row 2, paths.parquet: row 3, …)" in said[0]
    assert "holds a file path, not the image's bytes" in said[0] and "docs/data.md" in said[0]
