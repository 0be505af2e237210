"""How bv's generic request options are spelled for an endpoint: one table, provider x model family.

bv's options are generic (`--max-tokens`, `--temperature`, the LLM judge's default temperature 0);
endpoints disagree on them. OpenAI's and Azure's reasoning models (o1, o3, o4-mini, gpt-5…) refuse
`max_tokens` ("Use 'max_completion_tokens' instead") and every temperature but the default 1;
vLLM, SGLang and most servers take `max_tokens`. `RULES` says, for each provider and model-name
family, how `--max-tokens` is sent and whether a temperature is accepted; the first row that
matches decides. BV_PARAM_RULES puts the user's rows first (docs/backends.md). Options the user
spells out (`-p KEY=VALUE`, `--judge-param`) are sent as written: the table spells only bv's own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bv.core.errors import BadConfig

# Request parameters bv itself reads: which run, how to prepare images, extra body fields.
# Every other parameter (max_tokens, temperature, seed, …) is the model API's. All of them are
# recorded in each row's `params` and hashed into the cache key.
BV_PARAMS = ("run", "max_pixels", "extra_body")

PROVIDERS = ("openai", "azure", "openrouter", "compatible")  # compatible: vLLM, SGLang, LiteLLM, …
REASONING = ("o1*", "o3*", "o4*", "gpt-5*")  # OpenAI's reasoning families, by model name


@dataclass(frozen=True)
class ParamRule:
    """How one family of models on one provider takes bv's generic options."""

    family: str  # in words, for messages and docs
    provider: str  # one of PROVIDERS, or "*"
    models: tuple[str, ...]  # globs on the model name's last `/` segment, lower case
    max_tokens_as: str = "max_tokens"  # the body field `--max-tokens` is sent as
    temperature: bool = True  # False: only the default (1) is accepted, so no default is sent
    source: str = ""

    def matches(self, provider: str, model: str) -> bool:
        name = model_key(model)
        return self.provider in ("*", provider) and any(fnmatchcase(name, glob) for glob in self.models)


RULES = (
    ParamRule(
        "OpenAI reasoning model",
        "openai",
        REASONING,
        "max_completion_tokens",
        False,
        "platform.openai.com/docs/guides/reasoning; the API's 400 unsupported_parameter / unsupported_value",
    ),
    ParamRule(
        "Azure OpenAI reasoning model",
        "azure",
        REASONING,
        "max_completion_tokens",
        False,
        "learn.microsoft.com/azure/ai-foundry/openai/how-to/reasoning"
        " (not supported: temperature, max_tokens)",
    ),
    ParamRule(
        "OpenAI reasoning model through OpenRouter",
        "openrouter",
        REASONING,
        "max_tokens",
        False,
        "openrouter.ai/docs/api-reference/parameters (max_tokens, mapped per provider)",
    ),
    ParamRule(
        "OpenAI reasoning model on another server: LiteLLM, a gateway",
        "compatible",
        REASONING,
        "max_completion_tokens",
        False,
        "LiteLLM's o-series and gpt-5 configs (max_tokens mapped, temperature != 1 refused);"
        " vLLM and SGLang also take max_completion_tokens",
    ),
    ParamRule("any other model", "*", ("*",), "max_tokens", True, "the Chat Completions API"),
)

ENV = "BV_PARAM_RULES"


class BadRules(BadConfig):
    """BV_PARAM_RULES cannot be read (the command line exits 2, before any work)."""


def model_key(model: str) -> str:
    """What the table matches: the model name's last `/` segment, lower case (`openai/gpt-5-mini`
    on OpenRouter or LiteLLM is `gpt-5-mini`)."""
    return model.rsplit("/", 1)[-1].strip().lower()


def provider_of(kind: str, base_url: str | None) -> str:
    """The provider an endpoint is, from the backend and the base URL's host."""
    if kind == "azure":
        return "azure"
    host = (urlsplit(base_url or "").hostname or "").lower()
    if host == "api.openai.com":
        return "openai"
    if host.endswith((".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")):
        return "azure"  # Azure's OpenAI-compatible v1 API, through --backend openai
    if host == "openrouter.ai" or host.endswith(".openrouter.ai"):
        return "openrouter"
    return "compatible"


def rule_for(provider: str, model: str, user: tuple[ParamRule, ...] = ()) -> ParamRule:
    """The first rule (the user's, then bv's) for this provider and model."""
    return next(rule for rule in (*user, *RULES) if rule.matches(provider, model))


