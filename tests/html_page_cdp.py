"""Headless Chromium driven over the DevTools protocol, for the HTML page's tests and benchmark: load a file
from disk with every host name unresolvable, press keys, read the DOM and a screenshot, and collect what
would fail a page (a console error, an exception, a request for anything but the file itself).

Needs /usr/bin/chromium (or $KVVIZ_CHROMIUM) and the websocket-client package; `missing()` says which is
absent so a test can skip saying why.
"""
from __future__ import annotations

import base64
import io
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--host-resolver-rules=MAP * ~NOTFOUND",
         "--disable-extensions", "--hide-scrollbars", "--mute-audio", "--font-render-hinting=none")
KEYS = {"ArrowLeft": ("ArrowLeft", 37), "ArrowRight": ("ArrowRight", 39), "ArrowUp": ("ArrowUp", 38),
        "ArrowDown": ("ArrowDown", 40), "Home": ("Home", 36), "End": ("End", 35), "PageUp": ("PageUp", 33),
        "PageDown": ("PageDown", 34), " ": ("Space", 32), "b": ("KeyB", 66)}


def chromium_path() -> str | None:
    named = os.environ.get("KVVIZ_CHROMIUM")
    if named:
        return named if os.access(named, os.X_OK) else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


def missing() -> str:
    """Why the browser tests cannot run here ("" when they can)."""
    if chromium_path() is None:
        return "no chromium on PATH or at $KVVIZ_CHROMIUM (Debian: apt-get install chromium chromium-driver)"
    try:
        import websocket  # noqa: F401
    except ImportError:
        return "the websocket-client package is missing (pip install websocket-client)"
    return ""


class Browser:
    """One headless Chromium with one page; `problems` collects console errors, exceptions and requests."""

    def __init__(self, width: int = 1600, height: int = 1000) -> None:
        import websocket

        self.profile = tempfile.mkdtemp(prefix="kvviz-chromium-")
        self.proc = subprocess.Popen(
            [chromium_path(), *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.is_file() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port within 30 s")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            pages = [t for t in json.load(answer) if t["type"] == "page"]
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        self._ids = itertools.count(1)
        self.events: list[dict] = []
        self.problems: list[str] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def call(self, method: str, **params):
        msg_id = next(self._ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._event(msg)

    def _event(self, msg: dict) -> None:
        method, params = msg.get("method", ""), msg.get("params", {})
        self.events.append(msg)
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.problems.append("console: " + " ".join(str(a.get("value", a.get("description", "")))
                                                        for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.problems.append("exception: " + str(details.get("exception", {}).get("description")
                                                     or details.get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.problems.append("log: " + params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            url = params.get("request", {}).get("url", "")
            if not url.startswith(("file:", "data:", "blob:", "about:")):
                self.problems.append("request: " + url)
        elif method == "Network.loadingFailed":
            self.problems.append("failed to load: " + params.get("errorText", ""))

    def pump(self, seconds: float = 0.05) -> None:
        """Read events that arrived meanwhile."""
        self.ws.settimeout(seconds)
        try:
            while True:
                self._event(json.loads(self.ws.recv()))
        except Exception:  # the timeout: nothing more for now
            pass
        finally:
            self.ws.settimeout(60)

    def open(self, path: Path, wait_s: float = 30) -> float:
        """Load the file and wait for the page's first draw; returns the seconds from navigation to it."""
        t0 = time.perf_counter()
        self.call("Page.navigate", url=Path(path).resolve().as_uri())
        deadline = time.monotonic() + wait_s
        while not self.eval("document.readyState === 'complete' && !!document.body && "
                            "document.body.dataset.frames !== undefined"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the page did not draw within {wait_s} s: {self.problems}")
            time.sleep(0.02)
        return time.perf_counter() - t0

    def open_any(self, path: Path) -> None:
        """Load a file that is not itself a page (a notebook cell's HTML) and wait for it to load."""
        self.call("Page.navigate", url=Path(path).resolve().as_uri())
        deadline = time.monotonic() + 30
        while self.eval("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise RuntimeError("the file did not load within 30 s")
            time.sleep(0.02)

    def eval(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def press(self, key: str) -> None:
        code, vk = KEYS[key]
        text = key if len(key) == 1 else ""  # a printable key types its character (" ", "b")
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=key, code=code, windowsVirtualKeyCode=vk,
                      nativeVirtualKeyCode=vk, **({"text": text} if kind == "keyDown" and text else {}))

    def click(self, x: float, y: float) -> None:
        """A left click at (x, y) in CSS pixels."""
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self):
        """The page as drawn, an (H, W, 3) uint8 array (and the PNG bytes)."""
        import numpy as np
        from PIL import Image

        png = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")), png

    def rect(self, selector: str) -> tuple[int, int, int, int]:
        """(x, y, width, height) of the element, in CSS pixels (the screenshot's at scale 1)."""
        r = self.eval(f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
                      f" return [r.x, r.y, r.width, r.height]; }})()")
        return tuple(int(round(v)) for v in r)

    def close(self) -> None:
        try:
            if getattr(self, "ws", None) is not None:
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
            shutil.rmtree(self.profile, ignore_errors=True)
