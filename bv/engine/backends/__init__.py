"""Backends: one small interface, `await backend.complete(messages, **params) -> Reply`.

A backend turns chat messages (images as `file://` URLs, see bv.core.images) into one reply. It
raises bv.engine.retry's Transient, ItemFailure or Fatal, so retries, caching and concurrency live
once, in bv.engine.caller, for every backend. Backends are chosen by name with `make_backend`;
each module is imported only when chosen, so `bv --help` never loads an HTTP client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from bv.core.records import ReplyFields


@dataclass
class Reply:
    """One model reply, as recorded per turn and stored in the cache. Beside the content: the
    reasoning the endpoint returned (any of its field names, or `<think>` blocks in the content;
    bv.engine.backends.replies), a refusal, and what a content filter said."""

    content: str
    finish_reason: str | None = None
    # prompt_tokens, completion_tokens; reasoning_tokens, cached_tokens when the server gives them
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0
    model: str | None = None  # as the server named it
    reasoning: str | None = None
    reasoning_details: list[dict[str, Any]] | None = None  # OpenRouter's entries, as sent
    refusal: str | None = None
    content_filter: str | None = None  # which categories a content filter stopped the reply for
    batch: bool = False  # it came from a Batch API job (bv.engine.batch): priced at batch rates
    batch_conflicts: int = 0  # the batch's other result lines for its request that said otherwise
    image_opened: bool | None = None  # an agent's transcript shows it opening the image (or not)
    # The endpoint that made a reply read from the cache (None: made by this run, or cached by a
    # bv that did not record it): rows say where a reply came from, not where this run points.
    endpoint: str | None = None

    def to_json(self) -> ReplyFields:
        fields: ReplyFields = {
            "content": self.content,
            "finish_reason": self.finish_reason,
            "usage": self.usage,
            "latency_s": round(self.latency_s, 4),
            "model": self.model,
        }
        if self.reasoning is not None:
            fields["reasoning"] = self.reasoning
        if self.reasoning_details:
            fields["reasoning_details"] = self.reasoning_details
        if self.refusal is not None:
            fields["refusal"] = self.refusal
        if self.content_filter is not None:
            fields["content_filter"] = self.content_filter
        if self.batch:
            fields["batch"] = True
        if self.batch_conflicts:
            fields["batch_conflicts"] = self.batch_conflicts
        if self.image_opened is not None:
            fields["image_opened"] = self.image_opened
        if self.endpoint is not None:
            fields["endpoint"] = self.endpoint
        return fields

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Reply:
        return cls(
            content=data.get("content") or "",
            finish_reason=data.get("finish_reason"),
            usage=data.get("usage") or {},
            latency_s=data.get("latency_s") or 0.0,
            model=data.get("model"),
            reasoning=data.get("reasoning"),
            reasoning_details=data.get("reasoning_details"),
            refusal=data.get("refusal"),
            content_filter=data.get("content_filter"),
            batch=data.get("batch") is True,
            batch_conflicts=data["batch_conflicts"] if type(data.get("batch_conflicts")) is int else 0,
            image_opened=data["image_opened"] if isinstance(data.get("image_opened"), bool) else None,
            endpoint=data.get("endpoint") if isinstance(data.get("endpoint"), str) else None,
        )


class Backend(Protocol):
    name: str
    model: str
    endpoint: str | None  # where replies come from, as rows record it; never a secret
    # What the cache key records of where replies come from: not which replicas of a model served
    # (docs/rollout.md); None when the model name says it all.
    cache_scope: str | None
    cacheable: bool  # False for backends whose replies cost nothing to recompute

    async def complete(self, messages: list[dict[str, Any]], **params: Any) -> Reply: ...

    async def aclose(self) -> None: ...


def endpoint_of(backend: Backend) -> str:
    """Where a backend's replies come from, fit to record (rows, the cache): the public URL (no
    credentials, no query), the agent program and a hash of its command template for exec, the
    backend's name otherwise."""
    return backend.endpoint or backend.name


class BackendBase:
    """What a backend class carries beside `complete`: its `name` (what `--backend` takes), the
    rollout `settings` it uses of those only some backends use (any other given is refused), and
    how it is built from a rollout's config. A third-party backend subclasses it (docs/backends.md)."""

    name: ClassVar[str]
    settings: ClassVar[tuple[str, ...]] = ("model",)
    model: str
    endpoint: str | None = None
    cache_scope: str | None = None
    cacheable: bool = True  # its replies go to the reply cache, keyed by name, model and cache_scope

    @classmethod
    def config_from(cls, rollout: Any) -> dict[str, Any]:
        """The keywords the class (or its `from_config`) is built with, from a rollout's config (a
        bv.stages.rollout_config.RolloutConfig, typed Any: the engine stands below the stages);
        BadConfig for settings that cannot work here."""
        return {name: getattr(rollout, name) for name in cls.settings}

    async def aclose(self) -> None:
        pass


def make_backend(name: str, **config: Any) -> Backend:
    """Build the backend called `name` from its configuration (what its `config_from` gives;
    bv.stages.rollout_config.RolloutConfig builds it from settings). A key the backend does not
    take is refused, never dropped in silence."""
    import inspect

    from bv.engine.backends.plugins import backend_class

    cls = backend_class(name)
    build = getattr(cls, "from_config", cls)
    parameters = inspect.signature(build).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        unknown = sorted(set(config) - set(parameters))
        if unknown:
            raise ValueError(f"backend {name!r} takes no {', '.join(unknown)}")
    backend: Backend = build(**config)
    return backend
