"""One core under two faces: `bv rollout` / `bv judge` and `bv.api.rollout` / `api.judge` build
the same typed config (bv/stages/rollout_config.py, judge_config.py) from the same settings, so
every option means the same on both (`--seed` and `seed=` both go in the request). And a setting
a backend does not use is refused (exit 2), never dropped in silence. `bv eval` and `api.evaluate`
record the same run and make the same rows from the same settings, cost and batch ones included."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click
import pytest
from support.commands import bv_inproc, jsonl
from support.evaluating import JUDGE_REPLY, RATES, ROLLOUT_REPLY, is_judge, priced
from support.evaluating import priced_command as eval_command
from support.fakebatch import batch_server, quick_batch_polls  # noqa: F401 (fixtures)
from support.fakeopenai import Reply
from support.paths import ROOT
from support.rows import comparable

from bv import api
from bv.cli.declared import config_of
from bv.cli.request_commands import judge, rollout, rollout_config
from bv.core.errors import BadConfig
from bv.core.run_context import running
from bv.core.settings import api_default, declared, default_of
from bv.stages.judge_config import JudgeConfig
from bv.stages.request_params import RequestParams
from bv.stages.request_settings import DEFAULT_CACHE
from bv.stages.rollout_config import RolloutConfig

# Options of the commands that are wiring, not settings of the stage (files, streams, exit status).
WIRING = {"inputs", "dry_run", "skip_bad", "no_cache"}

# Values of every setting, none of them a default; the CLI spelling of each beside it.
ROLLOUT = {
    "backend": ("openai", []),
    "model": ("gpt-4o", ["-m", "gpt-4o"]),
    "base_url": (
        ("http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"),
        ["--base-url", "http://127.0.0.1:9/v1", "--base-url", "http://127.0.0.1:10/v1"],
    ),
    "api_key": ("sk-faces-0123456789", ["--api-key", "sk-faces-0123456789"]),
    "jobs": (3, ["-j", "3"]),
    "shard": ((1, 4), ["--shard", "1/4"]),
    "repeats": (2, ["--repeats", "2"]),
    "max_turns": (3, ["--max-turns", "3"]),
    "max_tokens": (77, ["--max-tokens", "77"]),
    "temperature": (0.5, ["--temperature", "0.5"]),
    "seed": (11, ["--seed", "11"]),
    "extra_body": ({"top_k": 20, "mode": "x"}, ["-p", "top_k=20", "-p", "mode=x"]),
    "retries": (2, ["--retries", "2"]),
    "timeout": (30.0, ["--timeout", "30"]),
    "rate_limit_patience": (120.0, ["--rate-limit-patience", "120"]),
    "connect_timeout": (4.0, ["--connect-timeout", "4"]),
    "first_byte_timeout": (20.0, ["--first-byte-timeout", "20"]),
    "read_timeout": (25.0, ["--read-timeout", "25"]),
    "stall_notice": (12.0, ["--stall-notice", "12"]),
    "cache": ("CACHE", ["--cache", "CACHE"]),
    "cache_scope": ("endpoint", ["--cache-scope", "endpoint"]),
    "max_pixels": (4096, ["--max-pixels", "4096"]),
    "artifacts": ("ART", ["--artifacts", "ART"]),
    "prices": ("prices.json", ["--prices", "prices.json"]),  # genai-prices bounds no batch (issue 34)
    "max_cost": (5.0, ["--max-cost", "5"]),
    "batch": (True, ["--batch"]),
    "quiet": (True, ["--quiet"]),
}
JUDGE = {
    "mode": ("auto", ["--mode", "auto"]),  # as --calibrate takes
    "judge_model": ("gpt-4o-mini", ["--judge-model", "gpt-4o-mini"]),
    "judge_base_url": ("http://127.0.0.1:9/v1", ["--judge-base-url", "http://127.0.0.1:9/v1"]),
    "judge_api_key": ("sk-judge-0123456789", ["--judge-api-key", "sk-judge-0123456789"]),
    "panel": ("unanimous", ["--panel", "unanimous"]),
    "calibrate": (0.25, ["--calibrate", "0.25"]),
    "judge_params": (
        {"reasoning_effort": "minimal", "max_tokens": 50},  # a token limit: --max-cost with --batch needs one
        ["--judge-param", "reasoning_effort=minimal", "--judge-param", "max_tokens=50"],
    ),
    "jobs": (3, ["-j", "3"]),
    "retries": (2, ["--retries", "2"]),
    "timeout": (30.0, ["--timeout", "30"]),
    "rate_limit_patience": (120.0, ["--rate-limit-patience", "120"]),
    "connect_timeout": (4.0, ["--connect-timeout", "4"]),
    "first_byte_timeout": (20.0, ["--first-byte-timeout", "20"]),
    "read_timeout": (25.0, ["--read-timeout", "25"]),
    "stall_notice": (12.0, ["--stall-notice", "12"]),
    "cache": ("CACHE", ["--cache", "CACHE"]),
    "cache_scope": ("endpoint", ["--cache-scope", "endpoint"]),
    "prices": ("prices.json", ["--prices", "prices.json"]),  # genai-prices bounds no batch (issue 34)
    "max_cost": (5.0, ["--max-cost", "5"]),
    "batch": (True, ["--batch"]),
    "quiet": (True, ["--quiet"]),
}


def settings_of(command: click.Command) -> set[str]:
    """The stage settings a command has options for (its wiring options left out)."""
    return {p.name for p in command.params if p.name and p.name not in WIRING}


def api_keywords(config_type) -> dict:
    """bv.api's keywords for a stage, each at its default (as bv.api.stages._config takes them)."""
    from bv.api.stages import api_keywords as names

    return {name: api_default(config_type, name) for name in names(config_type)}


