"""`bv eval -q` says why a run died: a base URL without /v1, a wrong key, a missing model, a refused
port and a server that accepts and never answers each print their cause and the advice that fits
it on stderr (never "re-run the same command" alone), as `bv eval` is typed, against loopback
servers; bv.api.evaluate raises the same cause."""

from __future__ import annotations

import json
import socket
import subprocess
import time

import pytest
from support.commands import BIN
from support.fakeopenai import FakeOpenAI, Reply
from support.hostileopenai import HostileOpenAI

GOOD_KEY = "sk-good-0123456789abcdef"
WRONG_KEY = "sk-wrong-0123456789abcdef"
EVAL = [BIN / "bv", "eval", "-q", "--mode", "rules", "--no-cache", "--retries", "0"]
ROLLOUT = [BIN / "bv", "rollout", "-q", "-m", "m", "--api-key", GOOD_KEY, "--no-cache", "--retries", "0"]


def served(seen):
    """A server that wants /v1, the key GOOD_KEY and the model `m`, as real ones do."""
    if not seen.path.startswith("/v1/"):
        return Reply(status=404, body=b'{"detail": "Not Found"}')
    if seen.path.endswith("/models"):
        return Reply(body=json.dumps({"data": [{"id": "m"}]}).encode())
    if seen.headers.get("authorization") != f"Bearer {GOOD_KEY}":
        return Reply(status=401, body=b'{"error": {"message": "Incorrect API key provided"}}')
    if seen.body.get("model") != "m":
        error = {"message": f"The model {seen.body.get('model')} does not exist", "code": "model_not_found"}
        return Reply(status=404, body=json.dumps({"error": error}).encode())
    return Reply()


