"""The lecture hall on an X server: `python main.py` under Xvfb with Qt's xcb platform at
1280x720, 1500x920 and 1920x1080, a 200-step run started with Ctrl+R, then Ctrl+= twice (125%, 150%,
live): in the pixels of the screen's grab, every plot the grid shows is at least its declared
readable size and shows its data; the panels without room are behind tabs, never squeezed.

tests/xcb_driver.py reports the plots' rectangles (root pixels); the sizes checked are cut from the
grab and the readable sizes are kvviz.ui.style's, scaled here by the zoom.
"""
from __future__ import annotations

import sys
import time

import numpy as np
import pytest
import xserver
from test_desktop_xcb import App, crop, pixels_of

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Qt's xcb platform is Linux's")

MATRICES = {"work_matrix", "attention"}  # READABLE_MATRIX; every other plot READABLE_PLOT
EXACT = ("naive", "concat", "static", "paged")
APPROX = ("window", "sinks", "int8")


def readable(key: str, zoom: int) -> tuple[int, int]:
    from kvviz.ui import style

    w, h = style.READABLE_MATRIX if key in MATRICES else style.READABLE_PLOT
    return round(w * zoom / 100), round(h * zoom / 100)


def write_ini(path, engines) -> None:
    path.write_text(f'[run]\nmodel=tiny-random\nengines="{",".join(engines)}"\ntokens=200\n'
                    "[transport]\nspeed=0\n", encoding="utf-8")


def data_shown(area: np.ndarray, key: str, engines) -> bool:
    """The plot's data is drawn in this crop: matrix cells, or an engine's line."""
    from kvviz.ui.style import CELL_COLORS, engine_color

    if key in MATRICES:
        if key == "attention":
            return pixels_of(area, "#440154", 60) > area.shape[0] * area.shape[1] // 20  # viridis' low weights
        cells = sum(pixels_of(area, CELL_COLORS[k], 8) for k in ("masked", "cached", "recomputed", "computed"))
        return cells > area.shape[0] * area.shape[1] // 5
    return max(pixels_of(area, engine_color(e, i)) for i, e in enumerate(engines)) >= 20


def check_screen(app: App, path, zoom: int, engines) -> dict:
    """Every shown plot against its readable size, in the grab's pixels; returns {panel: (w, h)}."""
    grab = app.grab(path)
    rects = app.ask("rects")
    sizes, short, empty = {}, [], []
    for key, rect in rects.items():
        if key == "prompt" or not isinstance(rect, dict) or not rect["plots"]:
            continue  # a panel with no plot shown: behind a tab (or a table / text)
        plots = rect["plots"][:1] if key == "cache_memory" else rect["plots"]  # its block pool is a picture
        need = readable(key, zoom)
        for r in plots:
            area = crop(grab, r)
            h, w = area.shape[:2]  # what the screen holds of it (a plot cut at the edge counts as cut)
            sizes[key] = min(sizes.get(key, (w, h)), (w, h), key=lambda s: s[0] * s[1])
            if w < need[0] - 1 or h < need[1] - 1:
                short.append(f"{key} {w}x{h} < {need[0]}x{need[1]}")
            elif not data_shown(area, key, engines):
                empty.append(key)
    assert sizes, "no plot on the screen"
    assert not short, f"{short}; see {path}"
    assert not empty, f"no data drawn in {empty}; see {path}"
    return sizes


def check_settled(app: App, path, zoom: int, engines, within: float = 30.0) -> dict:
    """`check_screen` once the window has settled: after a zoom the relayout and the redraw that follows take
    a moment, longer on a loaded machine, so grab again (every half second, up to `within` s) until every
    plot passes; the last grab's failure is the test's failure. The check itself is unchanged (pixels)."""
    deadline = time.monotonic() + within
    while True:
        try:
            return check_screen(app, path, zoom, engines)
        except AssertionError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


def _start(tmp_path, screen, engines):
    """An X server of `screen`, the app on it with `engines` ready and its window over the whole screen (as
    maximised), the panels clicked so keys go to the window. Skips where the X tools are missing."""
    missing = xserver.what_is_missing()
    if missing:
        pytest.skip(missing)
    server = xserver.start_xvfb(screen)
    ini = tmp_path / "kvviz.ini"
    write_ini(ini, engines)
    app = App(server, ini)
    try:
        app.wait_event("ready", timeout=120)
        window = str(app.state()["window_id"])
        app.xdotool("windowmove", window, "0", "0")
        app.xdotool("windowsize", window, str(screen[0]), str(screen[1]))
        time.sleep(1)
        app.click([screen[0] // 2, screen[1] // 2, 1, 1])
    except BaseException:
        app.close()
        server.stop()
        raise
    return server, app


@pytest.mark.parametrize("screen", [(1280, 720), (1500, 920), (1920, 1080)])
def test_every_shown_plot_is_readable_at_100_and_150_percent(tmp_path, screen):
    server, app = _start(tmp_path, screen, EXACT)
    try:
        app.key("ctrl+r")
        app.wait_event("finished", timeout=240)
        time.sleep(2)
        at_100 = check_settled(app, tmp_path / "at100.png", 100, EXACT)
        app.key("ctrl+equal", "ctrl+equal")  # 125%, then 150%: live, the run kept
        time.sleep(3)
        at_150 = check_settled(app, tmp_path / "at150.png", 150, EXACT)
        state = app.state()
        assert state["n_steps"] == 200 and state["selected_step"] == 199, state
        assert "work_matrix" in at_100 and "work_matrix" in at_150  # the most important panel stays
    finally:
        code = app.close()
        server.stop()
    assert code == 0, "".join(app.stderr)[-2000:]


def test_approximate_caches_at_1280x720_and_150_percent(tmp_path):
    """window, sinks and int8: the quality panel joins the grid or a tab, readable either way."""
    server, app = _start(tmp_path, (1280, 720), APPROX)
    try:
        app.key("ctrl+equal", "ctrl+equal")
        app.key("ctrl+r")
        app.wait_event("finished", timeout=240)
        time.sleep(3)
        check_settled(app, tmp_path / "approx150.png", 150, APPROX)
    finally:
        code = app.close()
        server.stop()
    assert code == 0, "".join(app.stderr)[-2000:]
