"""Every request body bv builds validates against the `openai` SDK's own request type,
`openai.types.chat.completion_create_params.CompletionCreateParamsNonStreaming`, through pydantic.

Our loopback server accepts anything; OpenAI does not. The SDK's types are what its users' requests
are held to, so each body bv sent to the loopback server (bv's and the official prompt style, a
skill, refinement turns, -p parameters, the LLM judge's requests, reasoning models' spelling) is
validated, and then compared with what the validation kept: pydantic drops keys a TypedDict does
not declare and coerces lax values ("5" to 5), and its `Iterable` fields (messages, content parts)
validate only when iterated, so the validated body is materialised and must equal the sent one."""

from __future__ import annotations

import json

import pytest
from support.commands import bv_inproc
from support.fakeopenai import Reply, reasoning_model
from support.sdk_types import check_request


@pytest.fixture
def bodies(server):
    """The chat request bodies the loopback server received."""
    return lambda: [s.body for s in server.seen if s.path.endswith("/chat/completions")]


def _rollout(sample_dir, tmp_path, server, prompt: str, rollout: str) -> None:
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl --limit 4 {prompt}"
        f" | bv rollout --base-url {server.base_url} --no-cache -q {rollout}",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr


def test_bv_style_with_a_skill_refinement_turns_and_params(server, bodies, sample_dir, tmp_path):
    skill = tmp_path / "skill.md"
    skill.write_text("# Counting\n\nCount twice.\n")
    server.responder = lambda seen: Reply(
        content="\\boxed{A}" if len(seen.body["messages"]) > 2 else "I think it is the left one."
    )
    _rollout(
        sample_dir,
        tmp_path,
        server,
        f"--skill {skill} --image-detail high",
        "-m gpt-4o --max-turns 2 --max-tokens 256 --temperature 0.7 --seed 3"
        """ -p top_p=0.9 -p 'stop=["</answer>"]' -p 'extra_body={"top_k": 20}'""",
    )
    sent = bodies()
    assert any(len(b["messages"]) == 4 for b in sent)  # refinement turns were sent
    assert sent[0]["messages"][0]["role"] == "system" and "Count twice." in sent[0]["messages"][0]["content"]
    for body in sent:
        check_request(body, extra=["top_k"])


def test_official_style_and_a_reasoning_models_spelling(server, bodies, sample_dir, tmp_path):
    server.responder = reasoning_model()
    _rollout(
        sample_dir,
        tmp_path,
        server,
        "--style official",
        "-m o4-mini --max-tokens 4000 -p reasoning_effort=high",
    )
    sent = bodies()
    assert sent and all(b["max_completion_tokens"] == 4000 for b in sent)
    for body in sent:
        check_request(body)


@pytest.mark.parametrize(
    "judge,given", [("gpt-4o-mini", ""), ("gpt-5-mini", "--judge-param reasoning_effort=minimal")]
)
def test_the_judges_requests(server, bodies, tmp_path, judge, given):
    from support.judging import rollout_rows

    verdict = lambda seen: Reply(content="True")  # noqa: E731
    server.responder = reasoning_model(verdict) if judge.startswith("gpt-5") else verdict
    path = rollout_rows(tmp_path, ["(2,3)", "row 2 column 3"])
    where = f"--judge-base-url {server.base_url} --no-cache"
    result = bv_inproc(f"bv judge --mode llm --judge-model {judge} {where} {given} {path}")
    assert result.returncode == 0, result.stderr
    assert len(bodies()) == 3
    for body in bodies():
        check_request(body)


@pytest.mark.parametrize(
    "broken,said",
    [
        ({"extra_body": {"top_k": 20}}, "body.extra_body: not a field"),  # the literal wrapping of issue 26
        ({"max_tokens": "64"}, "sent '64'"),
        ({"temperature": [0]}, "temperature"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image", "url": "data:,"}]}]},
            "validation error",
        ),
        ({"messages": [{"role": "user", "content": "hi", "reasoning": "…"}]}, "reasoning: not a field"),
        ({"messages": [{"role": "bot", "content": "hi"}]}, "validation error"),
    ],
)
def test_the_check_refuses_a_broken_body(broken, said):
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **broken}
    with pytest.raises(ValueError, match="(?s)" + said.replace("[", r"\[").replace("(", r"\(")):
        check_request(body)


def test_the_check_passes_a_body_the_sdk_itself_sends(server):
    """The check is not stricter than the SDK: what `openai.OpenAI` posts passes it."""
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        max_completion_tokens=5,
        extra_body={"top_k": 3},
    )
    body = json.loads(json.dumps(server.seen[-1].body))
    check_request(body, extra=["top_k"])