@pytest.fixture
def strict():
    fake = FakeOpenAI(served)
    fake.start()
    yield fake
    fake.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_quiet(sample_dir, tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run(
        [*EVAL, sample_dir / "meta_data.jsonl", "-o", tmp_path / "run", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "80", "HOME": str(tmp_path)},
    )
    return result, time.monotonic() - started


def closing(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert lines, "nothing said on stderr"
    return lines[-1]


def test_each_fatal_cause_is_said_under_quiet_with_its_fix(sample_dir, strict, tmp_path):
    base = strict.base_url.removesuffix("/v1")
    cases = {
        "no /v1": (["-m", "m", "--base-url", base, "--api-key", GOOD_KEY], [f"try --base-url {base}/v1"]),
        "wrong key": (
            ["-m", "m", "--base-url", strict.base_url, "--api-key", WRONG_KEY],
            ["refused the API key from --api-key (HTTP 401)", "Incorrect API key"],
        ),
        "missing model": (
            ["-m", "nope", "--base-url", strict.base_url, "--api-key", GOOD_KEY],
            ["answered 404 (not found) for model 'nope'", f"{strict.base_url}/models serves: m"],
        ),
        "refused port": (
            ["-m", "m", "--base-url", f"http://127.0.0.1:{free_port()}/v1", "--api-key", GOOD_KEY],
            ["connection refused", "check --base-url and that the server is up"],
        ),
    }
    for name, (args, causes) in cases.items():
        result, took = run_quiet(sample_dir, tmp_path / name.replace(" ", "_").replace("/", ""), *args)
        line = closing(result)
        assert result.returncode == 1, (name, result.stderr)
        assert line.startswith("bv eval: the rollout stopped: "), (name, line)
        for cause in causes:
            assert cause in line, (name, line)
        assert "once that is fixed, re-run the same command" in line, (name, line)
        assert "see logs/" not in line and WRONG_KEY not in result.stderr and GOOD_KEY not in result.stderr
        assert took < 20, (name, took)


def test_a_server_that_never_answers_is_said_within_its_limits(sample_dir, tmp_path):
    hung = FakeOpenAI(lambda seen: Reply(hang=True))
    hung.start()
    try:
        args = ["-m", "m", "--base-url", hung.base_url, "--api-key", GOOD_KEY, "--timeout", "3"]
        result, took = run_quiet(sample_dir, tmp_path, *args)
    finally:
        hung.stop()
    line = closing(result)
    assert result.returncode == 1, result.stderr
    assert line.startswith(f"bv eval: the rollout stopped: cannot reach the model endpoint {hung.base_url}")
    assert "sent no reply within 3 s" in line and "once that is fixed" in line
    assert took < 15, took  # the first-byte limit (3 s), not the 600 s default or a stall notice at 30 s


def test_how_long_requests_wait_is_bv_rollouts_in_bv_eval(sample_dir, tmp_path):
    """A server that rate-limits every request: `--rate-limit-patience 0.5` ends the run in
    seconds with every row failed on it (not after the 900 s default), and the first-byte
    limit of `--first-byte-timeout` is the one a silent server is given."""
    limited = FakeOpenAI(lambda seen: Reply(status=429, headers={"retry-after-ms": "50"}))
    limited.start()
    try:
        args = ["-m", "m", "--base-url", limited.base_url, "--api-key", GOOD_KEY]
        args += ["--rate-limit-patience", "0.5"]
        result, took = run_quiet(sample_dir, tmp_path, *args)
    finally:
        limited.stop()
    assert result.returncode == 1, result.stderr
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert rows and all("`rate_limit_patience` 0.5 s" in (row["error"] or "") for row in rows)
    assert took < 30, took
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["options"]["rate_limit_patience"] == 0.5  # recorded, and a re-run may change it

    hung = FakeOpenAI(lambda seen: Reply(hang=True))
    hung.start()
    try:
        args = ["-m", "m", "--base-url", hung.base_url, "--api-key", GOOD_KEY, "--first-byte-timeout", "2"]
        (tmp_path / "hung").mkdir()
        result, took = run_quiet(sample_dir, tmp_path / "hung", *args)
    finally:
        hung.stop()
    assert result.returncode == 1 and "sent no reply within 2 s" in closing(result), result.stderr
    assert took < 15, took


def test_a_silent_server_is_warned_of_in_full_even_under_quiet(sample_dir, tmp_path):
    """Before the first-byte limit runs out: a whole line, not cut at 80 columns, under -q too."""
    prompts = tmp_path / "prompts.jsonl"
    with open(prompts, "w") as out:
        subprocess.run(
            [BIN / "bv", "prompt", sample_dir / "meta_data.jsonl", "--limit", "2"], stdout=out, check=True
        )
    hung = FakeOpenAI(lambda seen: Reply(hang=True))
    hung.start()
    try:
        result = subprocess.run(
            [*ROLLOUT, "--base-url", hung.base_url, "--timeout", "4", "--stall-notice", "1", prompts],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin", "COLUMNS": "80", "HOME": str(tmp_path)},
        )
    finally:
        hung.stop()
    warning = [line for line in result.stderr.splitlines() if "no reply yet" in line]
    assert len(warning) == 1, result.stderr
    assert warning[0].startswith(f"bv rollout: warning: no reply yet from {hung.base_url} after 1 s")
    assert warning[0].endswith("check that the server is up and serving, or Ctrl-C to stop")
    assert len(warning[0]) > 80  # whole: the terminal wraps it, bv does not cut it


def test_api_evaluate_raises_the_cause(sample_dir, strict, tmp_path):
    from bv import api
    from bv.core.errors import BVError

    with pytest.raises(BVError, match="refused the API key"):
        api.evaluate(
            sample_dir / "meta_data.jsonl",
            tmp_path / "run",
            model="m",
            base_url=strict.base_url,
            api_key=WRONG_KEY,
            cache=None,
            mode="rules",
            retries=0,
        )


def test_a_hostile_404_is_said_escaped(sample_dir, tmp_path):
    hostile = HostileOpenAI()
    hostile.start()
    try:
        result, _ = run_quiet(sample_dir, tmp_path, "-m", "escape-404", "--base-url", hostile.base_url)
    finally:
        hostile.stop()
    line = closing(result)
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "no \\x1b]0;title\\x07 model" in line
