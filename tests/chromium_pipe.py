"""Drive headless Chromium over the DevTools protocol on a pipe (no WebSocket library needed).

``chromium --remote-debugging-pipe`` reads protocol commands from file descriptor 3 and
writes its replies and events to descriptor 4, each message NUL-terminated JSON. The
browser opens pages, clicks, types keys and takes screenshots as a person's would; the
console messages and uncaught exceptions of every page are collected.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

from test_report import CHROMIUM_FLAGS, chromium

TIMEOUT = 60.0


class BrowserError(Exception):
    pass


class Browser:
    """One headless Chromium with one page, attached in flat session mode."""

    def __init__(self, profile: Path, *, width: int = 1280, height: int = 900) -> None:
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()

        def descriptors() -> None:  # in the child, before exec
            # Out of the way first (either end may be 3 or 4), then onto 3 and 4, which
            # dup2 leaves open across exec.
            high_read = fcntl.fcntl(commands_read, fcntl.F_DUPFD, 10)
            high_write = fcntl.fcntl(replies_write, fcntl.F_DUPFD, 10)
            os.dup2(high_read, 3)
            os.dup2(high_write, 4)

        profile.mkdir(parents=True, exist_ok=True)
        flags = [
            flag for flag in CHROMIUM_FLAGS if flag not in ("--enable-logging=stderr", "--v=0")
        ]
        self.process = subprocess.Popen(
            [
                chromium(),
                *flags,
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                "--hide-scrollbars",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=descriptors,
            close_fds=False,
        )
        os.close(commands_read)
        os.close(replies_write)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self.session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )

    # -- the protocol --------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        os.write(self._commands, json.dumps(message).encode("utf-8") + b"\0")

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("Chromium did not answer in time")
            ready, _, _ = select.select([self._replies], [], [], left)
            if ready:
                chunk = os.read(self._replies, 1 << 20)
                if not chunk:
                    raise BrowserError("Chromium closed its pipe")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\0")
        found: dict[str, Any] = json.loads(line)
        return found

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, session: bool = False
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        self._send(message)
        deadline = time.monotonic() + TIMEOUT
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, method: str, *, after: int) -> dict[str, Any]:
        """The first event ``method`` after ``after`` events (waiting for it if needed)."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            for event in self.events[after:]:
                if event["method"] == method:
                    return event
            reply = self._receive(deadline)
            if "method" in reply:
                self.events.append(reply)

    # -- what a person does --------------------------------------------------------------

    def _until_loaded(self, began: int) -> None:
        self.wait_for("Page.loadEventFired", after=began)

    def open(self, url: str) -> None:
        began = len(self.events)
        self.call("Page.navigate", {"url": url}, session=True)
        self._until_loaded(began)

    def evaluate(self, expression: str) -> Any:
        found = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=True,
        )
        if "exceptionDetails" in found:
            raise BrowserError(f"{expression}: {found['exceptionDetails']}")
        return found["result"].get("value")

    def click(self, selector: str) -> None:
        """Click the element ``selector`` finds, at its centre, and wait for the next page."""
        box = self.evaluate(
            f"(function () {{ var e = document.querySelector({json.dumps(selector)});"
            " if (!e) { return null; } e.scrollIntoView({block: 'center'});"
            " var r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        if box is None:
            raise BrowserError(f"nothing matches {selector} on {self.location()}")
        began = len(self.events)
        for kind in ("mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1},
                session=True,
            )
        self._until_loaded(began)

    def press(self, key: str, *, navigates: bool = True) -> None:
        """Type one key (a digit) into the page, as a keyboard would."""
        began = len(self.events)
        code = f"Digit{key}" if key.isdigit() else key
        common = {"key": key, "code": code, "windowsVirtualKeyCode": ord(key.upper())}
        self.call(
            "Input.dispatchKeyEvent", {"type": "keyDown", "text": key, **common}, session=True
        )
        self.call("Input.dispatchKeyEvent", {"type": "keyUp", **common}, session=True)
        if navigates:
            self._until_loaded(began)

    def location(self) -> str:
        found: str = self.evaluate("location.href")
        return found

    def text(self, selector: str = "body") -> str:
        found: str = self.evaluate(
            f"(document.querySelector({json.dumps(selector)}) || {{textContent: ''}}).textContent"
        )
        return found

    def screenshot(self, path: Path) -> Path:
        height = self.evaluate("Math.min(document.documentElement.scrollHeight, 4000)")
        self.evaluate("window.scrollTo(0, 0)")
        data = self.call(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": 1280, "height": height, "scale": 1},
            },
            session=True,
        )["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def problems(self) -> list[str]:
        """Console messages and uncaught exceptions of every page so far."""
        found = []
        for event in self.events:
            if event["method"] == "Runtime.exceptionThrown":
                found.append(json.dumps(event["params"]["exceptionDetails"])[:500])
            elif event["method"] == "Runtime.consoleAPICalled":
                found.append(json.dumps(event["params"]["args"])[:500])
            elif event["method"] == "Log.entryAdded":
                entry = event["params"]["entry"]
                if entry.get("level") in ("error", "warning"):
                    found.append(f"{entry.get('source')}: {entry.get('text')}"[:500])
        return found

    def close(self) -> None:
        with contextlib.suppress(BrowserError):
            self.call("Browser.close")
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._commands)
        os.close(self._replies)