@pytest.mark.parametrize(
    ("command", "config_type", "values"), [(rollout, RolloutConfig, ROLLOUT), (judge, JudgeConfig, JUDGE)]
)
def test_every_option_is_a_keyword_of_the_api(command, config_type, values):
    missing = settings_of(command) - set(api_keywords(config_type)) - {"ordered"}  # always in order
    assert not missing, f"bv {command.name} options without a bv.api keyword: {missing}"
    untested = settings_of(command) - set(values) - {"ordered", "templates", "exec_cmd"}
    assert not untested, f"add {untested} to this test's values"


@pytest.mark.parametrize(("command", "config_type"), [(rollout, RolloutConfig), (judge, JudgeConfig)])
def test_both_faces_default_as_the_declaration_says(command, config_type, monkeypatch):
    """Every option's default is its setting's declared default (the cache: the default cache,
    which the command resolves from no --cache), and so is every bv.api keyword's."""
    for decl in declared(config_type).values():
        if decl.envvar:
            monkeypatch.delenv(decl.envvar, raising=False)
    options = {p.name: p for p in command.params if isinstance(p, click.Option)}
    with _parsed(command, []) as ctx:
        given = ctx.params
    for name, decl in declared(config_type).items():
        if name not in options:
            continue
        default, parsed = default_of(config_type, name), given[name]
        if decl.multiple:
            assert tuple(parsed or ()) == tuple(default), name
        elif name == "cache":
            assert parsed is None and decl.api_default == DEFAULT_CACHE
        else:
            assert parsed == default, (name, parsed, default)
        assert options[name].help == decl.help and "/".join(options[name].opts) == "/".join(decl.flags)
    keywords = api_keywords(config_type)
    assert keywords["quiet"] is True and keywords["cache"] == DEFAULT_CACHE  # a library is quiet
    assert {k: v for k, v in keywords.items() if k not in ("quiet", "cache")} == {
        k: default_of(config_type, k) for k in keywords if k not in ("quiet", "cache")
    }


def test_an_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError, match=r"unexpected keyword.*max_tokns"):
        api.rollout([], backend="chance", max_tokns=5)
    with pytest.raises(TypeError, match="ordered"):  # the API's rows always come in input order
        api.rollout([], backend="chance", ordered=False)


def write_prices(path: Path) -> None:
    """The models of ROLLOUT and JUDGE priced, batch rates included (`max_cost` under `batch`)."""
    rates = {"input": 1.0, "output": 2.0, "batch": 0.5}
    path.write_text(json.dumps({"gpt-4o": rates, "gpt-4o-mini": rates}))


def _parsed(command: click.Command, argv: list[str]) -> click.Context:
    return command.make_context(command.name, argv, resilient_parsing=False)


def _settings(ctx: click.Context) -> dict:
    return {k: v for k, v in ctx.params.items() if k not in ("inputs", "dry_run", "skip_bad")}


