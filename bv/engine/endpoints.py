"""Where model requests go: one endpoint configuration, checked once, for rollout and judge alike.

`resolve` builds an `Endpoint` from command-line options and the environment (OPENAI_BASE_URL,
OPENAI_API_KEY, OPENAI_ORG_ID, OPENAI_PROJECT_ID; AZURE_OPENAI_* for Azure), in this one place,
and refuses what cannot work before any request is sent: a URL without an http(s) scheme or a
host, or with credentials inside it. `describe_transport_error` names what went wrong on the
wire (refused, DNS, TLS, reset, timeout) with host and port, never as a bare "timeout".
"""

from __future__ import annotations

import errno
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from bv.core import environment, redaction
from bv.core.errors import BadConfig, BVError, Fatal, ItemFailure, Transient
from bv.core.terminal import printable
from bv.engine.defaults import CACHE_SCOPE, CONNECT_TIMEOUT_S, JOBS, TIMEOUT_S
from bv.engine.params import RULES, BadRules, ParamRule, provider_of, rule_for, user_rules

OPENAI_URL = "https://api.openai.com/v1"
MAX_MODELS = 10_000  # models kept from one /models answer
MAX_MODEL_ID_CHARS = 300  # a longer id is not a model name
MAX_MODELS_BYTES = 16 * 1024 * 1024  # a /models answer, as received and as inflated


