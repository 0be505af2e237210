"""A rollout's one typed config, which both faces build (bv.cli from options, bv.api from
keywords); what its turns send is bv.stages.rollout_turns'."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bv.core.errors import BadConfig
from bv.core.settings import check, part, setting
from bv.core.templates import BV_TEMPLATES, Templates
from bv.engine.caller import RunSettings
from bv.engine.prices import check_priced, first_url, price_book
from bv.stages.request_params import RequestParams
from bv.stages.request_settings import RequestSettings

# The settings of a rollout that only some backends use; giving one to another backend is refused
# (never dropped in silence). Every other setting means the same for every backend: the request
# parameters are sent (or, for exec and chance, recorded in each row and its cache key) alike.
_HTTP = ("model", "base_url", "api_key", "connect_timeout", "first_byte_timeout", "read_timeout")
BACKEND_SETTINGS: dict[str, tuple[str, ...]] = {
    "openai": _HTTP,
    "azure": _HTTP,
    "exec": ("model", "api_key", "exec_cmd", "keep_workdirs"),
    "chance": (),
}
BACKEND_ONLY = tuple(dict.fromkeys(name for names in BACKEND_SETTINGS.values() for name in names))


def urls(given: str | Iterable[str]) -> tuple[str, ...]:
    """Endpoints as either face gives them: one URL, or several (replicas of one model)."""
    return (given,) if isinstance(given, str) else tuple(given)


def shard_of(given: str | tuple[int, int]) -> tuple[int, int]:
    """A shard as either face gives it: (k, n), or "K/N", "auto", "auto/N" (bv.core.environment)."""
    from bv.core.environment import shard_spec

    if isinstance(given, str):
        return shard_spec(given)
    return (int(given[0]), int(given[1]))


@dataclass(frozen=True)
class RolloutConfig(RequestSettings):
    """Everything a rollout runs with, checked when made: BadConfig for settings that cannot work
    (a setting the backend does not use, a parameter given twice), Fatal for an endpoint that
    cannot (resolved here, once, from the settings and the environment: bv.engine.endpoints).

    `request` is what every request carries besides its messages (bv.stages.request_params); how
    its requests are sent (concurrency, retries, the waits, the cache) is bv.stages.request_settings'."""

    backend: str = setting(
        "openai",
        "--backend",
        choices=tuple(BACKEND_SETTINGS),
        show_default=True,
        envvar="BV_BACKEND",
        show_envvar=True,
        help="Where requests go: an OpenAI-compatible API, Azure OpenAI, an external agent CLI (exec),"
        " or the offline chance baseline.",
    )
    model: str | None = setting(
        None, "-m", "--model", envvar="BV_MODEL", show_envvar=True, help="Model name (Azure: the deployment)."
    )
    base_url: tuple[str, ...] = setting(
        (),
        "--base-url",
        multiple=True,
        convert=urls,
        help="OpenAI-compatible endpoint; repeat for replicas of one model. [env var: OPENAI_BASE_URL]",
    )
    api_key: str | None = setting(
        None,
        "--api-key",
        secret=True,
        help="API key. [env var: OPENAI_API_KEY, or AZURE_OPENAI_API_KEY for azure]",
    )
    exec_cmd: str | None = setting(
        None,
        "--exec-cmd",
        metavar="TEMPLATE",
        help="For --backend exec: the agent command, with {workdir} {prompt} {image} {model} {last_message}"
        " {system} {system_toml} (docs/backends.md).",
    )
    request: RequestParams = part(RequestParams)  # max_tokens, temperature, seed, ...: sent alike
    repeats: int = setting(
        1,
        "--repeats",
        kind=int,
        low=1,
        high=1000,
        show_default=True,
        help="Roll out every item K times (run 0..K-1), e.g. 3 for Avg@3.",
    )
    max_turns: int = setting(
        1,
        "--max-turns",
        kind=int,
        low=1,
        high=20,
        show_default=True,
        help="Turns per item; a reply without \\boxed{} gets a refinement turn.",
    )
    # (k, n): only items whose id hashes to k modulo n
    shard: tuple[int, int] | None = setting(
        None,
        "--shard",
        convert=shard_of,
        metavar="K/N|auto",
        help="Only shard K of N (0-based; by a stable hash of the id), to split a run across machines;"
        " auto: K and N from a SLURM job array, auto/N: K from a Kubernetes Indexed Job (docs/scale.md).",
    )
    # each row's prompts and conversation under DIR/<run>/<id>/
    artifacts: Path | None = setting(
        None,
        "--artifacts",
        kind=Path,
        folder=True,
        help="Write each row's system prompt, user prompt and conversation.json (every message of every"
        " turn) under DIR/<run>/<id>/.",
    )
    templates: Templates = BV_TEMPLATES  # refinement turns render refine.md from here
    # rows in input order (bv.api always asks for it)
    ordered: bool = setting(
        False, "--ordered", kind=bool, help="Write rows in input order (default: as they finish)."
    )
    keep_workdirs: str | None = None  # exec: keep each turn's workspace under this folder
    backend_config: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.backend not in BACKEND_SETTINGS:
            raise BadConfig(
                f"unknown backend {self.backend!r}; known: {', '.join(BACKEND_SETTINGS)}", option="backend"
            )
        unused = [
            name for name in BACKEND_ONLY if name not in BACKEND_SETTINGS[self.backend] and self._given(name)
        ]
        if unused:
            names = ", ".join(f"`{name}`" for name in unused)
            raise BadConfig(f"the {self.backend} backend does not use {names}", option=unused[0])
        check(self)
        if self.shard is not None and not 0 <= self.shard[0] < self.shard[1]:
            raise BadConfig(f"`shard` {self.shard!r} is not (k, n) with 0 <= k < n", option="shard")
        book = price_book(self.prices, self.max_cost, self.batch, self.request.max_tokens)
        object.__setattr__(self, "price_book", book)
        if self.batch:
            from bv.engine.batch import check_batchable

            check_batchable(self.backend, self.cache)
        object.__setattr__(self, "base_url", tuple(self.base_url))
        object.__setattr__(self, "backend_config", self._backend_config())
        if self.backend in ("openai", "azure"):  # exec agents and chance say their own usage, or none
            endpoint = self.backend_config["endpoint"]
            check_priced(book, self.max_cost, endpoint.model, first_url(endpoint.public), self.batch)

    def _given(self, name: str) -> bool:
        """Whether a setting differs from its default (an empty one counts as not given)."""
        value, default = getattr(self, name), type(self).__dataclass_fields__[name].default
        return bool(value) and value != default

    def _backend_config(self) -> dict[str, Any]:
        """What bv.engine.backends.make_backend takes for this backend (an endpoint resolved now)."""
        if self.backend in ("openai", "azure"):
            from bv.engine.endpoints import resolve

            endpoint = resolve(
                self.backend,
                model=self.model,
                base_url=self.base_url,
                api_key=self.api_key,
                **self.endpoint_waits(),
                sending=not self.dry_run,
            )
            return {"endpoint": endpoint}
        if self.backend == "exec":
            from bv.engine.backends.exec_agent import agent_argv

            agent_argv(self.exec_cmd, self.model)  # a template that cannot run: BadConfig now
            return {
                "exec_cmd": self.exec_cmd,
                "model": self.model,
                "timeout": self.timeout,
                "api_key": self.api_key,
                "keep_workdirs": self.keep_workdirs,
            }
        return {"seed": self.request.seed}

    @property
    def settings(self) -> RunSettings:
        """How the engine runs the stage."""
        return self.run_settings(ordered=self.ordered)

    @property
    def recorded_templates(self) -> dict[str, str]:
        """The replaced templates this rollout may render: refine.md, when there can be a second turn."""
        return self.templates.recorded("refine") if self.max_turns > 1 else {}
