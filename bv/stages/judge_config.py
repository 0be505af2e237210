"""The judge's one typed config, which both faces build (bv.cli from options, bv.api from keywords)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bv.core.errors import BadConfig
from bv.core.settings import body_fields, check, setting
from bv.core.stats import counted
from bv.core.templates import BV_TEMPLATES, Templates
from bv.engine.caller import RunSettings
from bv.engine.endpoints import Endpoint
from bv.engine.prices import check_priced, first_url, price_book
from bv.stages.request_settings import RequestSettings

MODES = ("auto", "rules", "llm")
PANEL_RULES = ("majority", "unanimous", "any")


def several(given: str | Iterable[str] | None) -> tuple[str, ...]:
    """A judge setting as either face gives it: one text, several (a panel), or none."""
    if given is None:
        return ()
    return (given,) if isinstance(given, str) else tuple(given)


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
    # one judge, or a panel: the i-th --judge-base-url and --judge-api-key are the i-th judge's
    # (one of them: every judge's); held as tuples once checked
    judge_model: tuple[str, ...] = setting(
        (),
        "--judge-model",
        multiple=True,
        convert=several,
        envvar="BV_JUDGE_MODEL",
        show_envvar=True,
        help="LLM judge model; give it several times for a panel of judges (--panel).",
    )
    judge_base_url: tuple[str, ...] = setting(
        (),
        "--judge-base-url",
        multiple=True,
        convert=several,
        envvar="BV_JUDGE_BASE_URL",
        show_envvar=True,
        help="LLM judge endpoint (with a panel: one for all, or one per --judge-model, in order).",
    )
    judge_api_key: tuple[str, ...] = setting(
        (),
        "--judge-api-key",
        multiple=True,
        convert=several,
        secret=True,
        help="LLM judge API key (with a panel: one for all, or one per --judge-model).  [env var:"
        " BV_JUDGE_API_KEY]",
    )
    panel: str = setting(
        "majority",
        "--panel",
        choices=PANEL_RULES,
        show_default=True,
        help="With several --judge-model: right when most judges say so (a tie is wrong), when all"
        " do (unanimous), or when any does; each judge's verdict is kept in the row (docs/judging.md).",
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
    calibrate: float | None = setting(
        None,
        "--calibrate",
        kind=float,
        low=0,
        high=1,
        metavar="SHARE",
        help="Also ask the LLM judge about this share of the rows the rules decide (e.g. 0.2), to"
        " measure its sensitivity and specificity and correct the accuracy of the rows it judges"
        " (bv report; docs/judging.md). --mode auto, one --judge-model.",
    )
    templates: Templates = BV_TEMPLATES
    # the LLM judges' endpoints, in the order of `judge_model`, when one may be asked
    endpoints: tuple[Endpoint, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        from bv.engine.endpoints import judge_endpoint

        check(self)
        models, urls, keys = (
            several(getattr(self, n)) for n in ("judge_model", "judge_base_url", "judge_api_key")
        )
        for name, values in (("judge_base_url", urls), ("judge_api_key", keys)):
            if len(values) > 1 and len(values) != len(models):
                raise BadConfig(
                    f"{len(models)} `judge_model` and {len(values)} `{name}`: give one for every judge,"
                    " or one for all",
                    option=name,
                )
        for name, values in (("judge_model", models), ("judge_base_url", urls), ("judge_api_key", keys)):
            object.__setattr__(self, name, values)
        if len(models) > 1 and self.batch:
            raise BadConfig("`batch` sends one LLM judge's requests: give one `judge_model`", option="batch")
        endpoints = []
        for index, model in enumerate(models):
            found = judge_endpoint(
                self.mode,
                model,
                urls[index if len(urls) > 1 else 0] if urls else None,
                keys[index if len(keys) > 1 else 0] if keys else None,
                **self.endpoint_waits(),
                sending=not self.dry_run,
            )
            if found is not None:
                endpoints.append(found)
        object.__setattr__(self, "endpoints", tuple(endpoints))
        if self.calibrate is not None and not (
            self.calibrate > 0 and self.mode == "auto" and len(endpoints) == 1
        ):
            raise BadConfig(
                "`calibrate` takes a share above 0, `mode` auto and one `judge_model` (the LLM judge"
                " it measures on rows the rules decided)",
                option="calibrate",
            )
        endpoint = self.endpoint
        if endpoint is None and self.mode == "llm":
            raise BadConfig(
                "`mode` llm needs a judge model: `judge_model` or BV_JUDGE_MODEL", option="judge_model"
            )
        if self.batch:
            from bv.engine.batch import check_batchable

            if endpoint is None:
                raise BadConfig("`batch` sends the LLM judge's requests: give `judge_model`", option="batch")
            check_batchable("openai", self.cache)
        limit_name = "`judge_params` max_tokens"
        book = price_book(self.prices, self.max_cost, self.batch, self.token_limit, limit_name)
        object.__setattr__(self, "price_book", book)
        for judge in self.endpoints:
            check_priced(book, self.max_cost, judge.model, first_url(judge.public), self.batch)

    @property
    def endpoint(self) -> Endpoint | None:
        """The (first) LLM judge's endpoint, when one may be asked."""
        return self.endpoints[0] if self.endpoints else None

    @property
    def token_limit(self) -> Any:
        """The most a judge reply may use, as its parameters say (None: no limit given)."""
        params = self.judge_params
        return params.get("max_tokens", params.get("max_completion_tokens"))

    @property
    def settings(self) -> RunSettings:
        """How the engine runs the stage: always in input order."""
        return self.run_settings(ordered=True)

    def undecided_notice(self, undecided: int) -> str | None:
        """What `auto` without a judge model says after judging when the rules left rows undecided
        (None when none were, or a judge model was given, or in the other modes)."""
        if not undecided or self.mode != "auto" or self.endpoint is not None:
            return None
        verb = "counts" if undecided == 1 else "count"
        return (
            f"{counted(undecided, 'row')} {verb} wrong: the rules could not decide them,"
            " and no LLM judge is configured. Give `judge_model` MODEL (or BV_JUDGE_MODEL)"
            " to judge them, or `mode` rules to judge by rules alone"
        )

    @property
    def rules_only(self) -> bool:
        """Whether no LLM judge is asked: `rules` mode, or `auto` without a judge model."""
        return self.endpoint is None
