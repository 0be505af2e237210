"""`bv models`: the models an endpoint serves (GET /v1/models), with the endpoint options of
`bv rollout`, so a model name can be checked before a run is paid for.

The endpoint is resolved by bv.endpoints, as for rollout. What the server says is not trusted:
ids are checked to be short strings, the list is capped, and control characters are escaped
before anything reaches a terminal.
"""

from __future__ import annotations

from typing import Any

from bv import secrets
from bv.endpoints import Endpoint
from bv.errors import Fatal
from bv.terminal import printable

MAX_MODELS = 10_000
MAX_ID_CHARS = 300
ANY_MODEL = "*"  # what bv models gives bv.endpoints.resolve, which asks every endpoint for a model


def _client(endpoint: Endpoint, url: str) -> Any:
    import openai

    if endpoint.kind == "azure":
        return openai.AzureOpenAI(
            azure_endpoint=url,
            api_key=endpoint.api_key,
            api_version=endpoint.api_version,
            max_retries=0,
            timeout=endpoint.timeout_s,
        )
    return openai.OpenAI(
        base_url=url,
        api_key=endpoint.api_key or "no-key",
        organization=endpoint.organization,
        project=endpoint.project,
        max_retries=0,
        timeout=endpoint.timeout_s,
    )


def _not_found_hint(url: str) -> str:
    path = url.rstrip("/")
    if path.endswith("/v1"):
        return "check the base URL"
    return (
        f"OpenAI-compatible servers answer under /v1: did you mean --base-url {secrets.public_url(path)}/v1 ?"
    )


def list_models(endpoint: Endpoint) -> list[dict[str, Any]]:
    """Every model of every base URL of the endpoint: {id, owned_by, created, endpoint}; Fatal
    with the reason when one cannot be asked."""
    import openai

    models: list[dict[str, Any]] = []
    for url in endpoint.base_urls:
        where = secrets.public_url(url)
        client = _client(endpoint, url)
        try:
            for model in client.models.list():
                model_id = getattr(model, "id", None)
                if not isinstance(model_id, str) or not model_id or len(model_id) > MAX_ID_CHARS:
                    continue
                owned_by = getattr(model, "owned_by", None)
                created = getattr(model, "created", None)
                models.append(
                    {
                        "id": model_id,
                        "owned_by": owned_by if isinstance(owned_by, str) else None,
                        "created": created if isinstance(created, int) else None,
                        "endpoint": where,
                    }
                )
                if len(models) >= MAX_MODELS:
                    break
        except openai.APIStatusError as exc:
            status = exc.status_code
            if status in (401, 403):
                raise Fatal(f"{where} refused the API key (HTTP {status}): check --api-key") from None
            if status == 404:
                raise Fatal(f"{where}/models answered 404 (not found): {_not_found_hint(url)}") from None
            raise Fatal(f"{where}/models answered HTTP {status}") from None
        except openai.APIConnectionError as exc:
            cause = secrets.redact(str(exc.__cause__ or exc))[:160]
            raise Fatal(f"cannot reach {where} ({printable(cause)})") from None
        except (ValueError, TypeError, AttributeError):
            raise Fatal(f"{where}/models did not answer with a list of models") from None
        finally:
            client.close()
    return models
