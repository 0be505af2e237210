"""A tiny headless-Chromium driver for tests: the DevTools protocol over `--remote-debugging-pipe`.

Stdlib only. Chromium reads protocol messages (JSON, each ended by a NUL byte) on its fd 3 and
writes them on its fd 4. `Browser.open` loads a page and records its console errors, uncaught
exceptions and log errors (CSP violations, failed loads); `evaluate` runs JS and returns the value.

    with Browser() as browser:
        browser.open(Path("report.html"), width=1280, height=900)
        n = browser.evaluate("document.querySelectorAll('.card').length")
        browser.screenshot(Path("build/report.png"))
        assert not browser.errors
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)


def find_chromium() -> str | None:
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    pass


class Browser:
    def __init__(self, executable: str | None = None, timeout: float = 30) -> None:
        self.executable = executable or find_chromium()
        if self.executable is None:
            raise BrowserError("no Chromium found (apt-get install chromium)")
        self.timeout = timeout
        self.errors: list[str] = []
        self._next_id = 0
        self._buffer = b""
        self._events: list[dict[str, Any]] = []
        self._session: str | None = None

    def __enter__(self) -> Browser:
        self._profile = tempfile.TemporaryDirectory(prefix="bv-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire() -> None:  # in the child, before exec: the pipes become fds 3 and 4
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome_r, from_chrome_w)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self._process = subprocess.Popen(
            [self.executable, *FLAGS, f"--user-data-dir={self._profile.name}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire,
            close_fds=True,
            pass_fds=(3, 4),
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._send("Browser.close", session=False, wait=False)
            self._process.wait(timeout=10)
        except (OSError, BrowserError, subprocess.TimeoutExpired):
            self._process.kill()
            self._process.wait()
        finally:
            os.close(self._to_chrome)
            os.close(self._from_chrome)
            self._profile.cleanup()

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_chrome], [], [], left)[0]:
                raise BrowserError("Chromium did not answer in time")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise BrowserError(f"Chromium closed the pipe (exit code {self._process.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _send(self, method: str, session: bool = True, wait: bool = True, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session and self._session:
            message["sessionId"] = self._session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        if not wait:
            return {}
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._on_event(reply)

    def _on_event(self, event: dict[str, Any]) -> None:
        self._events.append(event)
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append("console: " + " ".join(str(a.get("value", a)) for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append("exception: " + str(details.get("exception", {}).get("description", details)))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append("log: " + params["entry"].get("text", ""))

    def _wait_event(self, method: str) -> None:
        deadline = time.monotonic() + self.timeout
        seen = len(self._events)
        while not any(e.get("method") == method for e in self._events[seen:]):
            self._on_event(self._read_message(deadline))

    def open(self, path: Path | str, width: int = 1280, height: int = 900) -> None:
        """Load a local file (or a URL, given as text) in a fresh tab and wait for its load event."""
        target = self._send("Target.createTarget", session=False, url="about:blank")["targetId"]
        self._session = self._send("Target.attachToTarget", session=False, targetId=target, flatten=True)[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log"):
            self._send(f"{domain}.enable")
        self._send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        seen = len(self._events)
        self._send("Page.navigate", url=path if isinstance(path, str) else path.resolve().as_uri())
        if not any(e.get("method") == "Page.loadEventFired" for e in self._events[seen:]):
            self._wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JS expression (awaited if it is a promise); page exceptions raise."""
        result = self._send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:60]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        data = self._send("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
