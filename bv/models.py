"""`bv models`: the models an endpoint serves (GET /v1/models), with the endpoint options of
`bv rollout`, so a model name can be checked before a run is paid for.

What the server says is not trusted: ids are checked to be short strings, the list is capped,
and control characters are escaped before anything reaches a terminal.
"""

from __future__ import annotations

import os
import re
from typing import Any

from bv import secrets
from bv.errors import Fatal

MAX_MODELS = 10_000
MAX_ID_CHARS = 300
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str) -> str:
    """Text for a terminal line: control characters shown as escapes, never sent raw."""
    return _CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _client(kind: str, url: str, api_key: str | None, timeout: float) -> Any:
    import openai

    if kind == "azure":
        return openai.AzureOpenAI(
            azure_endpoint=url,
            api_key=api_key,
            api_version=os.environ.get("AZURE_OPENAI_API_VERSION"),
            max_retries=0,
            timeout=timeout,
        )
    return openai.OpenAI(base_url=url, api_key=api_key or "no-key", max_retries=0, timeout=timeout)


def endpoint_urls(kind: str, base_urls: tuple[str, ...], api_key: str | None) -> tuple[list[str], str | None]:
    """The URLs and key to ask, from the options and the environment, as `bv rollout` reads them."""
    if kind == "azure":
        urls = list(base_urls) or [os.environ.get("AZURE_OPENAI_ENDPOINT", "")]
        api_key = api_key or os.environ.get("AZURE_OPENAI_API_KEY")
        missing = [
            name
            for name, value in (
                ("AZURE_OPENAI_ENDPOINT", urls[0]),
                ("AZURE_OPENAI_API_KEY", api_key),
                ("AZURE_OPENAI_API_VERSION", os.environ.get("AZURE_OPENAI_API_VERSION")),
            )
            if not value
        ]
        if missing:
            raise Fatal(f"--backend azure needs {', '.join(missing)} in the environment")
        return urls[:1], api_key
    urls = list(base_urls) or ([os.environ["OPENAI_BASE_URL"]] if os.environ.get("OPENAI_BASE_URL") else [])
    api_key = api_key or os.environ.get("OPENAI_API_KEY")
    if not urls and not api_key:
        raise Fatal(
            "no model endpoint configured: set OPENAI_API_KEY (and OPENAI_BASE_URL or --base-url for a"
            " server other than OpenAI's)"
        )
    return urls or ["https://api.openai.com/v1"], api_key


def _not_found_hint(url: str) -> str:
    path = url.rstrip("/")
    if path.endswith("/v1"):
        return "check the base URL"
    return (
        f"OpenAI-compatible servers answer under /v1: did you mean --base-url {secrets.public_url(path)}/v1 ?"
    )


def list_models(
    kind: str, base_urls: tuple[str, ...], api_key: str | None, timeout: float
) -> list[dict[str, Any]]:
    """Every model of every endpoint: {id, owned_by, created, endpoint}; Fatal with the reason when
    an endpoint cannot be asked."""
    import openai

    urls, api_key = endpoint_urls(kind, base_urls, api_key)
    secrets.register(api_key)
    for url in urls:
        secrets.register_url(url)
    models: list[dict[str, Any]] = []
    for url in urls:
        where = secrets.public_url(url)
        client = _client(kind, url, api_key, timeout)
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
