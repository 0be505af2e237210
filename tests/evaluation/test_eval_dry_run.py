"""`bv eval --dry-run`: the rollout's and the judge's requests, tokens and dollars, with no key,
sending nothing and writing nothing; as typed, against a loopback server that must see nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess

from support.commands import BIN
from support.fakeopenai import Reply

RATES = {"m": {"input": 1.0, "output": 2.0}, "judge-m": {"input": 3.0, "output": 4.0}}


def dry_run(sample_dir, server, tmp_path, *more: str) -> subprocess.CompletedProcess:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(RATES))
    env = {k: v for k, v in os.environ.items() if not k.endswith("API_KEY")}  # no key at all
    return subprocess.run(
        [
            *(BIN / "bv", "eval", sample_dir / "meta_data.jsonl", "-m", "m", "--base-url", server.base_url),
            *("--judge-model", "judge-m", "--judge-base-url", server.base_url, "--prices", prices),
            *("--cache", tmp_path / "cache.sqlite", "-o", tmp_path / "run", "--dry-run", *more),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "HOME": str(tmp_path)},
    )


def block(stderr: str, name: str) -> dict[str, str]:
    """A stage's lines of the dry run, by their label."""
    text = stderr.split(f"  {name}:\n", 1)[1].split("\n  judge:\n")[0]
    return dict(re.findall(r"^    ([A-Za-z ]+):\s+(.*)$", text, re.M))


def test_dry_run_prints_both_stages_costs_with_no_key(sample_dir, server, tmp_path):
    result = dry_run(sample_dir, server, tmp_path, "--repeats", "2", "--max-tokens", "100")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""  # stdout is data: the figures are on stderr
    assert "bv eval --dry-run: nothing sent, nothing written" in result.stderr
    rollout, judge = block(result.stderr, "rollout"), block(result.stderr, "judge")
    assert rollout["requests"].startswith("24 (12 rows × 2 repeats")
    assert rollout["to send"] == "24"
    assert re.match(
        r"\$\S+ to \$\S+ \(\S*prices\.json; the high end: every completion at 100 tokens", rollout["cost"]
    )
    assert judge["judge model"].startswith("judge-m") and judge["to the LLM"] == "24"
    assert judge["to send"] == "24" and judge["in the cache"].startswith("not looked up")
    assert re.match(r"at least \$\S+ \(\S*prices\.json\)", judge["cost"]), judge["cost"]
    assert server.seen == [] and not (tmp_path / "run").exists()


def test_a_resumed_run_costs_only_what_is_left(sample_dir, server, tmp_path):
    server.responder = lambda seen: Reply(content="True" if seen.body["model"] == "judge-m" else "\\boxed{A}")
    base = [BIN / "bv", "eval", sample_dir / "meta_data.jsonl", "-m", "m", "--base-url", server.base_url]
    ran = subprocess.run(
        [
            *(*base, "--api-key", "sk-x", "--judge-model", "judge-m", "--judge-base-url", server.base_url),
            *("--judge-api-key", "sk-x", "--cache", tmp_path / "cache.sqlite", "-o", tmp_path / "run", "-q"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    sent = len(server.seen)
    result = dry_run(sample_dir, server, tmp_path, "--judge-param", "max_tokens=5")
    assert result.returncode == 0, result.stderr
    rollout, judge = block(result.stderr, "rollout"), block(result.stderr, "judge")
    assert rollout["in the cache"].startswith("12 of these requests") and rollout["to send"] == "0"
    assert rollout["cost"] == "$0.00: every request is answered by the cache"
    assert "at most 5 (the token limit)" in judge["completions"]
    assert re.match(r"\$\S+ to \$\S+ \(\S*prices\.json", judge["cost"]), judge["cost"]
    assert len(server.seen) == sent
