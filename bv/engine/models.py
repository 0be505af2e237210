"""`bv models`: the models an endpoint serves (GET /v1/models), with the endpoint options of
`bv rollout`, so a model name can be checked before a run is paid for.

The endpoint is resolved by bv.engine.endpoints, as for rollout, and asked the way a rollout's 404 asks
it (bv.engine.endpoints.fetch_models): through aiohttp with the endpoint's headers, proxies from the
environment. What the server says is not trusted: the body is capped, ids are checked to be
short strings, the list is capped, and control characters are escaped before anything reaches
a terminal.
"""

from __future__ import annotations

from typing import Any

from bv.core import redaction
from bv.core.errors import Fatal
from bv.engine.endpoints import (
    CONNECT_TIMEOUT_S,
    MAX_MODELS,
    Endpoint,
    NoModelList,
    fetch_models,
    models_url,
    unlisted_hint,
)

ANY_MODEL = "*"  # what bv models gives bv.engine.endpoints.resolve, which asks every endpoint for a model


def _not_found_hint(url: str) -> str:
    path = url.rstrip("/")
    if path.endswith("/v1"):
        return "check the base URL"
    url = redaction.public_url(path)
    return f"OpenAI-compatible servers answer under /v1: did you mean `base_url` {url}/v1 ?"


def _refusal(exc: NoModelList, url: str, endpoint: Endpoint) -> Fatal:
    """Why a base URL's models could not be listed, in one line."""
    where = redaction.public_url(url)
    if exc.status in (401, 403):
        return Fatal(endpoint.key_refusal(where, exc.status))
    if exc.status == 404:
        return Fatal(f"{where}/models answered 404 (not found): {_not_found_hint(url)}")
    if exc.status is not None:
        return Fatal(f"{where}/models answered HTTP {exc.status}{unlisted_hint(exc.status)}")
    if exc.answered:
        return Fatal(f"{where}/models did not answer with a list of models")
    return Fatal(f"cannot reach {where} ({exc})")


async def _list(endpoint: Endpoint) -> list[dict[str, Any]]:
    import aiohttp

    models: list[dict[str, Any]] = []
    timeout = aiohttp.ClientTimeout(sock_connect=CONNECT_TIMEOUT_S, sock_read=endpoint.timeout)
    # trust_env: HTTP(S)_PROXY and NO_PROXY apply, as they do to the rollout's requests
    async with aiohttp.ClientSession(timeout=timeout, auto_decompress=False, trust_env=True) as session:
        for url in endpoint.base_url:
            try:
                listed = await fetch_models(session, endpoint, models_url(endpoint, url))
            except NoModelList as exc:
                raise _refusal(exc, url, endpoint) from None
            where = redaction.public_url(url)
            for model in listed[: MAX_MODELS - len(models)]:
                owned_by, created = model.get("owned_by"), model.get("created")
                models.append(
                    {
                        "id": model["id"],
                        "owned_by": owned_by if isinstance(owned_by, str) else None,
                        "created": created if isinstance(created, int) else None,
                        "endpoint": where,
                    }
                )
    return models


def list_models(endpoint: Endpoint) -> list[dict[str, Any]]:
    """Every model of every base URL of the endpoint: {id, owned_by, created, endpoint}; Fatal
    with the reason when one cannot be asked."""
    import asyncio

    return asyncio.run(_list(endpoint))