def test_rollout_options_and_keywords_build_equal_configs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_prices(tmp_path / "prices.json")
    argv = [word for _, words in ROLLOUT.values() for word in words] + ["--ordered"]  # as the API's
    keywords = {name: value for name, (value, _) in ROLLOUT.items()}
    with running(), _parsed(rollout, argv) as ctx:
        from_cli = rollout_config(_settings(ctx), dry_run=False)
        from_api = api._rollout_config(**keywords)
    assert from_cli == from_api and from_cli.settings == from_api.settings
    endpoint = from_cli.backend_config["endpoint"]
    assert endpoint == from_api.backend_config["endpoint"]
    assert (endpoint.connect_timeout, endpoint.first_byte_timeout, endpoint.read_timeout) == (4, 20, 25)
    assert (from_cli.settings.rate_limit_patience, from_cli.settings.stall_notice) == (120, 12)
    assert endpoint.cache_scope == "endpoint"
    assert from_cli.request.body == {
        "max_tokens": 77,
        "temperature": 0.5,
        "seed": 11,
        "max_pixels": 4096,
        "extra_body": {"top_k": 20, "mode": "x"},
    }  # the seed goes in the request from both faces


def test_judge_options_and_keywords_build_equal_configs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_prices(tmp_path / "prices.json")
    argv = [word for _, words in JUDGE.values() for word in words]
    keywords = {name: value for name, (value, _) in JUDGE.items()}
    with running(), _parsed(judge, argv) as ctx:
        from_cli = config_of(JudgeConfig, _settings(ctx), dry_run=False)
        from_api = api._judge_config(**keywords)
    assert from_cli == from_api and from_cli.endpoint is not None
    assert from_cli.settings == from_api.settings and from_cli.endpoint == from_api.endpoint
    endpoint = from_cli.endpoint
    assert endpoint.cache_scope == "endpoint"
    assert (endpoint.connect_timeout, endpoint.first_byte_timeout, endpoint.read_timeout) == (4, 20, 25)
    assert (from_cli.settings.rate_limit_patience, from_cli.settings.stall_notice) == (120, 12)


@pytest.mark.parametrize(
    ("options", "refused"),
    [
        ("--backend chance -m gpt-4o --exec-cmd x", "does not use -m/--model, --exec-cmd"),
        ("--backend chance --base-url http://127.0.0.1:9/v1", "does not use --base-url"),
        ("--backend openai -m m --api-key k --exec-cmd x", "does not use --exec-cmd"),
        (
            "--backend chance --connect-timeout 3 --read-timeout 9",
            "does not use --connect-timeout, --read-timeout",
        ),
        (
            "--backend exec --exec-cmd 'true {prompt}' --first-byte-timeout 5",
            "does not use --first-byte-timeout",
        ),
        ("--backend chance --api-key sk-0123456789", "does not use --api-key"),
        ("--backend exec", "needs --exec-cmd TEMPLATE"),
        ("--backend exec --exec-cmd 'no-such-agent-xyz {prompt}'", "from --exec-cmd cannot be run"),
        (
            "--backend exec -m m --base-url http://127.0.0.1:9/v1 --exec-cmd 'true {prompt}'",
            "does not use --base-url",
        ),
    ],
)
def test_a_setting_the_backend_does_not_use_is_refused(tmp_path, options, refused):
    result = bv_inproc(f"bv rollout {options}", cwd=tmp_path, input="")
    assert result.returncode == 2 and refused in result.stderr and "Usage:" in result.stderr, result.stderr


def test_a_setting_from_the_environment_a_backend_does_not_use_is_not_refused(tmp_path, sample_dir):
    """BV_MODEL is a default for the backends that take a model, not a request to the chance one."""
    prompts = bv_inproc(f"bv prompt {sample_dir / 'meta_data.jsonl'} --limit 2").stdout
    result = bv_inproc("bv rollout --backend chance --no-cache", input=prompts, env={"BV_MODEL": "gpt-4o"})
    assert result.returncode == 0, result.stderr


def test_the_api_refuses_what_the_backend_does_not_use_in_its_own_words():
    with pytest.raises(BadConfig, match="the chance backend does not use `model`") as raised:
        api.rollout([], backend="chance", model="gpt-4o")
    assert raised.value.option == "model"
    with pytest.raises(BadConfig, match="`params` gives seed as well as `seed`"):
        RequestParams(seed=1, params={"seed": 2})


def test_the_chance_seed_is_sent_and_recorded_alike(sample_dir):
    prompts = list(api.prompt([], image_root=sample_dir))  # none needed: the config says it
    assert prompts == []
    config = RolloutConfig(backend="chance", request=RequestParams(seed=5))
    assert config.request.body == {"seed": 5} and config.backend_config == {"seed": 5}


