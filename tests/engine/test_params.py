"""The parameter rules (bv/engine/params.py) against the loopback server: reasoning models answer
400 exactly as OpenAI does (tests/support/fakeopenai.py's reasoning_model, from a fixture naming its
sources), and rollout with --max-tokens and a gpt-5-mini judge both finish; -p extra_body is
unwrapped; --judge-param is sent and recorded; 400s say what to change."""

from __future__ import annotations

import json

import pytest
from support.commands import bv_inproc, jsonl
from support.fakeopenai import Reply, reasoning_model
from support.judging import rollout_rows
from support.paths import FIXTURES, ROOT

from bv.engine.params import RULES, model_key, provider_of, rule_for, user_rules


@pytest.mark.parametrize(
    "provider,model,max_tokens_as,temperature",
    [
        ("openai", "gpt-5-mini", "max_completion_tokens", False),
        ("openai", "o3", "max_completion_tokens", False),
        ("openai", "o4-mini-2025-04-16", "max_completion_tokens", False),
        ("openai", "o1-preview", "max_completion_tokens", False),
        ("openai", "gpt-4o", "max_tokens", True),
        ("openai", "gpt-4.1-mini", "max_tokens", True),
        ("azure", "o3-mini", "max_completion_tokens", False),
        ("azure", "my-gpt4o-deployment", "max_tokens", True),
        ("openrouter", "openai/gpt-5", "max_tokens", False),
        ("openrouter", "qwen/qwen2.5-vl-72b-instruct", "max_tokens", True),
        ("compatible", "openai/gpt-5-mini", "max_completion_tokens", False),  # LiteLLM's naming
        ("compatible", "Qwen/Qwen2.5-VL-7B-Instruct", "max_tokens", True),
        ("compatible", "openai/gpt-oss-120b", "max_tokens", True),  # a reasoning model vLLM serves
    ],
)
def test_the_table_spells_max_tokens_and_temperature_by_provider_and_family(
    provider, model, max_tokens_as, temperature
):
    rule = rule_for(provider, model)
    assert (rule.max_tokens_as, rule.temperature) == (max_tokens_as, temperature)


def test_every_provider_ends_at_the_catch_all_row_and_every_row_names_its_source():
    assert RULES[-1].provider == "*" and RULES[-1].models == ("*",)
    assert all(rule.source for rule in RULES)
    assert model_key(" OpenAI/GPT-5-Mini ") == "gpt-5-mini"


@pytest.mark.parametrize(
    "kind,url,provider",
    [
        ("openai", "https://api.openai.com/v1", "openai"),
        ("openai", "https://openrouter.ai/api/v1", "openrouter"),
        ("openai", "https://my-resource.openai.azure.com/openai/v1", "azure"),
        ("azure", "https://anything.example", "azure"),
        ("openai", "http://127.0.0.1:4000", "compatible"),  # a LiteLLM proxy looks like any server
        ("openai", "http://gpu1:8000/v1", "compatible"),
    ],
)
def test_provider_from_the_base_url(kind, url, provider):
    assert provider_of(kind, url) == provider


def test_user_rules_come_first_by_alias_or_by_spelling(tmp_path):
    rules = user_rules('{"my-o3-*": "o3", "my-judge": {"temperature": false}}')
    assert rule_for("azure", "my-o3-deployment", rules).max_tokens_as == "max_completion_tokens"
    judge = rule_for("compatible", "my-judge", rules)
    assert (judge.max_tokens_as, judge.temperature) == ("max_tokens", False)
    path = tmp_path / "rules.json"
    path.write_text('{"gpt-5-chat*": {"temperature": true, "max_tokens_as": "max_completion_tokens"}}')
    assert rule_for("openai", "gpt-5-chat-latest", user_rules(str(path))).temperature is True


@pytest.mark.parametrize(
    "rules,said",
    [
        ("{nope", "is not JSON"),
        ("[1]", "must be a JSON object"),
        ('{"m": 3}', "must map to a model name"),
        ('{"m": {"max_tokens_as": "tokens"}}', "max_tokens_as is max_tokens or max_completion_tokens"),
        ("/nonexistent/rules.json", "cannot read"),
    ],
)
def test_bad_user_rules_stop_before_any_work(server, tmp_path, rules, said):
    path = rollout_rows(tmp_path, ["(2,3)"])
    result = bv_inproc(
        f"bv judge --mode llm --judge-model m --judge-base-url {server.base_url} {path}",
        env={"BV_PARAM_RULES": rules},
    )
    assert result.returncode == 2 and "BV_PARAM_RULES" in result.stderr and said in result.stderr
    assert server.seen == []


def test_rollout_with_max_tokens_finishes_on_a_reasoning_model(server, sample_dir, tmp_path):
    server.responder = reasoning_model()
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout -m gpt-5-mini --base-url {server.base_url}"
        " --max-tokens 2048 --no-cache -q",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    rows = jsonl(result.stdout)
    assert rows and all(r["error"] is None for r in rows)
    assert all(s.status == 200 for s in server.seen)
    body = server.seen[0].body
    assert body["max_completion_tokens"] == 2048 and "max_tokens" not in body
    assert rows[0]["params"] == {"max_tokens": 2048}  # recorded as the user gave it