class BadEndpoint(BadConfig):
    """An endpoint setting that cannot work (the command line exits 2, before any work)."""


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible (or Azure OpenAI) chat endpoint: the URLs, the key, the model."""

    kind: str  # "openai" or "azure"
    model: str
    base_url: tuple[str, ...]  # replicas of one model; Azure: the resource endpoint
    api_key: str | None
    timeout: float = TIMEOUT_S  # per try, all told
    jobs: int = JOBS
    connect_timeout: float = CONNECT_TIMEOUT_S  # to open a connection
    first_byte_timeout: float | None = None  # from sending to the reply's first byte; None: timeout
    read_timeout: float | None = None  # from the first byte to the last; None: timeout
    api_version: str | None = None  # Azure only
    organization: str | None = None  # OpenAI-Organization header
    project: str | None = None  # OpenAI-Project header
    role: str = "model"  # "model" or "judge": how messages name it
    key_from: str | None = None  # where the key came from (an option, a variable); None: no key set
    cache_scope: str = CACHE_SCOPE  # "endpoint": cache keys name the base URLs too (bv.engine.cache)

    @property
    def key_hint(self) -> str:
        """How to give this endpoint a key: `set OPENAI_API_KEY or give ``api_key```."""
        if self.kind == "azure":
            return "set AZURE_OPENAI_API_KEY or give `api_key`"
        if self.role == "judge":
            return "set BV_JUDGE_API_KEY or give `judge_api_key`"
        return "set OPENAI_API_KEY or give `api_key`"

    def key_refusal(self, where: str, status: int) -> str:
        """What a 401 or 403 says: that no key was set and how to set one, or which key was refused."""
        if self.key_from is None:
            return f"{where} answered HTTP {status} and no API key was set: {self.key_hint}"
        return f"{where} refused the API key from {self.key_from} (HTTP {status}): check it ({self.key_hint})"

    rule: ParamRule = RULES[-1]  # how bv's generic options are spelled for it (bv.engine.params)

    @property
    def public(self) -> str:
        """Where replies come from, fit to print and to hash into cache keys (never a secret)."""
        return " ".join(sorted(redaction.public_url(url) for url in self.base_url))

    def chat_url(self, base_url: str) -> str:
        if self.kind == "azure":
            deployment = f"{base_url.rstrip('/')}/openai/deployments/{self.model}"
            return f"{deployment}/chat/completions?api-version={self.api_version}"
        return base_url.rstrip("/") + "/chat/completions"

    def headers(self) -> dict[str, str]:
        from bv import __version__

        headers = {
            "Accept": "application/json",
            "Content-Type": "application/json",
            "User-Agent": f"bv/{__version__}",
        }
        if self.kind == "azure":
            headers["api-key"] = self.api_key or ""
        else:
            headers["Authorization"] = f"Bearer {self.api_key or PLACEHOLDER_KEY}"
            if self.organization:
                headers["OpenAI-Organization"] = self.organization
            if self.project:
                headers["OpenAI-Project"] = self.project
        return headers


PLACEHOLDER_KEY = "no-key"  # local servers (vLLM, SGLang) accept any key


def check_base_url(url: str, option: str = "`base_url`") -> str:
    """The URL if it can work; else BadEndpoint saying why (no scheme, no host, credentials inside)."""
    parts = urlsplit(url.strip())
    shown = printable(redaction.public_url(url))
    if parts.scheme not in ("http", "https"):
        hint = f" (did you mean http://{shown}?)" if "://" not in url else ""
        raise BadEndpoint(f"{option} {shown!r} needs an http:// or https:// scheme{hint}")
    if not parts.hostname:
        raise BadEndpoint(f"{option} {shown!r} has no host")
    try:
        _ = parts.port
    except ValueError:
        raise BadEndpoint(f"{option} {shown!r} has an invalid port") from None
    if parts.query or parts.fragment or url.strip().endswith(("?", "#")):
        redaction.register_url(url)  # a query may carry a key (?key=…)
        raise BadEndpoint(
            f"{option} {shown!r} has a query or fragment (?…, #…): bv appends /chat/completions to"
            " the base URL's path, so they would end up inside it; give the URL up to its path"
            " (for Azure, AZURE_OPENAI_API_VERSION sets api-version)"
        )
    if parts.username or parts.password:
        redaction.register_url(url)
        raise BadEndpoint(
            f"{option} {shown!r} carries credentials (user:password@): give the key with `api_key`"
            " (or its environment variable) instead"
        )
    return url.strip()


def resolve(
    kind: str = "openai",
    *,
    model: str | None,
    base_url: tuple[str, ...] | list[str] = (),
    api_key: str | None = None,
    timeout: float = TIMEOUT_S,
    jobs: int = JOBS,
    role: str = "model",
    env: Mapping[str, str] | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    first_byte_timeout: float | None = None,
    read_timeout: float | None = None,
    key_from: str | None = None,
    sending: bool = True,
    cache_scope: str = CACHE_SCOPE,
) -> Endpoint:
    """The endpoint for these options and the environment; BadEndpoint or Fatal if it cannot work.
    `key_from`: where a given `api_key` came from (default: that setting). Not `sending` (a dry
    run): no key is needed."""
    env = environment.variables() if env is None else env
    option = "`judge_base_url`" if role == "judge" else "`base_url`"
    if api_key:
        key_from = key_from or ("`judge_api_key`" if role == "judge" else "`api_key`")
    if kind == "azure":
        urls = list(base_url) or ([env["AZURE_OPENAI_ENDPOINT"]] if env.get("AZURE_OPENAI_ENDPOINT") else [])
        key_from = key_from or ("AZURE_OPENAI_API_KEY" if env.get("AZURE_OPENAI_API_KEY") else None)
        api_key = api_key or env.get("AZURE_OPENAI_API_KEY")
        version = env.get("AZURE_OPENAI_API_VERSION")
        missing = [
            name
            for name, value in (
                ("AZURE_OPENAI_ENDPOINT", urls),
                ("AZURE_OPENAI_API_KEY", api_key),
                ("AZURE_OPENAI_API_VERSION", version),
            )
            if not value and (sending or name != "AZURE_OPENAI_API_KEY")
        ]
        if missing:
            raise Fatal(f"the azure backend needs {', '.join(missing)} in the environment")
        urls = [check_base_url(urls[0], "AZURE_OPENAI_ENDPOINT" if not base_url else option)]
        if not model:  # a missing argument: a usage error
            raise BadEndpoint("no deployment given: use `model` with the Azure deployment name")
        extra: dict[str, str | None] = {"api_version": version}
    elif kind == "openai":
        if not model:  # a missing argument: a usage error, before what else is missing
            raise BadEndpoint(
                "no judge model given: `judge_model` or BV_JUDGE_MODEL"
                if role == "judge"
                else "no model given: use `model` or set BV_MODEL"
            )
        from_env = not base_url and bool(env.get("OPENAI_BASE_URL"))
        urls = list(base_url) or ([env["OPENAI_BASE_URL"]] if from_env else [])
        key_from = key_from or ("OPENAI_API_KEY" if env.get("OPENAI_API_KEY") else None)
        api_key = api_key or env.get("OPENAI_API_KEY")
        if not urls and not api_key and sending:
            if role == "judge":
                raise Fatal(
                    "the LLM judge has no endpoint: give `judge_base_url` and/or `judge_api_key`"
                    " (or BV_JUDGE_BASE_URL, BV_JUDGE_API_KEY), or judge with `mode` rules"
                )
            raise NoEndpoint(
                "no model endpoint configured: set OPENAI_API_KEY (and OPENAI_BASE_URL or `base_url` for a"
                " server other than OpenAI's), or run the offline baseline with `backend` chance"
            )
        where = "OPENAI_BASE_URL" if from_env else option
        urls = [check_base_url(url, where) for url in urls] or [OPENAI_URL]
        extra = {"organization": env.get("OPENAI_ORG_ID"), "project": env.get("OPENAI_PROJECT_ID")}
    else:
        raise ValueError(f"unknown endpoint kind {kind!r}")
    try:
        rule = rule_for(provider_of(kind, urls[0]), model, user_rules(env.get("BV_PARAM_RULES")))
    except BadRules as exc:
        raise BadEndpoint(str(exc)) from None
    redaction.register(api_key)
    for url in urls:
        redaction.register_url(url)
    return Endpoint(
        kind=kind,
        model=model,
        base_url=tuple(urls),
        api_key=api_key,
        timeout=timeout,
        jobs=jobs,
        connect_timeout=connect_timeout,
        first_byte_timeout=first_byte_timeout,
        read_timeout=read_timeout,
        role=role,
        rule=rule,
        key_from=key_from,
        cache_scope=cache_scope,
        **extra,
    )


def judge_endpoint(
    mode: str,
    model: str | None,
    base_url: str | None,
    api_key: str | None,
    timeout: float = TIMEOUT_S,
    jobs: int = JOBS,
    env: Mapping[str, str] | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    first_byte_timeout: float | None = None,
    read_timeout: float | None = None,
    sending: bool = True,
    cache_scope: str = CACHE_SCOPE,
) -> Endpoint | None:
    """The LLM judge's endpoint, resolved and checked (BV_JUDGE_API_KEY when no key is given),
    when the mode may ask an LLM and a model is given; None otherwise."""
    if mode == "rules" or not model:
        return None
    env = environment.variables() if env is None else env
    return resolve(
        "openai",
        model=model,
        base_url=[base_url] if base_url else [],
        api_key=api_key or env.get("BV_JUDGE_API_KEY"),
        key_from=None if api_key or not env.get("BV_JUDGE_API_KEY") else "BV_JUDGE_API_KEY",
        timeout=timeout,
        jobs=jobs,
        role="judge",
        env=env,
        connect_timeout=connect_timeout,
        first_byte_timeout=first_byte_timeout,
        read_timeout=read_timeout,
        sending=sending,
        cache_scope=cache_scope,
    )


class NoEndpoint(Fatal):
    """No endpoint at all: neither a URL nor a key (each command says what to give)."""


class NoModelList(BVError):
    """Why a /models URL gave no list of models: `answered` whether the server answered at all
    (if not, the message names the failure on the wire), `status` its HTTP error status."""

    def __init__(self, reason: str, answered: bool = True, status: int | None = None) -> None:
        super().__init__(reason)
        self.answered = answered
        self.status = status


# A server started for one model refuses every other name, naming its own: `transformers serve
# MODEL` answers 400 {"detail": "Server is pinned to 'MODEL'; requested 'OTHER'."} (5.17).
_PINNED = re.compile(rf"Server is pinned to '([^'\n]{{1,{MAX_MODEL_ID_CHARS}}})'")


def pinned_model(message: str) -> str | None:
    """The one model a server serves, when its refusal says it is pinned to it."""
    found = _PINNED.search(message)
    return found.group(1) if found else None


def unlisted_hint(status: int) -> str:
    """What a /models answer of 5xx means: a server that serves models but does not list them."""
    if status < 500:
        return ""
    return (
        ": the server does not list its models (`transformers serve` answers 500 so without a Hugging"
        " Face cache); give the model by name (`model`): a server started for one model takes only"
        " that name (`transformers serve PATH`: PATH) and names it when another is asked for"
    )


def models_url(endpoint: Endpoint, base_url: str) -> str:
    """Where an endpoint lists its models, as the openai SDK asks: GET {base}/models; Azure's
    resource lists them under /openai/models for its API version."""
    if endpoint.kind == "azure":
        return f"{base_url.rstrip('/')}/openai/models?api-version={endpoint.api_version}"
    return base_url.rstrip("/") + "/models"


async def fetch_models(
    session: Any, endpoint: Endpoint, url: str, proxy: Any = None, proxy_auth: Any = None
) -> list[dict[str, Any]]:
    """The models a /models URL lists (each a dict with a short string id; at most MAX_MODELS),
    asked with the endpoint's headers through an aiohttp session, as bv's requests are: for
    `bv models` and for what a 404 names. What the server says is not trusted: the body is
    read under a cap, entries without a usable id are left out. NoModelList says why not."""
    import json

    import aiohttp

    from bv.engine.backends.replies import read_body

    try:
        async with session.get(
            url, headers=endpoint.headers(), proxy=proxy, proxy_auth=proxy_auth
        ) as response:
            if not 200 <= response.status < 300:
                raise NoModelList(f"HTTP {response.status}", status=response.status)
            raw = await read_body(response, MAX_MODELS_BYTES)
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise NoModelList(describe_transport_error(exc, url)[0], answered=False) from None
    except (ItemFailure, Transient) as exc:  # over the cap, or an encoding bv does not read
        raise NoModelList(str(exc)) from None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise NoModelList("not JSON") from None
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise NoModelList("not a list of models")
    return [
        entry
        for entry in entries
        if isinstance(entry, dict)
        and isinstance(entry.get("id"), str)
        and 0 < len(entry["id"]) <= MAX_MODEL_ID_CHARS
    ][:MAX_MODELS]


def host_port(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.hostname}:{port}"


def describe_transport_error(
    exc: BaseException, url: str, connect_timeout: float = CONNECT_TIMEOUT_S
) -> tuple[str, bool]:
    """(what happened, in words with host and port; whether it was a failure to connect at all)."""
    import aiohttp

    where = host_port(url)
    cause = exc.os_error if isinstance(exc, aiohttp.ClientConnectorError) else exc  # the socket's own error
    detail = printable(redaction.redact(str(getattr(cause, "strerror", None) or cause)))[:160]
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"DNS failure: cannot resolve {urlsplit(url).hostname} ({detail})", True
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"TLS failure: certificate of {where} not trusted ({detail})", True
    if isinstance(exc, aiohttp.ClientSSLError):
        return f"TLS failure connecting to {where} ({detail})", True
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(cause, ConnectionRefusedError):
            return f"connection refused by {where} (nothing listening?)", True
        return f"cannot connect to {where} ({detail})", True
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return f"connect timeout: no connection to {where} within {connect_timeout:g} s", True
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return f"connection closed by {where} before it answered", False
    if isinstance(exc, aiohttp.ClientOSError) and (
        isinstance(exc.__cause__ or exc, ConnectionResetError) or exc.errno == errno.ECONNRESET
    ):
        return f"connection reset by {where}", False
    if isinstance(exc, (aiohttp.SocketTimeoutError, TimeoutError)):
        return f"read timeout: {where} stopped sending", False
    if isinstance(exc, aiohttp.ClientPayloadError):
        return f"incomplete reply from {where} ({detail})", False
    if isinstance(exc, aiohttp.TooManyRedirects):
        return f"too many redirects from {where}", False
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"malformed HTTP from {where} ({detail})", False
    return f"{type(exc).__name__} talking to {where} ({detail})", False