def test_library_messages_name_settings_and_the_cli_names_options(tmp_path: Path):
    from bv.engine.endpoints import BadEndpoint, check_base_url

    with pytest.raises(BadEndpoint, match=r"^`base_url` 'localhost:8000/v1' needs an http"):
        check_base_url("localhost:8000/v1")
    result = bv_inproc("bv rollout -m m --base-url localhost:8000/v1", cwd=tmp_path, input="")
    assert result.returncode == 2 and "--base-url 'localhost:8000/v1' needs an http" in result.stderr
    assert "`" not in result.stderr.split("Error:")[-1]


# Library strings that name a command line's flags on purpose, each with why.
FLAGS_KEPT = {
    "bv/engine/backends/exec_agent.py": "the example template's own flags are codex's (--image, ...)",
    "bv/engine/backends/exec_names.py": "an agent command line's own flags (env --chdir, -m/--model)",
    "bv/reporting/tally.py": "the report's documented `accuracy_over` value (--exclude-failed)",
    "bv/optimize/report.py": "report.md's heading records the command that made it (bv optimize --search)",
}


def test_library_messages_name_no_flags():
    """Below bv/cli, a message names a setting (`base_url`), never an option (--base-url): the
    command line says it as its option (bv.cli.common.cli_words), bv.api as its keyword. A
    setting's declaration names its flags and help, as the one place that says them."""
    import ast
    import re

    flag = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*|(?<![\w`])-[a-zA-Z]/--")
    root = ROOT
    found = []
    for path in sorted((root / "bv").rglob("*.py")):
        name = path.relative_to(root).as_posix()
        if name.startswith("bv/cli/") or name in FLAGS_KEPT:
            continue
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        declarations = {  # a setting's declaration (bv.core.settings.setting) holds its flags and help
            id(constant)
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setting"
            for constant in ast.walk(node)
        }
        found += [
            f"{name}:{node.lineno}: {node.value[:80]!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings | declarations
            and flag.search(node.value)
        ]
    assert not found, "library strings naming CLI flags (name the setting instead):\n" + "\n".join(found)


def test_a_library_message_said_on_the_command_line_names_the_options(tmp_path: Path, sample_dir):
    """bv.core.outcome.say words a message as the running command's options; bv.api keeps settings."""
    from bv.core.run_context import worded

    with running():
        assert worded("lower `max_pixels`") == "lower `max_pixels`"  # the library's own words
    prompts = bv_inproc(f"bv prompt {sample_dir / 'meta_data.jsonl'} --ids nope")
    assert prompts.returncode == 1 and "bv prompt: error: --ids: no item matches 'nope'" in prompts.stderr


# bv eval and bv.api.evaluate: the same options record the same run (config.json) and make the same rows.
EVAL_OPTIONS = (
    "--style official --image-detail low --sample 6 --sample-seed 3 --limit 4 --repeats 2 --max-turns 2"
    " --max-tokens 77 --temperature 0.5 --seed 11 -p top_k=20 --max-pixels 4096"
    " --judge-param reasoning_effort=minimal --judge-param max_tokens=9"
    " -j 3 --retries 1 --timeout 30 --max-cost 5 --batch --skip-bad"
)
EVAL_KEYWORDS = {
    "style": "official",
    "image_detail": "low",
    "sample": 6,
    "sample_seed": 3,
    "limit": 4,
    "repeats": 2,
    "max_turns": 2,
    "max_tokens": 77,  # the command's names, made one RequestParams as the command makes it
    "temperature": 0.5,
    "seed": 11,
    "max_pixels": 4096,
    "extra_body": {"top_k": 20},
    "judge_params": {"reasoning_effort": "minimal", "max_tokens": 9},  # --max-cost with --batch needs it
    "jobs": 3,
    "retries": 1,
    "timeout": 30.0,
    "max_cost": 5.0,
    "batch": True,
    "skip_bad": True,
}


@pytest.fixture
def prices(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(RATES))
    return path


def _evaluate(sample_dir, url, out, **keywords):
    return api.evaluate(
        sample_dir / "meta_data.jsonl",
        out,
        model="m",
        base_url=url,
        api_key="sk-test",
        mode="llm",
        judge_model="judge-m",
        judge_base_url=url,
        cache=out.parent / "cache.sqlite",
        quiet=False,  # the command's default
        **keywords,
    )


def _recorded(out) -> dict:
    options = json.loads((out / "config.json").read_text())["options"]
    return {k: v for k, v in options.items() if k not in ("out", "cache")}


def test_eval_options_and_keywords_record_the_same_run_and_rows(sample_dir, batches, prices, tmp_path):
    def respond(line: dict) -> Reply:  # the target boxes its answer only when asked again
        body = line["body"]
        boxed = "\\boxed{A}" if len(body["messages"]) > 1 else "A, I think"
        return Reply(content="True" if is_judge(body) else boxed, usage=(1000, 500))

    batches.responder = respond
    cli_out, api_out = tmp_path / "cli" / "run", tmp_path / "api" / "run"
    by_cli = bv_inproc(
        eval_command(sample_dir, batches.base_url, cli_out, f"--prices {prices} {EVAL_OPTIONS}")
    )
    assert by_cli.returncode == 0, by_cli.stderr
    result = _evaluate(sample_dir, batches.base_url, api_out, prices=prices, **EVAL_KEYWORDS)
    assert result.status == 0 and result.row_count == 8, result.stopped
    assert _recorded(cli_out) == _recorded(api_out)
    assert _recorded(api_out)["prices"] == str(prices) and _recorded(api_out)["batch"] is True
    assert batches.chats == 0 and batches.creations == 2 * 3  # each face: rollout, refinements, judge
    rows = [jsonl((out / "results.jsonl").read_text()) for out in (cli_out, api_out)]
    assert [comparable(r) for r in rows[0]] == [comparable(r) for r in rows[1]]
    assert all(len(r["turns"]) == 2 and r["hard"] == 1 for r in rows[1])
    # at batch rates (half): two turns each, and the judge's reply
    assert all(r["cost_usd"] == pytest.approx(2 * ROLLOUT_REPLY / 2) for r in rows[1])
    assert all(r["judge_cost_usd"] == pytest.approx(JUDGE_REPLY / 2) for r in rows[1])
    assert result.spent_usd == pytest.approx(
        8 * 2 * ROLLOUT_REPLY / 2 + 4 * JUDGE_REPLY / 2
    )  # 4 judge requests


def test_eval_s_cost_limit_stops_both_faces_alike(sample_dir, server, prices, tmp_path):
    priced(server)
    cli_out, api_out = tmp_path / "cli" / "run", tmp_path / "api" / "run"
    limit = 5 * ROLLOUT_REPLY
    by_cli = bv_inproc(
        eval_command(
            sample_dir, server.base_url, cli_out, f"-j 1 --retries 0 --prices {prices} --max-cost {limit}"
        )
    )
    result = _evaluate(sample_dir, server.base_url, api_out, jobs=1, retries=0, prices=prices, max_cost=limit)
    assert by_cli.returncode == result.status == 130
    assert (
        result.stopped == f"stopped at the cost limit (${limit:.2f} spent of ${limit:g}) during the rollout"
    )
    assert result.stopped in by_cli.stderr
    assert result.spent_usd == pytest.approx(limit)  # -j 1: exactly the fifth reply, none after
    assert len(server.seen) == 2 * 5  # five requests from each face
    assert _recorded(cli_out) == _recorded(api_out) and _recorded(api_out)["max_cost"] == limit


def test_bv_optimize_s_options_and_keywords_default_as_declared():
    """bv optimize's options (the loop's, the optimizer's, the test judge's too) and
    bv.api.optimize's keywords take the defaults OptimizeSettings declares, the flags and help too."""
    from bv.api.stages import api_keywords as names
    from bv.cli.optimize_command import optimize
    from bv.optimize.setup import OptimizeSettings

    options = {p.name: p for p in optimize.params if isinstance(p, click.Option)}
    settings = declared(OptimizeSettings)
    assert {
        "ratio",
        "split_seed",
        "batch_size",
        "alpha",
        "test_judge_model",
        "optimizer_model",
        "search",
    } <= set(settings)
    assert not {"seed", "max_pixels"} & set(options)  # the target's further request fields: bv.api's
    for name, decl in settings.items():
        if name not in options:
            continue
        option, default = options[name], default_of(OptimizeSettings, name)
        assert "/".join(option.opts) == "/".join(decl.flags) and option.help in (decl.help, option.help), name
        if not decl.multiple and default not in (None, dataclasses.MISSING):  # None: no click default
            assert option.default == default, (name, option.default, default)
    keywords = {name: api_default(OptimizeSettings, name) for name in names(OptimizeSettings)}
    assert keywords["ratio"] == "2:2:6" and keywords["batch_size"] == 64 and keywords["quiet"] is True
    with pytest.raises(TypeError, match="`seed` is now `split_seed`"):  # for one release, as --seed
        api.plan_optimize("items.jsonl", skill="s.md", out="o", optimizer_model="m", seed=1)
