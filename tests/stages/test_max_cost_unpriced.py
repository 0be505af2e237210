"""--max-cost on a model bv cannot price is refused before anything is sent (exit 2, naming the
model and how to give a price), in bv rollout, bv judge, bv eval and bv optimize, as typed."""

from __future__ import annotations

import json
import subprocess

from support.commands import BIN

RATES = {"m": {"input": 1.0, "output": 2.0}}


def bv(*args, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [BIN / "bv", *args], capture_output=True, text=True, timeout=120, env={"HOME": str(tmp_path)}
    )


def refused(result: subprocess.CompletedProcess, model: str) -> None:
    assert result.returncode == 2, result.stderr
    assert f"--max-cost cannot be kept for model '{model}'" in result.stderr
    assert f"no price for model '{model}'" in result.stderr and "--prices FILE" in result.stderr


def test_each_command_refuses_an_unpriced_limit_before_sending(sample_dir, server, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(RATES))
    url, items = server.base_url, sample_dir / "meta_data.jsonl"
    limit = ["--prices", prices, "--max-cost", "1", "--api-key", "sk-x"]
    prompts = tmp_path / "prompts.jsonl"
    with open(prompts, "w") as out:
        subprocess.run([BIN / "bv", "prompt", items, "--limit", "2"], stdout=out, check=True)
    refused(bv("rollout", "-m", "nope", "--base-url", url, *limit, prompts, tmp_path=tmp_path), "nope")
    judge = ["--judge-model", "judge-x", "--judge-base-url", url, "--judge-api-key", "sk-x"]
    refused(bv("judge", *judge, "--prices", prices, "--max-cost", "1", prompts, tmp_path=tmp_path), "judge-x")
    out = tmp_path / "run"
    refused(bv("eval", items, "-m", "nope", "--base-url", url, *limit, "-o", out, tmp_path=tmp_path), "nope")
    assert not out.exists()  # refused before the run folder is made
    refused(
        bv("eval", items, "-m", "m", "--base-url", url, *limit, *judge, "-o", out, tmp_path=tmp_path),
        "judge-x",
    )
    skill = tmp_path / "skill.md"
    skill.write_text("# Skill\n")
    optimizer = ["--optimizer-model", "m", "--optimizer-base-url", url, "--optimizer-api-key", "sk-x"]
    bigger = tmp_path / "items"
    subprocess.run([BIN / "bv", "synth", "--out", bigger, "-n", "40"], check=True, capture_output=True)
    result = bv(
        "optimize", bigger / "meta_data.jsonl", "--skill", skill, "-m", "nope", "--base-url", url,
        *limit, *optimizer, "--out", tmp_path / "opt", tmp_path=tmp_path,
    )  # fmt: skip
    refused(result, "nope")
    assert not (tmp_path / "opt").exists()  # refused before the run folder is made (no run.json)
    assert server.seen == []  # nothing was sent by any of them


def test_a_priced_model_under_a_limit_is_not_refused(sample_dir, server, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(RATES))
    result = bv(
        "eval", sample_dir / "meta_data.jsonl", "-m", "m", "--base-url", server.base_url, "--api-key", "sk-x",
        "--mode", "rules", "--prices", prices, "--max-cost", "1", "-o", tmp_path / "run", "--no-cache", "-q",
        tmp_path=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len(server.finished()) == 12


def test_replies_in_flight_never_overshoot_the_limit(sample_dir, server, tmp_path):
    """Each request's estimated worst case (its prompt and --max-tokens at the price) is reserved
    before it goes: at -j 8 the spend stays within the limit (before, replies in flight overshot:
    $0.00075 of $0.0005 at -j 4)."""
    from support.fakeopenai import Reply

    server.responder = lambda seen: Reply(usage=(500, 200), delay=0.05)  # the estimate: ~570
    reply = (500 * 1.0 + 200 * 2.0) / 1e6
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(RATES))
    limit = 10.5 * reply
    result = bv(
        "eval", sample_dir / "meta_data.jsonl", "-m", "m", "--base-url", server.base_url, "--api-key", "sk-x",
        "--mode", "rules", "--prices", prices, "--max-cost", f"{limit}", "--max-tokens", "200", "-j", "8",
        "--repeats", "3", "-o", tmp_path / "run", "--no-cache", "-q", tmp_path=tmp_path,
    )  # fmt: skip
    assert result.returncode == 130, result.stderr
    spent = len(server.finished()) * reply
    assert 0 < spent <= limit, (spent, limit)
    assert (
        "stopped at the cost limit (" in result.stderr
        and "the next request could cost up to $" in result.stderr
    )
