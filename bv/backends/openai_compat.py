"""Any OpenAI-compatible chat endpoint (OpenAI, vLLM, SGLang, …) and Azure OpenAI.

Requests go through the official `openai` async client over its documented aiohttp
transport. The body is posted with `client.post("/chat/completions")` rather than
`client.chat.completions.create`, whose per-request parameter validation costs more CPU
than the whole rest of a request and caps throughput at high concurrency. Several base
URLs (replicas of one model) share the load: each request goes to the replica with the
fewest in flight, and one that keeps failing rests for a while.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any

from bv import secrets
from bv.backends import BV_PARAMS, Reply
from bv.errors import Fatal, ItemFailure, Transient
from bv.images import ImageError, ImageOptions, inline_images_async
from bv.retry import retry_after_seconds

PLACEHOLDER_KEY = "no-key"  # local servers (vLLM, SGLang) accept any key


@dataclass
class Replica:
    url: str
    client: Any
    in_flight: int = 0
    failures: int = 0  # consecutive
    rest_until: float = 0.0


class OpenAIBackend:
    name = "openai"
    cacheable = True

    def __init__(self, model: str, clients: list[tuple[str, Any]]) -> None:
        self.model = model
        self.replicas = [Replica(url, client) for url, client in clients]
        self.endpoint = " ".join(sorted(secrets.public_url(url) for url, _ in clients))

    @classmethod
    def from_config(
        cls,
        model: str | None = None,
        base_urls: list[str] | tuple[str, ...] = (),
        api_key: str | None = None,
        timeout: float = 600.0,
        jobs: int = 8,
        **_: Any,
    ) -> OpenAIBackend:
        base_urls = list(base_urls) or (
            [os.environ["OPENAI_BASE_URL"]] if os.environ.get("OPENAI_BASE_URL") else []
        )
        api_key = api_key or os.environ.get("OPENAI_API_KEY")
        if not base_urls and not api_key:
            raise Fatal(
                "no model endpoint configured: set OPENAI_API_KEY (and OPENAI_BASE_URL or --base-url for a"
                " server other than OpenAI's), or run the offline baseline with --backend chance"
            )
        if not model:
            raise Fatal("no model given: use -m/--model or set BV_MODEL")
        secrets.register(api_key)
        for url in base_urls:
            secrets.register_url(url)
        import openai

        urls = base_urls or ["https://api.openai.com/v1"]
        clients = [
            (
                url,
                openai.AsyncOpenAI(
                    base_url=url,
                    api_key=api_key or PLACEHOLDER_KEY,
                    max_retries=0,
                    timeout=timeout + 5,
                    http_client=_http_client(jobs, timeout),
                ),
            )
            for url in urls
        ]
        return cls(model, clients)

    def _pick(self) -> Replica:
        now = time.monotonic()
        awake = [r for r in self.replicas if r.rest_until <= now]
        if not awake:
            return min(self.replicas, key=lambda r: r.rest_until)
        return min(awake, key=lambda r: r.in_flight)

    async def complete(self, messages: list[dict[str, Any]], **params: Any) -> Reply:
        try:
            sendable = await inline_images_async(messages, ImageOptions(max_pixels=params.get("max_pixels")))
        except ImageError as exc:
            raise ItemFailure(f"image: {exc}") from None
        body = {"model": self.model, "messages": sendable}
        body.update({k: v for k, v in params.items() if k not in BV_PARAMS and v is not None})
        body.update(params.get("extra_body") or {})
        replica = self._pick()
        replica.in_flight += 1
        started = time.monotonic()
        try:
            reply = await self._post(replica, body)
        except Transient:
            replica.failures += 1
            if replica.failures >= 3 and len(self.replicas) > 1:
                replica.rest_until = time.monotonic() + min(60.0, 2.0**replica.failures)
            raise
        finally:
            replica.in_flight -= 1
        replica.failures = 0
        reply.latency_s = time.monotonic() - started
        return reply

    async def _post(self, replica: Replica, body: dict[str, Any]) -> Reply:
        import httpx2
        import openai

        where = secrets.public_url(replica.url)
        try:
            response = await replica.client.post("/chat/completions", cast_to=httpx2.Response, body=body)
        except openai.APITimeoutError:
            raise Transient("timeout") from None
        except openai.APIConnectionError as exc:
            raise Transient(f"connection error ({secrets.redact(str(exc.__cause__ or exc))[:120]})") from None
        except openai.APIStatusError as exc:
            raise _status_error(exc, where) from None
        try:
            data = json.loads(response.content)
            choice = data["choices"][0]
            content = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise Transient("unparseable reply") from None
        usage = data.get("usage") or {}
        return Reply(
            content=content,
            finish_reason=choice.get("finish_reason"),
            usage={
                k: usage[k] for k in ("prompt_tokens", "completion_tokens") if isinstance(usage.get(k), int)
            },
            model=data.get("model"),
        )

    async def aclose(self) -> None:
        for replica in self.replicas:
            try:
                await replica.client.close()
            except Exception:  # closing is best effort; the process is ending anyway
                pass


def _http_client(jobs: int, timeout: float) -> Any:
    import httpx2
    import openai

    limits = httpx2.Limits(max_connections=jobs + 4, max_keepalive_connections=jobs + 4)
    return openai.DefaultAioHttpClient(limits=limits, timeout=httpx2.Timeout(timeout + 5, connect=30.0))


def _status_error(exc: Any, where: str) -> Exception:
    """Map an HTTP error status to the retry policy's three kinds."""
    status = exc.status_code
    message = secrets.redact(str(getattr(exc, "message", "") or exc))[:300]
    if status == 429:
        return Transient("429 rate limited", retry_after_seconds(exc.response.headers))
    if status in (408, 409) or status >= 500:
        return Transient(f"HTTP {status}", retry_after_seconds(exc.response.headers))
    if status in (401, 403):
        return Fatal(
            f"{where} refused the API key (HTTP {status}): check --api-key or the key's"
            f" environment variable. Server said: {message}"
        )
    if status == 404:
        return Fatal(
            f"{where} answered 404 (not found): check the base URL and the model name. Server said: {message}"
        )
    return ItemFailure(f"HTTP {status}: {message}")


class AzureBackend(OpenAIBackend):
    """Azure OpenAI: endpoint, key and API version from the environment; the deployment is --model."""

    name = "azure"

    @classmethod
    def from_config(
        cls,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 600.0,
        jobs: int = 8,
        base_urls: list[str] | tuple[str, ...] = (),
        **_: Any,
    ) -> AzureBackend:
        endpoint = (list(base_urls) or [os.environ.get("AZURE_OPENAI_ENDPOINT", "")])[0]
        api_key = api_key or os.environ.get("AZURE_OPENAI_API_KEY")
        version = os.environ.get("AZURE_OPENAI_API_VERSION")
        missing = [
            name
            for name, value in (
                ("AZURE_OPENAI_ENDPOINT", endpoint),
                ("AZURE_OPENAI_API_KEY", api_key),
                ("AZURE_OPENAI_API_VERSION", version),
            )
            if not value
        ]
        if missing:
            raise Fatal(f"--backend azure needs {', '.join(missing)} in the environment")
        if not model:
            raise Fatal("no deployment given: use -m/--model with the Azure deployment name")
        secrets.register(api_key)
        secrets.register_url(endpoint)
        import openai

        client = openai.AsyncAzureOpenAI(
            azure_endpoint=endpoint,
            api_key=api_key,
            api_version=version,
            max_retries=0,
            timeout=timeout + 5,
            http_client=_http_client(jobs, timeout),
        )
        return cls(model, [(endpoint, client)])
