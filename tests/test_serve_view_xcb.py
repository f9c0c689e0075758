"""The Serve window on Qt's xcb platform under an X server (Xvfb on display :86 where it is free), at
1280x720 and 1920x1080: left idle first, then a shared-prefix run of tiny-random with paged beside
prefix started with Ctrl+R, the transport keys, a drag of the timeline and a click on a cell, all sent
through the X server (xdotool), and the screen (ImageMagick's `import`) checked for what the panels
drew. This file is also the app's driver: `python tests/test_serve_view_xcb.py drive` starts the Serve
window as `python -m kvviz.ui.serve` does and reports its events and geometry as JSON lines.
"""
from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
DISPLAY = 86  # an X display of its own (other X servers on this machine keep theirs)
IDLE_S = 3
SHOTS = Path(os.environ.get("KVVIZ_SERVE_SHOTS", "")) if os.environ.get("KVVIZ_SERVE_SHOTS") else None


# -- the driver (runs in the app's process) ------------------------------------------------------
def drive() -> int:
    from PySide6.QtCore import QObject, QRect, QSettings, Signal
    from PySide6.QtWidgets import QApplication

    app = QApplication([sys.argv[0]])
    from kvviz.ui.serve.window import ServeWindow
    from kvviz.ui.serve.worker import ServeWorker

    # A settings file of its own: the form the window saves on closing never reaches ~/.config.
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "serve.ini"), QSettings.Format.IniFormat)
    window = ServeWindow(ServeWorker(threads=1), settings)
    window.setGeometry(app.primaryScreen().availableGeometry())
    window.showMaximized()
    window.form.set_models(["tiny-random"], "tiny-random")

    def say(obj) -> None:
        print(json.dumps(obj), flush=True)

    def root(widget, rect=None) -> list[int]:
        rect = widget.rect() if rect is None else rect
        p = widget.mapToGlobal(rect.topLeft())
        return [p.x(), p.y(), rect.width(), rect.height()]

    def answer(question: str) -> None:
        word, *args = question.split()
        if word == "state":
            say({"step": window.step, "request": window.request, "n_steps": window.run.n_steps(),
                 "schedulers": list(window.run.schedulers), "state": window.state, "error": window.error_text()})
        elif word == "setup":  # test setup, not behaviour: a preset and the schedulers ticked
            window.form.load_preset(args[0])
            window.form.set_schedulers(args[1].split(","))
            window.form.blocks.setValue(int(args[2]))
            say({"ok": True})
        elif word == "rects":
            say({"window": root(window), "timeline": root(window.transport.timeline),
                 "frames": {k: root(f) for k, f in window.grid.frames.items() if f.isVisible()},
                 "blocks": {k: root(window.grid.panels["timeline"], r) for k, r, _c in
                            window.grid.panels["timeline"].blocks}})
        elif word == "cell":  # the root pixel at the centre of (scheduler, request, step)'s first cell
            k, request, step = args[0], int(args[1]), int(args[2])
            panel = window.grid.panels["timeline"]
            _k, rect, cell_w = next(b for b in panel.blocks if b[0] == k)
            x0 = window.run.timeline(k, panel.cap).x0
            local = QRect(rect.left() + int((x0[step] + 0.5) * cell_w), rect.top() + int((request + 0.5) *
                          panel.cell_px[1]), 1, 1)
            say({"point": root(panel, local)[:2]})

    class Inbox(QObject):
        asked = Signal(str)

    inbox = Inbox()
    inbox.asked.connect(answer)
    threading.Thread(target=lambda: [inbox.asked.emit(line.strip()) for line in sys.stdin], daemon=True).start()
    window.run_started.connect(lambda _r: say({"event": "started"}))
    window.run_finished.connect(lambda _r: say({"event": "finished"}))
    window.run_failed.connect(lambda _r, m: say({"event": "failed", "message": m}))
    say({"event": "ready"})
    code = app.exec()
    window.shutdown_worker()
    return code


# -- the tests -----------------------------------------------------------------------------------
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Qt's xcb platform is Linux's")