def test_other_models_keep_max_tokens_and_temperature(server, sample_dir, tmp_path):
    bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout -m Qwen/Qwen2.5-VL-7B-Instruct"
        f" --base-url {server.base_url} --max-tokens 64 --temperature 0 --no-cache -q",
        cwd=tmp_path,
    )
    body = server.seen[0].body
    assert body["max_tokens"] == 64 and body["temperature"] == 0 and "max_completion_tokens" not in body


def test_the_servers_400s_are_openais_own(server, sample_dir, tmp_path):
    """What a reasoning model answers when bv does not know the model's family: OpenAI's error
    body, and bv's message says what to change."""
    server.responder = reasoning_model()
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout -m my-deployment --base-url {server.base_url}"
        " --max-tokens 64 --no-cache -q --retries 0",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    error = jsonl(result.stdout)[0]["error"]
    assert "Unsupported parameter: 'max_tokens' is not supported with this model." in error
    assert "BV_PARAM_RULES" in error and "`extra_body` max_completion_tokens=N" in error  # data: settings
    server.seen.clear()
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout -m my-deployment --base-url {server.base_url}"
        " --max-tokens 64 --no-cache -q",
        cwd=tmp_path,
        env={"BV_PARAM_RULES": '{"my-deployment": "o3"}'},
    )
    assert result.returncode == 0, result.stderr
    # A request of the first run may still reach the server after the clear: read this run's own.
    sent = [s.body for s in server.seen if "max_tokens" not in s.body]
    assert sent and all(body["max_completion_tokens"] == 64 for body in sent)


def test_a_gpt5_mini_judge_gets_no_temperature_and_rows_record_what_was_sent(server, tmp_path):
    server.responder = reasoning_model(lambda seen: Reply(content="True"))
    path = rollout_rows(tmp_path, ["(2,3)", "row 2 column 3"])
    result = bv_inproc(
        f"bv judge --mode llm --judge-model gpt-5-mini --judge-base-url {server.base_url} --no-cache {path}"
    )
    assert result.returncode == 0, result.stderr
    rows = jsonl(result.stdout)
    assert all(r["decided_by"] == "llm" and r["judge_params"] == {} for r in rows)
    assert all("temperature" not in s.body and s.status == 200 for s in server.seen)


def test_judge_param_is_sent_as_written_and_recorded(server, tmp_path):
    server.responder = reasoning_model(lambda seen: Reply(content="True"))
    path = rollout_rows(tmp_path, ["row 2 column 3"])
    result = bv_inproc(
        f"bv judge --judge-model gpt-5-mini --judge-base-url {server.base_url} --no-cache"
        f" --judge-param reasoning_effort=minimal --judge-param max_completion_tokens=512 {path}"
    )
    assert result.returncode == 0, result.stderr
    llm = [r for r in jsonl(result.stdout) if r["decided_by"] == "llm"]
    assert llm and llm[0]["judge_params"] == {"reasoning_effort": "minimal", "max_completion_tokens": 512}
    assert server.seen[0].body["reasoning_effort"] == "minimal"
    rules = [r for r in jsonl(result.stdout) if r["decided_by"] == "rules"]
    assert rules and rules[0]["judge_params"] is None  # no LLM was asked


def test_a_judge_that_takes_temperature_gets_zero_unless_told(server, tmp_path):
    server.responder = lambda seen: Reply(content="True")
    path = rollout_rows(tmp_path, ["row 2 column 3"])
    command = f"bv judge --mode llm --judge-model gpt-4o-mini --judge-base-url {server.base_url} --no-cache"
    rows = jsonl(bv_inproc(f"{command} {path}").stdout)
    assert rows[0]["judge_params"] == {"temperature": 0} and server.seen[0].body["temperature"] == 0
    rows = jsonl(bv_inproc(f"{command} --judge-param temperature=0.5 {path}").stdout)
    assert rows[0]["judge_params"] == {"temperature": 0.5} and server.seen[-1].body["temperature"] == 0.5


def test_an_unknown_judge_on_a_reasoning_model_says_what_to_change(server, tmp_path):
    server.responder = reasoning_model(lambda seen: Reply(content="True"))
    path = rollout_rows(tmp_path, ["row 2 column 3"])
    result = bv_inproc(
        f"bv judge --mode llm --judge-model my-judge --judge-base-url {server.base_url} --no-cache {path}"
    )
    assert result.returncode == 1
    error = jsonl(result.stdout)[0]["judge_error"]
    assert "Unsupported value: 'temperature' does not support 0 with this model." in error
    assert "`judge_params` temperature=1" in error and "BV_PARAM_RULES" in error
    result = bv_inproc(
        f"bv judge --mode llm --judge-model my-judge --judge-base-url {server.base_url} --no-cache"
        f" --judge-param temperature=1 {path}"
    )
    assert result.returncode == 0, result.stderr


