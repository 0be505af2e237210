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
from bv.engine.backends.plugins import BUILT_IN, backend_class
from bv.engine.caller import RunSettings
from bv.engine.prices import check_priced, first_url, price_book
from bv.stages.request_params import RequestParams
from bv.stages.request_settings import RequestSettings

# The settings of a rollout that only some backends use: each backend class names those it uses
# (its `settings`), and giving one to another backend is refused (never dropped in silence). Every
# other setting means the same for every backend: the request parameters are sent (or, for exec
# and chance, recorded in each row and its cache key) alike.
BACKEND_ONLY = (
    "model",
    "base_url",
    "api_key",
    "connect_timeout",
    "first_byte_timeout",
    "read_timeout",
    "exec_cmd",
    "keep_workdirs",
)


def backend_settings(name: str) -> tuple[str, ...]:
    """The backend-only settings the backend called `name` uses (its class imported now);
    BadConfig for an unknown backend, a plugin that cannot load, or one naming another setting."""
    used: tuple[str, ...] = tuple(backend_class(name).settings)
    others = [setting for setting in used if setting not in BACKEND_ONLY]
    if others:
        raise BadConfig(
            f"the {name} backend names {', '.join(others)} among its `settings`; a backend may use"
            f" {', '.join(BACKEND_ONLY)}",
            option="backend",
        )
    return used


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
        metavar="[" + "|".join(BUILT_IN) + "|PLUGIN]",
        show_default=True,
        envvar="BV_BACKEND",
        show_envvar=True,
        help="Where requests go: an OpenAI-compatible API, Azure OpenAI, an external agent CLI (exec),"
        " the offline chance baseline, or a backend an installed plugin package provides (docs/backends.md).",
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
        used = backend_settings(self.backend)
        unused = [name for name in BACKEND_ONLY if name not in used and self._given(name)]
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
        object.__setattr__(self, "backend_config", backend_class(self.backend).config_from(self))
        endpoint = self.backend_config.get("endpoint")
        if endpoint is not None:  # an HTTP endpoint's tokens are priced; other backends say their own usage
            check_priced(book, self.max_cost, endpoint.model, first_url(endpoint.public), self.batch)

    def _given(self, name: str) -> bool:
        """Whether a setting differs from its default (an empty one counts as not given)."""
        value, default = getattr(self, name), type(self).__dataclass_fields__[name].default
        return bool(value) and value != default

    @property
    def settings(self) -> RunSettings:
        """How the engine runs the stage."""
        return self.run_settings(ordered=self.ordered)

    @property
    def recorded_templates(self) -> dict[str, str]:
        """The replaced templates this rollout may render: refine.md, when there can be a second turn."""
        return self.templates.recorded("refine") if self.max_turns > 1 else {}