class App:
    """A program on the X server that reports JSON lines (events, answers): by default this file's driver;
    `command` and `extra_env` start another (tests/test_hostile_windows.py starts the whole app)."""

    def __init__(self, display: str, command: list[str] | None = None, extra_env: dict | None = None) -> None:
        self.env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
        self.env.update(DISPLAY=display, PYTHONPATH=str(ROOT), **(extra_env or {}))
        self.display = display
        self.proc = subprocess.Popen(command or [sys.executable, __file__, "drive"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env, cwd=ROOT)
        self.events: queue.Queue = queue.Queue()
        self.answers: queue.Queue = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            (self.events if "event" in message else self.answers).put(message)

    def wait_event(self, name: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {name!r} in {timeout:g} s: {''.join(self.stderr)[-2000:]}") from None
            assert event["event"] != "failed", event
            if event["event"] == name:
                return

    def ask(self, question: str) -> dict:
        self.proc.stdin.write(question + "\n")
        self.proc.stdin.flush()
        return self.answers.get(timeout=30)

    def until(self, test, timeout: float = 10) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            state = self.ask("state")
            if test(state) or time.monotonic() > deadline:
                return state
            time.sleep(0.1)

    def xdotool(self, *args: str) -> None:
        subprocess.run(["xdotool", *args], env=self.env, check=True, timeout=60)

    def key(self, *keys: str) -> None:
        self.xdotool("key", "--delay", "80", *keys)

    def grab(self, path: Path) -> np.ndarray:
        """The screen, after the window has had a moment to paint what it last drew."""
        from PIL import Image

        time.sleep(0.7)
        subprocess.run(["import", "-display", self.display, "-window", "root", str(path)], check=True, timeout=60)
        if SHOTS is not None:
            shutil.copy(path, SHOTS / path.name)
        return np.asarray(Image.open(path).convert("RGB")).astype(int)

    def close(self) -> None:
        self.key("ctrl+w")
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def crop(image: np.ndarray, rect: list[int]) -> np.ndarray:
    x, y, w, h = rect
    return image[max(0, y):y + h, max(0, x):x + w]


def pixels_of(area: np.ndarray, hex_color: str, tol: int = 8) -> int:
    c = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)])
    return int(np.count_nonzero(np.abs(area - c).max(axis=2) <= tol))


@pytest.fixture(params=[(1280, 720), (1920, 1080)], ids=["1280x720", "1920x1080"])
def screen(request):
    import xserver

    missing = xserver.what_is_missing()
    if missing or shutil.which("import") is None:
        pytest.skip(missing or "ImageMagick's import is not installed")
    xserver.FIRST_DISPLAY = DISPLAY
    server = xserver.start_xvfb(request.param)
    yield server
    server.stop()


def test_the_serve_window_idle_then_a_shared_prefix_run_driven_through_x(screen, tmp_path):
    from kvviz.ui.serve import colors
    from kvviz.ui.serve.grid import FRAME_MIN

    w, h = screen.size
    app = App(screen.display)
    try:
        app.wait_event("ready", timeout=60)
        time.sleep(IDLE_S)  # left alone first: nothing may tick, nothing may break
        idle = app.grab(tmp_path / f"serve-idle-{w}x{h}.png")
        rects = app.ask("rects")
        x, y, ww, wh = rects["window"]
        assert x >= 0 and y >= 0 and x + ww <= w and y + wh <= h, rects["window"]
        for key, (_x, _y, fw, fh) in rects["frames"].items():
            assert fw >= FRAME_MIN[0] and fh >= FRAME_MIN[1], (key, fw, fh)  # given way by scrolling, not squeezed
        assert idle[:, :, :].std() > 10  # a window was drawn, not a blank screen

        assert app.ask("setup shared-prefix paged,prefix 64")["ok"]
        app.key("ctrl+r")
        app.wait_event("started")
        app.wait_event("finished", timeout=180)
        state = app.ask("state")
        assert state["error"] == "" and state["schedulers"] == ["paged", "prefix"]
        n = state["n_steps"]
        done = app.grab(tmp_path / f"serve-shared-prefix-{w}x{h}.png")
        rects = app.ask("rects")
        timeline = crop(done, rects["frames"]["timeline"])
        assert pixels_of(timeline, colors.CELL_COLORS["prefill"]) > 50
        assert pixels_of(timeline, colors.CELL_COLORS["decode"]) > 50

        # The keys, sent to the window through the X server.
        for keys, expected in ((("Home",), 0), (("Right", "Right"), 2), (("Left",), 1), (("End",), n - 1)):
            app.key(*keys)
            assert app.until(lambda s, e=expected: s["step"] == e)["step"] == expected, keys
        # A drag of the timeline's handle (at the right end after End) to the middle.
        tx, ty, tw, th = rects["timeline"]
        app.xdotool("mousemove", "--sync", str(tx + tw - 5), str(ty + th // 2))
        app.xdotool("mousedown", "1")
        app.xdotool("mousemove", "--sync", str(tx + tw // 2), str(ty + th // 2))
        app.xdotool("mouseup", "1")
        state = app.until(lambda s: 0 < s["step"] < n - 1)
        assert abs(state["step"] - (n - 1) / 2) <= max(2, n // 8), state
        # A click on request 3's cell at prefix's step 4.
        px, py = app.ask("cell prefix 3 4")["point"]
        app.xdotool("mousemove", "--sync", str(px), str(py))
        app.xdotool("click", "1")
        state = app.until(lambda s: s["request"] == 3)
        assert (state["request"], state["step"]) == (3, 4)
        picked = app.grab(tmp_path / f"serve-picked-{w}x{h}.png")
        pool = crop(picked, rects["frames"]["pool"])  # at step 4 requests 0..4 hold blocks in both pools
        assert all(pixels_of(pool, colors.request_color(r).name(), tol=4) > 20 for r in range(3))
        text = crop(picked, rects["frames"]["text"])
        assert pixels_of(text, colors.scheduler_color("prefix"), tol=30) > 10  # its text under both schedulers
    finally:
        app.close()


if __name__ == "__main__" and sys.argv[1:2] == ["drive"]:
    sys.exit(drive())
