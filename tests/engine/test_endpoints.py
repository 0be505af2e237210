"""Endpoint errors are named and fail fast; endpoint options are checked before any work (issue 9)."""

from __future__ import annotations

import socket
import socketserver
import threading
import time

import pytest
from support.commands import bv_inproc, jsonl
from support.fakeopenai import Reply

from bv.engine.endpoints import BadEndpoint, check_base_url


def dead_port() -> int:
    """A loopback port where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_refused_connection_stops_the_run_at_once_named(prompts):
    port = dead_port()
    started = time.monotonic()
    result = bv_inproc(f"bv rollout --base-url http://127.0.0.1:{port}/v1 -m m -j 4 --no-cache {prompts}")
    elapsed = time.monotonic() - started
    assert result.returncode == 1 and elapsed < 10, (elapsed, result.stderr)
    assert f"connection refused by 127.0.0.1:{port}" in result.stderr
    assert "cannot reach the model endpoint" in result.stderr and "--base-url" in result.stderr
    assert "timeout" not in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.count("cannot reach") == 1  # one clear message, not one per item


def test_refused_connection_fails_fast_even_one_at_a_time(prompts):
    port = dead_port()
    started = time.monotonic()
    result = bv_inproc(f"bv rollout --base-url http://127.0.0.1:{port}/v1 -m m -j 1 --no-cache {prompts}")
    assert result.returncode == 1 and time.monotonic() - started < 15
    assert f"connection refused by 127.0.0.1:{port}" in result.stderr


class PlainHTTP(socketserver.BaseRequestHandler):
    """Answers anything, a TLS hello included, with a plain-HTTP 400, and closes."""

    def handle(self) -> None:
        self.request.recv(4096)
        self.request.sendall(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")


def test_tls_to_a_plain_http_server_is_a_tls_failure(prompts):
    listener = socketserver.ThreadingTCPServer(("127.0.0.1", 0), PlainHTTP)
    port = listener.server_address[1]
    threading.Thread(target=listener.serve_forever, daemon=True).start()
    try:
        started = time.monotonic()
        result = bv_inproc(
            f"bv rollout --base-url https://127.0.0.1:{port}/v1 -m m -j 2 --no-cache {prompts}"
        )
    finally:
        listener.shutdown()
        listener.server_close()
    assert result.returncode == 1 and time.monotonic() - started < 10
    assert f"TLS failure connecting to 127.0.0.1:{port}" in result.stderr, result.stderr


def test_closed_connection_is_named_and_retried_not_fatal(prompts, server):
    server.responder = lambda seen: Reply(drop=True) if len(server.seen) <= 2 else Reply()
    result = bv_inproc(
        f"bv rollout --base-url {server.base_url} -m m -j 1 --no-cache --retries 0 {prompts}",
        env={"BV_RETRY_BASE_S": "0.01"},
    )
    rows = jsonl(result.stdout)
    assert len(rows) == 12 and "cannot reach" not in result.stderr
    errors = [r["error"] for r in rows if r["error"]]
    assert errors and all(f"connection closed by 127.0.0.1:{server.port}" in e for e in errors), errors


@pytest.mark.parametrize(
    "url, why",
    [
        (
            "localhost:40227/v1",
            "needs an http:// or https:// scheme (did you mean http://localhost:40227/v1?)",
        ),
        ("ftp://host/v1", "needs an http:// or https:// scheme"),
        ("http:///v1", "has no host"),
        ("http://host:99999/v1", "invalid port"),
        ("http://user:hunter2pass@host/v1", "carries credentials"),
    ],
)
def test_bad_base_urls_exit_2_before_any_work(prompts, server, url, why):
    result = bv_inproc(f"bv rollout --base-url '{url}' -m m --no-cache {prompts}")
    assert result.returncode == 2 and why in result.stderr, result.stderr
    assert "hunter2pass" not in result.stderr and result.stdout == ""
    with pytest.raises(BadEndpoint):
        check_base_url(url)


def test_bad_base_url_from_the_environment_exits_2(prompts):
    result = bv_inproc(f"bv rollout -m m {prompts}", env={"OPENAI_BASE_URL": "localhost:8000/v1"})
    assert result.returncode == 2 and "OPENAI_BASE_URL" in result.stderr and "scheme" in result.stderr


def test_bad_judge_url_exits_2(tmp_path):
    rows = tmp_path / "r.jsonl"
    rows.write_text("")
    result = bv_inproc(f"bv judge --judge-model j --judge-base-url 'localhost:1/v1' {rows}")
    assert result.returncode == 2 and "--judge-base-url" in result.stderr


def test_judge_endpoint_down_stops_fast_with_a_clear_message(sample_dir, server, tmp_path):
    rollouts = tmp_path / "rollouts.jsonl"
    made = bv_inproc(
        f"bv prompt {sample_dir}/meta_data.jsonl | bv rollout --base-url {server.base_url} -m m --no-cache"
        f" > {rollouts}"
    )
    assert made.returncode == 0, made.stderr
    port = dead_port()
    started = time.monotonic()
    result = bv_inproc(
        f"bv judge --mode llm --judge-model j --judge-base-url http://127.0.0.1:{port}/v1"
        f" --no-cache {rollouts}"
    )
    assert result.returncode == 1 and time.monotonic() - started < 10
    assert "cannot reach the judge endpoint" in result.stderr and "--judge-base-url" in result.stderr
    assert f"connection refused by 127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr


def test_http_proxy_from_the_environment_is_used(prompts, server):
    """HTTP_PROXY is honoured as the SDK honours it: the request goes to the proxy, for the real host."""
    result = bv_inproc(
        f"bv rollout --base-url http://upstream.invalid/v1 -m m -j 2 --no-cache {prompts}",
        env={"HTTP_PROXY": f"http://127.0.0.1:{server.port}", "NO_PROXY": "", "no_proxy": ""},
    )
    assert result.returncode == 0, result.stderr
    assert server.seen and all(s.path == "http://upstream.invalid/v1/chat/completions" for s in server.seen)