def user_rules(text: str | None) -> tuple[ParamRule, ...]:
    """The user's rows from BV_PARAM_RULES: a JSON object (or the path of a file holding one)
    mapping a model-name glob to the model whose rules it takes (`{"my-o3-deployment": "o3"}`) or
    to a rule (`{"my-judge": {"max_tokens_as": "max_completion_tokens", "temperature": false}}`)."""
    if not text:
        return ()
    source = text
    if not text.lstrip().startswith(("{", "[")):
        try:
            source = Path(text).expanduser().read_text()
        except OSError as exc:
            raise BadRules(f"{ENV}: cannot read {text!r} ({exc.strerror or exc})") from None
    try:
        table = json.loads(source)
    except ValueError as exc:
        raise BadRules(f"{ENV} is not JSON: {exc}") from None
    if not isinstance(table, dict):
        raise BadRules(f'{ENV} must be a JSON object of model-name globs, e.g. {{"my-deployment": "o3"}}')
    return tuple(_user_rule(str(glob), value) for glob, value in table.items())


def _user_rule(glob: str, value: Any) -> ParamRule:
    models = (model_key(glob),)
    if isinstance(value, str):
        like = rule_for("openai", value)  # "as the model VALUE is on OpenAI"
        return ParamRule(
            f"{glob} (as {value}, by {ENV})", "*", models, like.max_tokens_as, like.temperature, ENV
        )
    if not isinstance(value, dict) or set(value) - {"max_tokens_as", "temperature"}:
        raise BadRules(
            f"{ENV}: {glob!r} must map to a model name or to"
            ' {"max_tokens_as": "max_completion_tokens" | "max_tokens", "temperature": true | false}'
        )
    spelled = value.get("max_tokens_as", "max_tokens")
    temperature = value.get("temperature", True)
    if spelled not in ("max_tokens", "max_completion_tokens") or not isinstance(temperature, bool):
        raise BadRules(
            f"{ENV}: {glob!r}: max_tokens_as is max_tokens or max_completion_tokens, temperature a boolean"
        )
    return ParamRule(f"{glob} (by {ENV})", "*", models, spelled, temperature, ENV)


def body_fields(params: Mapping[str, Any], rule: ParamRule) -> dict[str, Any]:
    """The request body's fields besides model and messages: bv's generic options spelled by the
    rule, then the user's own fields (`extra_body`, from -p or --judge-param) as written."""
    fields = {
        (rule.max_tokens_as if key == "max_tokens" else key): value
        for key, value in params.items()
        if key not in BV_PARAMS and value is not None
    }
    fields.update(params.get("extra_body") or {})
    return fields


def with_defaults(defaults: Mapping[str, Any], rule: ParamRule) -> dict[str, Any]:
    """bv's default parameters (the judge's temperature 0) that this model accepts."""
    return {key: value for key, value in defaults.items() if key != "temperature" or rule.temperature}


def temperature_warning(rule: ParamRule, model: str, temperature: float | None) -> str | None:
    """A warning for a temperature the user asked of a model that takes only the default (it is
    sent as asked: gpt-5.1 takes one with reasoning_effort "none")."""
    if temperature is None or temperature == 1 or rule.temperature:
        return None
    return (
        f"{model} ({rule.family}) takes only the default temperature (1): the endpoint will likely"
        f" refuse `temperature` {temperature:g}; drop it (or tell bv otherwise with {ENV})"
    )


def advice(status_error: Mapping[str, Any], model: str, rule: ParamRule, role: str) -> str:
    """What to change, for a 400 that names a parameter the model refuses or a model the server
    does not know ("" when it names neither). `status_error` is the body's `error` object."""
    param = str(status_error.get("param") or "")
    code = str(status_error.get("code") or "")
    message = str(status_error.get("message") or "").lower()
    judge = role == "judge"
    remap = f"""{ENV}='{{"{model}": "o3"}}'"""
    if param == "max_tokens" or "max_completion_tokens" in message:
        return (
            f"; {model} wants max_completion_tokens (bv took it for: {rule.family}):"
            f" tell bv its family with {remap}"
            f" (bv then sends `max_tokens` as max_completion_tokens), or give `extra_body`"
            " max_completion_tokens=N instead of `max_tokens`"
        )
    if param == "temperature" or ("temperature" in message and "unsupported" in message):
        if judge:
            return (
                f"; {model} takes only the default temperature: give `judge_params` temperature=1,"
                f" or tell bv its family with {remap} (bv then sends no temperature)"
            )
        return f"; {model} takes only the default temperature: drop `temperature` (or `extra_body` one)"
    if code in ("unsupported_parameter", "unsupported_value") or "unsupported param" in message:
        option = "`judge_params`" if judge else "`extra_body`"
        return f"; {model} refuses {param or 'a parameter'}: drop it from {option}"
    unknown = "does not exist" in message or "invalid model" in message
    if code == "model_not_found" or ("model" in message and unknown):
        option = "`judge_model`" if judge else "`model`"
        return f"; check {option} (bv models lists what the endpoint serves)"
    return ""