def test_extra_body_is_unwrapped_as_the_sdk_does(server, sample_dir, tmp_path):
    result = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout -m m --base-url {server.base_url} --no-cache -q"
        """ -p 'extra_body={"top_k": 20, "chat_template_kwargs": {"enable_thinking": false}}' -p min_p=0.1""",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    body = server.seen[0].body
    assert "extra_body" not in body
    assert body["top_k"] == 20 and body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["min_p"] == 0.1


@pytest.mark.parametrize("pair,said", [("extra_body=20", "must be a JSON object"), ("model=x", "set by bv")])
def test_params_bv_cannot_send_are_refused(server, tmp_path, pair, said):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": "1", "messages": [{"role": "user", "content": "hi"}]}) + "\n")
    result = bv_inproc(f"bv rollout -m m --base-url {server.base_url} -p {pair} {path}")
    assert result.returncode == 2 and said in result.stderr and server.seen == []


def test_the_readme_reasoning_example_works_as_written(server, tmp_path):
    """The README's reasoning-model pipeline, run as written against the reasoning mode (OpenAI's
    400s for max_tokens and temperature), with OPENAI_BASE_URL pointing at it."""
    from support.commands import sh

    readme = (ROOT / "README.md").read_text()
    block = readme.split("# a reasoning model:", 1)[1].split("\n\n", 1)[0]
    command = "\n".join(line for line in block.splitlines() if not line.startswith("#"))
    assert "--max-tokens" in command and "--judge-model gpt-5-mini" in command
    server.responder = reasoning_model(
        lambda seen: Reply(content="True" if "Ground Truth" in json.dumps(seen.body) else "\\boxed{A}")
    )
    from bv.data.synth import write_sample_set

    write_sample_set(tmp_path / "build" / "demo" / "data", 4, seed=1)
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-readme"}
    result = sh(command, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    rows = jsonl((tmp_path / "results.jsonl").read_text())
    assert len(rows) == 4 and all(r["error"] is None and r["decided_by"] == "llm" for r in rows)
    assert all(s.status == 200 for s in server.seen)
    assert rows[0]["judge_params"] == {"reasoning_effort": "minimal"}


REFUSALS = json.loads((FIXTURES / "refused_requests.json").read_text())["replies"]


@pytest.mark.parametrize("refusal", REFUSALS, ids=[r["what"] for r in REFUSALS])
def test_each_recorded_400_says_what_to_change(server, tmp_path, refusal):
    server.responder = lambda seen: Reply(status=400, body=json.dumps(refusal["body"]).encode())
    if refusal["role"] == "judge":
        path = rollout_rows(tmp_path, ["row 2 column 3"])
        command = f"bv judge --mode llm --judge-model my-judge --judge-base-url {server.base_url} {path}"
        field = "judge_error"
    else:
        path = tmp_path / "p.jsonl"
        path.write_text(json.dumps({"id": "1", "messages": [{"role": "user", "content": "hi"}]}) + "\n")
        command = f"bv rollout -m my-model --base-url {server.base_url} --max-tokens 9 --no-cache {path}"
        field = "error"
    result = bv_inproc(f"{command} --no-cache")
    assert result.returncode == 1
    said = jsonl(result.stdout)[0][field]
    assert "HTTP 400: " in said and refusal["advice"] in said, said


def test_an_azure_reasoning_deployment_and_bv_api_judge_params(server, tmp_path):
    from bv import api
    from bv.engine.endpoints import resolve

    env = {"AZURE_OPENAI_ENDPOINT": "https://r.openai.azure.com", "AZURE_OPENAI_API_KEY": "k"}
    endpoint = resolve(
        "azure", model="o3-mini", env={**env, "AZURE_OPENAI_API_VERSION": "2024-12-01-preview"}
    )
    assert endpoint.rule.max_tokens_as == "max_completion_tokens" and not endpoint.rule.temperature
    server.responder = reasoning_model(lambda seen: Reply(content="True"))
    rows = [json.loads(line) for line in open(rollout_rows(tmp_path, ["row 2 column 3"]))]
    judged = api.judge(
        rows,
        mode="llm",
        judge_model="gpt-5-nano",
        judge_base_url=server.base_url,
        judge_params={"reasoning_effort": "low"},
        cache=None,
    )
    assert [r["judge_params"] for r in judged] == [{"reasoning_effort": "low"}] * 2
    assert all(r["decided_by"] == "llm" for r in judged)


def test_a_temperature_asked_of_a_reasoning_model_is_sent_with_a_warning(server, tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": "1", "messages": [{"role": "user", "content": "hi"}]}) + "\n")
    result = bv_inproc(
        f"bv rollout -m gpt-5.1 --base-url {server.base_url} --temperature 0.2 --no-cache {path}"
    )
    assert "warning: gpt-5.1 (OpenAI reasoning model on another server" in result.stderr
    assert "refuse --temperature 0.2" in result.stderr
    assert server.seen[0].body["temperature"] == 0.2  # as asked: gpt-5.1 takes one with reasoning_effort none
    result = bv_inproc(
        f"bv rollout -m gpt-4o --base-url {server.base_url} --temperature 0.2 --no-cache {path}"
    )
    assert "warning" not in result.stderr
