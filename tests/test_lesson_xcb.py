"""The presenter on an X server: `kvviz lesson 07-kv-cache` under Xvfb with Qt's xcb platform at 1280x720 and
1920x1080, full screen; PageDown pressed with xdotool walks every stop, and at each one the screen's grab is the
picture the offscreen presenter draws for that stop: the caption band (where, title, caption) the same, pixel
for pixel, and the panels the same but for what a table fits to its room (the summary picks its type size
from the platform's metrics); B blanks the screen."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xserver
from PIL import Image
from test_lesson import lesson_runs

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Qt's xcb platform is Linux's"),
              pytest.mark.skipif(bool(xserver.what_is_missing()), reason=xserver.what_is_missing() or "")]


def screen(display: str, path: Path) -> np.ndarray:
    subprocess.run(["import", "-display", display, "-window", "root", str(path)], check=True, timeout=60)
    return np.asarray(Image.open(path).convert("RGB")).astype(int)


def offscreen_stops(runs, size) -> list[np.ndarray]:
    """The offscreen presenter's picture of every stop, in PageDown's order."""
    from PySide6.QtWidgets import QApplication
    from test_lesson_present import pixels

    from kvviz.ui.lessons.export import offscreen_presenter

    window = offscreen_presenter(runs.lesson, runs, size, "en")
    window.set_pointer(False)
    out = []
    try:
        for i, k in window.stops():
            window.go_to(i, k)
            QApplication.processEvents()
            out.append((pixels(window.grab().toImage()).astype(int), window.stage.y()))
    finally:
        window.close()
        window.deleteLater()
    return out


def settled_screen(display, path, before=None, timeout=20.0) -> np.ndarray:
    """The screen once it stops changing (and differs from `before`, when given)."""
    deadline = time.monotonic() + timeout
    last = screen(display, path)
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = screen(display, path)
        if np.array_equal(now, last) and (before is None or not np.array_equal(now, before)):
            return now
        last = now
    return last


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_pagedown_on_an_x_server_shows_every_stop_as_drawn_offscreen(qapp, tmp_path_factory, tmp_path, size):
    runs = lesson_runs(tmp_path_factory, "07-kv-cache")
    expected = offscreen_stops(runs, size)
    server = xserver.start_xvfb(size)
    env = server.env()
    env["XDG_RUNTIME_DIR"] = str(tmp_path)
    os.chmod(tmp_path, 0o700)
    proc = subprocess.Popen([sys.executable, "-m", "kvviz", "lesson", "07-kv-cache", "--runs", str(runs.folder)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        first = settled_screen(server.display, tmp_path / "s.png", before=np.zeros((size[1], size[0], 3), int),
                               timeout=60)
        subprocess.run(["xdotool", "key", "p"], env=env, check=True)  # the pointer off: the grab is the slide
        shot = settled_screen(server.display, tmp_path / "s.png")
        for i, (want, stage_top) in enumerate(expected):
            assert shot.shape == want.shape
            differs = np.abs(shot - want).max(axis=-1) > 48
            band, panels = differs[:stage_top].mean(), differs[stage_top:].mean()
            assert band < 0.005, f"stop {i}: {band:.1%} of the caption band differs from the offscreen picture"
            assert panels < 0.1, f"stop {i}: {panels:.1%} of the panels differ from the offscreen picture"
            if i + 1 < len(expected):
                subprocess.run(["xdotool", "key", "Next"], env=env, check=True)
                shot = settled_screen(server.display, tmp_path / "s.png", before=shot)
        subprocess.run(["xdotool", "key", "b"], env=env, check=True)
        assert settled_screen(server.display, tmp_path / "s.png", before=shot).max() == 0
        assert first.shape == (size[1], size[0], 3)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        server.stop()
