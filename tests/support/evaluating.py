"""`bv eval` command lines and a loopback model and judge answering them (priced, for the cost tests)."""

from __future__ import annotations

from support.fakeopenai import Reply

SECRET = "sk-test-0123456789abcdef0123"


def respond(seen):
    """The model answers A; the judge model (judge-m) says True."""
    return Reply(content="True" if seen.body.get("model") == "judge-m" else "\\boxed{A}")


def eval_command(sample_dir, server, out, *more: str) -> str:
    return (
        f"bv eval {sample_dir}/meta_data.jsonl -m m --base-url {server.base_url} --api-key {SECRET}"
        f" --judge-model judge-m --judge-base-url {server.base_url} --cache {out.parent}/cache.sqlite"
        f" -o {out} --retries 0 " + " ".join(more)
    )


# USD per million tokens; every reply of the loopback server has 1,000 prompt and 500 completion tokens.
# A batch reply costs half (the price file's `batch` fraction).
RATES = {
    "m": {"input": 1.0, "output": 2.0, "batch": 0.5},
    "judge-m": {"input": 3.0, "output": 4.0, "batch": 0.5},
}


ROLLOUT_REPLY = (1000 * 1.0 + 500 * 2.0) / 1e6  # $0.002


JUDGE_REPLY = (1000 * 3.0 + 500 * 4.0) / 1e6  # $0.005


def is_judge(body: dict) -> bool:
    return body.get("model") == "judge-m"


def priced(server, delay: float = 0.0):
    """The model answers A, the judge True, each reply a priced 1,000 + 500 tokens."""
    server.responder = lambda seen: Reply(
        content="True" if is_judge(seen.body) else "\\boxed{A}", usage=(1000, 500), delay=delay
    )


def priced_command(sample_dir, url, out, *more: str) -> str:
    return (
        f"bv eval {sample_dir}/meta_data.jsonl -m m --base-url {url} --api-key sk-test --mode llm"
        f" --judge-model judge-m --judge-base-url {url} --cache {out.parent}/cache.sqlite -o {out}"
        " --retries 0 " + " ".join(more)
    )
