"""The two clients bv's rollout is measured against, on the same server and the same prompts.

    python bench/rollout_limits.py bare URL PROMPTS JOBS        # a bare asyncio client: the limit
    python bench/rollout_limits.py reference URL PROMPTS JOBS   # the reference's thread pool

`bare` posts each prompt's messages (images inlined as data URIs) with aiohttp, `JOBS` in
flight, and writes one row per reply: no SDK, no retries, no cache, the least a client can do.
`reference` is the design of the reference implementation (see
/work/shared/reference/babyvision-rollout.md): a thread pool of `JOBS` threads calling the
`openai` SDK's synchronous client, appending each row to the output and flushing it.
Rows go to stdout; bench/rollout_bench.py times the process.
"""

from __future__ import annotations

import asyncio
import base64
import json
import mimetypes
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit


def inline(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with every file:// image URL replaced by a base64 data URI."""
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            parts = []
            for part in content:
                url = part.get("image_url", {}).get("url", "") if part.get("type") == "image_url" else ""
                if url.startswith("file://"):
                    path = Path(unquote(urlsplit(url).path))
                    kind = mimetypes.guess_type(path.name)[0] or "image/png"
                    data = base64.b64encode(path.read_bytes()).decode()
                    part = {"type": "image_url", "image_url": {"url": f"data:{kind};base64,{data}"}}
                parts.append(part)
            content = parts
        out.append({**message, "content": content})
    return out


def records(path: str) -> list[dict[str, Any]]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


async def bare(url: str, prompts: str, jobs: int) -> None:
    import aiohttp

    slots = asyncio.Semaphore(jobs)
    headers = {"Authorization": "Bearer k", "Content-Type": "application/json"}
    out = sys.stdout

    async def one(session: aiohttp.ClientSession, record: dict[str, Any]) -> None:
        async with slots:
            body = json.dumps({"model": "m", "messages": inline(record["messages"])}).encode()
            async with session.post(f"{url}/chat/completions", data=body, headers=headers) as response:
                data = json.loads(await response.read())
            row = {"id": record["id"], "response": data["choices"][0]["message"]["content"], "error": None}
            out.write(json.dumps(row) + "\n")

    connector = aiohttp.TCPConnector(limit=jobs)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(one(session, record) for record in records(prompts)))
    out.flush()


def reference(url: str, prompts: str, jobs: int) -> None:
    import openai

    client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
    lock = threading.Lock()

    def one(record: dict[str, Any]) -> None:
        reply = client.chat.completions.create(model="m", messages=inline(record["messages"]))
        row = {"id": record["id"], "response": reply.choices[0].message.content, "error": None}
        with lock:
            sys.stdout.write(json.dumps(row) + "\n")
            sys.stdout.flush()

    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, records(prompts)))


def main() -> None:
    kind, url, prompts, jobs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if kind == "bare":
        asyncio.run(bare(url, prompts, jobs))
    elif kind == "reference":
        reference(url, prompts, jobs)
    else:
        sys.exit(f"unknown client {kind!r}: bare or reference")


if __name__ == "__main__":
    main()
