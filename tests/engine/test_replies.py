"""What bv reads from real endpoints' replies (issue 26): reasoning in every field name providers
use and in <think> blocks, reasoning and cached token counts, refusals, Azure's content filter
(a filtered reply and the HTTP 400 policy body) and cut-offs. Each shape is a fixture under
tests/fixtures/replies/ that names its source, replayed byte for byte by the loopback server, and
bv runs as users type it."""

from __future__ import annotations

import json

import pytest
from support.commands import bv_inproc, jsonl
from support.fakeopenai import REPLY_FIXTURES, Reply, replay, reply_fixture
from support.official import OFFICIAL_FILES, needs_official_results

from bv.engine.backends.replies import MAX_REASONING_CHARS

KEY = "sk-replies-Qw3Er4Ty5Ui6Op7As8Df9Gh0"


@pytest.fixture(scope="module")
def prompts(sample_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("replies") / "prompts.jsonl"
    result = bv_inproc(f"bv prompt {sample_dir}/meta_data.jsonl | head -2 > {path}")
    assert result.returncode == 0, result.stderr
    return path


def rollout(server, prompts, extra="--no-cache"):
    return bv_inproc(
        f"bv rollout --base-url {server.base_url} --api-key {KEY} -m fake-model -j 2 --retries 0"
        f" {extra} {prompts}"
    )


def judged(server, prompts, tmp_path, extra="--no-cache"):
    """Rollout rows, then the same rows judged by the rules (the official protocol's reading)."""
    rows_file = tmp_path / "rows.jsonl"
    result = rollout(server, prompts, f"{extra} > {rows_file}")
    judge = bv_inproc(f"bv judge --mode rules {rows_file}")
    return result, jsonl(rows_file.read_text()), jsonl(judge.stdout)


def test_every_fixture_names_its_source_and_is_replayed_here():
    names = sorted(p.stem for p in REPLY_FIXTURES.glob("*.json"))
    assert len(names) >= 12
    text = open(__file__).read()
    for name in names:
        fixture = reply_fixture(name)
        assert isinstance(fixture["source"], str) and len(fixture["source"]) > 20, name
        assert ("http" in fixture["source"]) or ("/" in fixture["source"]), name
        assert isinstance(fixture["body"], dict) and fixture.get("status", 200) in (200, 400), name
        assert f'"{name}"' in text, f"fixture {name} is not replayed by any test"


REASONING = [
    # fixture, reasoning the turn keeps (its start), usage beyond prompt/completion tokens
    ("vllm_reasoning", "Follow the red line from 4", {}),
    ("vllm_reasoning_content", "Row 4, column 7", {}),
    ("sglang_reasoning_content", "Three circles are red", {}),
    ("deepseek_reasoner", "Option A is the only shape", {"reasoning_tokens": 402, "cached_tokens": 64}),
    ("deepseek_cache_hit_only", None, {"cached_tokens": 80}),
    (
        "openrouter_reasoning_details",
        "**Inspecting Tiger Silhouettes**",
        {"reasoning_tokens": 1320, "cached_tokens": 1024},
    ),
    ("openrouter_reasoning_summary", "Compared the four shapes", {"reasoning_tokens": 256}),
    ("openai_reasoning_usage", None, {"reasoning_tokens": 1088, "cached_tokens": 1024}),
    ("think_in_content", "The draft says \\boxed{A}", {}),
    ("litellm_reasoning_content", "The sequence alternates", {"reasoning_tokens": 80, "cached_tokens": 0}),
]


@pytest.mark.parametrize("name, reasoning, extra_usage", REASONING)
def test_reasoning_and_token_details_are_kept(server, prompts, tmp_path, name, reasoning, extra_usage):
    server.responder = lambda seen: replay(name)
    result, rows, judged_rows = judged(server, prompts, tmp_path)
    assert result.returncode == 0, result.stderr
    body = reply_fixture(name)["body"]
    for row, judged_row in zip(rows, judged_rows, strict=True):
        turn = row["turns"][0]
        if reasoning is None:
            assert "reasoning" not in turn
        else:
            assert turn["reasoning"].startswith(reasoning)
        assert row["response"] == body["choices"][0]["message"]["content"]
        for name_, value in extra_usage.items():
            assert turn["usage"][name_] == value and row["usage"][name_] == value
        for absent in {"reasoning_tokens", "cached_tokens"} - set(extra_usage):
            assert absent not in row["usage"]  # not given is not zero
        assert row["refusal"] is None and row["content_filter"] is None and row["cut_off"] is False
        assert judged_row["extracted"] is not None and judged_row["reasoning_answer"] is None


def test_think_blocks_are_reasoning_and_the_answer_is_read_after_them(server, prompts, tmp_path):
    """The official protocol reads the content: a box inside <think> is not the answer (D is)."""
    server.responder = lambda seen: replay("think_in_content")
    _, rows, judged_rows = judged(server, prompts, tmp_path)
    assert rows[0]["turns"][0]["reasoning"] == "The draft says \\boxed{A}, but the arrow points to D."
    assert {r["extracted"] for r in judged_rows} == {"D"}


def test_an_answer_only_in_the_reasoning_is_flagged_not_scored(server, prompts, tmp_path):
    server.responder = lambda seen: replay("think_answer_only_inside")
    _, _, judged_rows = judged(server, prompts, tmp_path)
    for row in judged_rows:
        assert row["extracted"] is None and row["hard"] == 0
        assert row["reasoning_answer"] == "B"


def test_cut_off_in_the_reasoning_with_content_null(server, prompts, tmp_path):
    server.responder = lambda seen: replay("vllm_length_null_content")
    result, rows, judged_rows = judged(server, prompts, tmp_path)
    assert result.returncode == 0, result.stderr
    for row, judged_row in zip(rows, judged_rows, strict=True):
        assert row["response"] == "" and row["cut_off"] is True and row["error"] is None
        assert row["turns"][0]["finish_reason"] == "length"
        assert judged_row["extracted"] is None and judged_row["hard"] == 0
        assert judged_row["reasoning_answer"] == "7"


def test_refinement_after_a_reply_without_text_sends_no_empty_message(server, prompts, tmp_path):
    replies = iter(["openai_length_empty", "vllm_length_null_content", "vllm_length_null_content"])
    server.responder = lambda seen: replay(next(replies, "think_in_content"))
    result = rollout(server, prompts, "--no-cache -j 1 --max-turns 2")
    assert result.returncode == 0, result.stderr
    rows = jsonl(result.stdout)
    assert [len(r["turns"]) for r in rows] == [2, 2]
    assert len(server.seen) == 4
    for seen in server.seen:
        for message in seen.body["messages"]:
            content = message["content"]
            assert content if isinstance(content, str) else all(p.get("text", "x") for p in content)
    second = server.seen[1].body["messages"]
    assert second[-2] == {"role": "assistant", "content": "[no reply text: cut off at the token limit]"}
    assert "[no reply text: cut off at the token limit]" in second[-1]["content"]
    assert [m["role"] for m in second[-3:]] == ["user", "assistant", "user"]  # roles still alternate


def test_a_refusal_is_named_and_never_refined_as_an_empty_reply(server, prompts, tmp_path):
    server.responder = lambda seen: replay("openai_refusal")
    result, rows, judged_rows = judged(server, prompts, tmp_path, "--no-cache --max-turns 3")
    assert result.returncode == 0, result.stderr
    assert len(server.seen) == 2  # one request a row: no refinement turn
    for row, judged_row in zip(rows, judged_rows, strict=True):
        assert row["refusal"] == "I'm sorry, I can't help with that request."
        assert row["turns"][0]["refusal"] == row["refusal"] and len(row["turns"]) == 1
        assert row["response"] == "" and row["error"] is None and row["cut_off"] is False
        assert judged_row["hard"] == 0 and judged_row["extracted"] is None
    assert not any("(empty reply)" in json.dumps(s.body) for s in server.seen)


def test_a_filtered_reply_is_named_and_not_refined(server, prompts, tmp_path):
    server.responder = lambda seen: replay("azure_content_filter_finish")
    result, rows, _ = judged(server, prompts, tmp_path, "--no-cache --max-turns 2")
    assert result.returncode == 0, result.stderr
    assert len(server.seen) == 2
    for row in rows:
        assert row["content_filter"] == "violence (medium)" and row["error"] is None
        assert row["turns"][0]["finish_reason"] == "content_filter"
        assert row["turns"][0]["content_filter"] == "violence (medium)"


def test_azure_policy_error_is_an_error_row_that_names_the_filter(server, prompts, tmp_path):
    server.responder = lambda seen: replay("azure_content_filter_error")
    result = rollout(server, prompts)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    rows = jsonl(result.stdout)
    assert len(rows) == 2 and len(server.seen) == 2  # a 400 is not retried
    for row in rows:
        assert row["content_filter"] == "hate (high)"
        assert row["error"] == "HTTP 400: content filter refused the prompt: hate (high)"
        assert row["response"] is None and row["refusal"] is None


def test_reasoning_is_redacted_bounded_and_cached(server, prompts, tmp_path):
    body = reply_fixture("vllm_reasoning")["body"]
    long = "x" * (MAX_REASONING_CHARS + 1000) + f" my key is {KEY} so \\boxed{{C}}"
    body["choices"][0]["message"]["reasoning"] = long
    raw = json.dumps(body).encode()
    server.responder = lambda seen: Reply(body=raw)
    cache = tmp_path / "cache.sqlite"
    first = jsonl(rollout(server, prompts, f"--cache {cache}").stdout)
    again = jsonl(rollout(server, prompts, f"--cache {cache}").stdout)
    assert len(server.seen) == 2  # the second run came from the cache
    for row in first + again:
        reasoning = row["turns"][0]["reasoning"]
        assert KEY not in reasoning and KEY[:12] not in json.dumps(row)
        assert reasoning.startswith("[1,0") and "earlier characters of reasoning not kept]" in reasoning
        assert len(reasoning) < MAX_REASONING_CHARS + 100 and reasoning.endswith("\\boxed{C}")
    assert [r["turns"][0]["cached"] for r in again] == [True, True]
    assert [r["turns"][0]["reasoning"] for r in again] == [r["turns"][0]["reasoning"] for r in first]


def mixed_rows(server, prompts, tmp_path):
    """Judged rows of four rollouts, one shape each: a refusal, a filtered reply, a cut-off whose
    reasoning boxes the answer, and a plain answer; merged into one file."""
    files = []
    for name in (
        "openai_refusal",
        "azure_content_filter_finish",
        "vllm_length_null_content",
        "vllm_reasoning",
    ):
        server.responder = lambda seen, name=name: replay(name)
        path = tmp_path / f"{name}.jsonl"
        result = bv_inproc(
            f"bv rollout --base-url {server.base_url} --api-key {KEY} -m fake-model --no-cache"
            f" {prompts} | bv judge --mode rules > {path}"
        )
        assert result.returncode == 0, result.stderr
        files.append(path)
    return files


def test_report_counts_refusals_filters_cut_offs_and_answers_in_reasoning(server, prompts, tmp_path):
    files = mixed_rows(server, prompts, tmp_path)
    report = json.loads(bv_inproc(f"bv report --format json {' '.join(map(str, files))}").stdout)
    overall = {s["name"]: s["overall"] for s in report["inputs"]}
    counts = {
        name: (o["refusals"], o["content_filtered"], o["cut_off"], o["answer_in_reasoning"], o["correct"])
        for name, o in overall.items()
    }
    assert counts == {
        "openai_refusal": (2, 0, 0, 0, 0),
        "azure_content_filter_finish": (0, 2, 0, 0, 0),
        "vllm_length_null_content": (0, 0, 2, 2, 0),
        "vllm_reasoning": (0, 0, 0, 0, counts["vllm_reasoning"][4]),
    }
    table = bv_inproc(f"bv report {files[2]}").stdout
    header = next(line for line in table.splitlines() if "group" in line)
    assert "cut off" in header and "ans. in reasoning" in header and "refused" not in header
    notes = bv_inproc(f"bv report --format markdown {files[2]}").stdout  # lines not wrapped
    assert "2 rows cut off at the token limit with no answer" in notes
    assert "2 rows with the answer only in the reasoning" in notes
    plain = bv_inproc(f"bv report --format markdown {files[3]}").stdout  # no such rows: no such columns
    assert plain.splitlines()[0].endswith("| undecided |") and "cut off" not in plain
    csv_head = bv_inproc(f"bv report --format csv {files[0]}").stdout.splitlines()[0]
    assert "refusals,content_filtered,cut_off,answer_in_reasoning" in csv_head


def test_export_writes_model_reasoning_as_the_official_files_do(server, prompts, tmp_path):
    shapes = {"openrouter_reasoning_details": None, "vllm_reasoning": None, "openai_reasoning_usage": None}
    for name in shapes:
        server.responder = lambda seen, name=name: replay(name)
        out = tmp_path / name
        result = bv_inproc(
            f"bv rollout --base-url {server.base_url} --api-key {KEY} -m fake-model --no-cache {prompts}"
            f" | bv judge --mode rules > {tmp_path / 'rows.jsonl'}"
            f" && bv export {tmp_path / 'rows.jsonl'} --format official --out {out}"
        )
        assert result.returncode == 0, result.stderr
        shapes[name] = json.loads((out / "model_results_run_1.json").read_text())
    sent = reply_fixture("openrouter_reasoning_details")["body"]["choices"][0]["message"]
    for result in shapes["openrouter_reasoning_details"]:
        assert result["ModelReasoning"] == sent["reasoning_details"]
    for result in shapes["vllm_reasoning"]:
        [entry] = result["ModelReasoning"]
        assert entry == {
            "type": "reasoning.text",
            "text": reply_fixture("vllm_reasoning")["body"]["choices"][0]["message"]["reasoning"],
            "format": "unknown",
            "index": 0,
        }
    assert all(r["ModelReasoning"] == [] for r in shapes["openai_reasoning_usage"])


@needs_official_results
def test_model_reasoning_entries_have_the_official_files_keys():
    official = json.loads(OFFICIAL_FILES[0].read_text())
    keys = {entry["type"]: set(entry) for record in official for entry in record["ModelReasoning"]}
    sent = reply_fixture("openrouter_reasoning_details")["body"]["choices"][0]["message"]["reasoning_details"]
    assert {entry["type"]: set(entry) for entry in sent} == keys


def test_html_shows_the_reasoning_folded_and_escaped(server, prompts, tmp_path):
    body = reply_fixture("think_answer_only_inside")["body"]
    body["choices"][0]["message"]["content"] = (
        "<think>I see <script>alert(1)</script> so \\boxed{B}</think> no idea"
    )
    raw = json.dumps(body).encode()
    server.responder = lambda seen: Reply(body=raw)
    rows = tmp_path / "rows.jsonl"
    page = tmp_path / "page.html"
    result = bv_inproc(
        f"bv rollout --base-url {server.base_url} --api-key {KEY} -m fake-model --no-cache {prompts}"
        f" | bv judge --mode rules > {rows} && bv report {rows} --html {page}"
    )
    assert result.returncode == 0, result.stderr
    html = page.read_text()
    folded = '<details class="reasoning"><summary>reasoning</summary><pre>I see &lt;script&gt;alert(1)'
    assert folded in html and "<script>alert(1)" not in html
    assert "answer only in the reasoning: B" in html
