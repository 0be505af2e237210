"""A server that takes requests and answers none, told from one that is only slow to answer.

Without streaming, a request's first byte is most of the model's time, so its limit
(`first_byte_timeout`, by default `timeout`, 600 s) must be long, and a hung server (accepting
connections, answering nothing) took two rounds of it, 20 minutes, to be found. A busy server
still answers a small request of another kind: `GET /models`, which vLLM, SGLang, OpenAI and
proxies answer (with a list, or a 404) at once whatever they are generating. One that answers
neither is hung (bv.engine.backends.openai_compat's `_watch_silence`)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any


async def answers(
    session: Any, url: str, headers: Mapping[str, str], proxy: Any, proxy_auth: Any, seconds: float
) -> bool:
    """Whether `GET url` gets any HTTP answer (any status: a 404 is an answer) within `seconds`."""
    import aiohttp

    try:
        async with asyncio.timeout(seconds):
            async with session.get(url, headers=headers, proxy=proxy, proxy_auth=proxy_auth):
                return True
    except (aiohttp.ClientError, OSError, TimeoutError):  # TimeoutError is an OSError
        return False
