"""Waiting on a loopback server: a request's identity across retries, and polling for a condition."""

from __future__ import annotations

import hashlib
import json
import time


def request_key(seen) -> str:
    return hashlib.sha256(json.dumps(seen.body["messages"], sort_keys=True).encode()).hexdigest()


def wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)
