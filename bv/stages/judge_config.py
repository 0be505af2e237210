"""The judge's one typed config, which both faces build (bv.cli from options, bv.api from keywords)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bv.core.errors import BadConfig
from bv.core.settings import body_fields, check, setting
from bv.core.templates import BV_TEMPLATES, Templates
from bv.engine.caller import RunSettings
from bv.engine.endpoints import Endpoint
from bv.engine.prices import check_priced, first_url, price_book
from bv.stages.request_settings import RequestSettings

MODES = ("auto", "rules", "llm")


@dataclass(frozen=True)
class JudgeConfig(RequestSettings):
    """Everything a judge run works with, checked when made: BadConfig for settings that cannot
    work (an unknown mode, `llm` without a judge model), Fatal for an LLM judge endpoint that
    cannot (resolved here, once, from the settings and the environment: bv.engine.endpoints).

    `mode`: rules (rules only), llm (every row to the LLM judge, the official protocol) or auto
    (rules, then the LLM judge for what they cannot decide, when a judge model is given)."""

    mode: str = setting(
        "auto",
        "--mode",
        choices=MODES,
        show_default=True,
        help="rules: rules only; llm: every item to the LLM judge (official protocol);"
        " auto: rules, then the LLM judge for what rules cannot decide.",
    )
    judge_model: str | None = setting(
        None, "--judge-model", envvar="BV_JUDGE_MODEL", show_envvar=True, help="LLM judge model."
    )
    judge_base_url: str | None = setting(
        None, "--judge-base-url", envvar="BV_JUDGE_BASE_URL", show_envvar=True, help="LLM judge endpoint."
    )
    judge_api_key: str | None = setting(
        None, "--judge-api-key", secret=True, help="LLM judge API key. [env var: BV_JUDGE_API_KEY]"
    )
    # judge request fields, sent as written
    judge_params: Mapping[str, Any] = setting(
        None,
        "--judge-param",
        factory=dict,
        multiple=True,
        convert=body_fields,
        metavar="KEY=VALUE",
        help="Extra field of the LLM judge's request body, as -p for rollout (e.g. --judge-param"
        " reasoning_effort=minimal). bv's default temperature 0 is sent only to models that accept it.",
    )
    templates: Templates = BV_TEMPLATES
    endpoint: Endpoint | None = field(init=False, repr=False)  # the LLM judge's, when one may be asked

    def __post_init__(self) -> None:
        from bv.engine.endpoints import judge_endpoint

        check(self)
        endpoint = judge_endpoint(
            self.mode,
            self.judge_model,
            self.judge_base_url,
            self.judge_api_key,
            **self.endpoint_waits(),
            sending=not self.dry_run,
        )
        if endpoint is None and self.mode == "llm":
            raise BadConfig(
                "`mode` llm needs a judge model: `judge_model` or BV_JUDGE_MODEL", option="judge_model"
            )
        if self.batch:
            from bv.engine.batch import check_batchable

            if endpoint is None:
                raise BadConfig("`batch` sends the LLM judge's requests: give `judge_model`", option="batch")
            check_batchable("openai", self.cache)
        object.__setattr__(self, "endpoint", endpoint)
        limit_name = "`judge_params` max_tokens"
        book = price_book(self.prices, self.max_cost, self.batch, self.token_limit, limit_name)
        object.__setattr__(self, "price_book", book)
        if endpoint is not None:
            check_priced(book, self.max_cost, endpoint.model, first_url(endpoint.public), self.batch)

    @property
    def token_limit(self) -> Any:
        """The most a judge reply may use, as its parameters say (None: no limit given)."""
        params = self.judge_params
        return params.get("max_tokens", params.get("max_completion_tokens"))

    @property
    def settings(self) -> RunSettings:
        """How the engine runs the stage: always in input order."""
        return self.run_settings(ordered=True)

    @property
    def no_judge_notice(self) -> str | None:
        """What `auto` without a judge model says before it judges (None when it has one, or in
        the other modes): undecided rows count wrong."""
        if self.mode != "auto" or self.endpoint is not None:
            return None
        return (
            "no LLM judge configured, so rows the rules cannot decide count wrong;"
            " give `judge_model` MODEL (or BV_JUDGE_MODEL), or `mode` rules to judge by rules only"
        )

    @property
    def rules_only(self) -> bool:
        """Whether no LLM judge is asked: `rules` mode, or `auto` without a judge model."""
        return self.endpoint is None
