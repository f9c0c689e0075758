"""The Watch window against a real `vllm serve` (converted tiny on CPU, blocks of 32, prefix caching and KV events
on; started once for the module, plus the restart of the last test): a recording of four requests sharing a
system prompt replayed in the window draws the trunk and its branches and the series (pixels of the panels), the
same recording replayed twice draws the same frames, a live watch closes, reopens and quits with no thread left,
a server killed mid-watch is drawn "down" and "up" again when it is back, and under Xvfb (xcb) `kvviz watch
--replay FILE --gui` draws the tree at 1280x720 and 1920x1080 and quits on Ctrl+Q. Skips, saying why, where no
interpreter with vLLM is found ($KVVIZ_VLLM_PYTHON).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("zmq")
pytest.importorskip("msgspec")
pytest.importorskip("prometheus_client")

import test_watch_vllm as real  # noqa: E402 (after the skips)
from test_watch_vllm import BLOCK, QUESTIONS, SYSTEM, _session  # noqa: E402

server = real.server  # the module's own `vllm serve`, started once (the fixture of test_watch_vllm)

ROOT = Path(__file__).resolve().parent.parent
TRUNK = (0x1F, 0x77, 0xB4)  # the first server's colour: its trunks, its lines
UP, DOWN = (0x2C, 0xA0, 0x2C), (0xD6, 0x27, 0x28)  # the status line's state words


@pytest.fixture(scope="module")
def recording(server, tmp_path_factory):
    """A recorded live session over the four requests sharing the system prompt."""
    path = tmp_path_factory.mktemp("viewrec") / "shared.kvwatch"
    session = _session(server, path)
    assert session.wait_for(lambda h: h.servers[0].state == "up" and "replay" in h.servers[0].events, 60)
    with session.lock:
        before = session.history.servers[0].last.prefix_hits
    for q in QUESTIONS:
        server.complete(SYSTEM + q)
    want = before + (len(QUESTIONS) - 1) * 3 * BLOCK
    assert session.wait_for(lambda h: h.servers[0].last.prefix_hits >= want, 30)
    time.sleep(0.6)  # two more samples: the last batch's effects folded into a point
    return session.stop()


def _window(qtbot, tmp_path, size=(1280, 720)):
    from PySide6.QtCore import QSettings

    from kvviz.ui.watch.window import WatchWindow

    w = WatchWindow(QSettings(str(tmp_path / "watch.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.resize(*size)
    w.show()
    qtbot.waitExposed(w)
    return w


def _pixels(widget) -> np.ndarray:
    from kvviz.ui.exporters import image_array

    image = widget.grab().toImage()
    return np.zeros((0, 0, 3), np.uint8) if image.isNull() else image_array(image)  # an empty label: no pixels


def _count(img: np.ndarray, rgb) -> int:
    return int((img == np.array(rgb, dtype=np.uint8)).all(axis=2).sum())


def _shades(img: np.ndarray, rgb) -> int:
    """Pixels of the colour or one of the tree's lighter shades of it."""
    from PySide6.QtGui import QColor

    base = QColor(*rgb)
    return sum(_count(img, c.getRgb()[:3]) for c in (base, base.lighter(130), base.lighter(165)))


def _replay_to_end(w, path) -> list[np.ndarray]:
    """Replay `path` paused, a sample per Step, the panel area's pixels after each."""
    assert w.replay(path, paused=True), w.error_text()
    shots = [_pixels(w.panel_area)]
    while not w.source.done:
        w.step_once()
        shots.append(_pixels(w.panel_area))
    return shots


def _plot_area(panel) -> np.ndarray:
    """The pixels of a two-plot panel's upper plot's data area."""
    from kvviz.ui.exporters import image_array

    view = panel.plots[0].getViewBox()
    rect = view.mapRectToScene(view.boundingRect()).toRect()
    return image_array(panel.view.grab(rect).toImage())


def test_a_replayed_recording_draws_the_tree_and_the_series(qtbot, tmp_path, recording):
    """Before: no trunk colour in the tree or the plots. After the replay: the trunk of three blocks and its four
    branches in the tree panel, the blocks in use and TTFT as lines of the server's colour in their plots."""
    w = _window(qtbot, tmp_path)
    tree = w.grid.panels["tree"]
    assert _shades(_pixels(tree), TRUNK) == 0
    shots = _replay_to_end(w, recording)
    img = _pixels(tree)
    assert _count(img, TRUNK) > 2000, "no trunk drawn"
    from PySide6.QtGui import QColor

    branch = QColor(*TRUNK).lighter(165).getRgb()[:3]
    assert _count(img, branch) > 1000, "no branches drawn"
    assert "a trunk of 3 blocks with 4 branches" in tree.bands[0][0]
    for key in ("usage", "latency", "cache"):
        assert _count(_plot_area(w.grid.panels[key]), TRUNK) > 20, f"no line in the {key} panel"
    assert not np.array_equal(shots[0], shots[-1])


def test_the_same_recording_replayed_twice_draws_the_same_frames(qtbot, tmp_path, recording):
    w = _window(qtbot, tmp_path)
    first = _replay_to_end(w, recording)
    second = _replay_to_end(w, recording)
    assert len(first) == len(second) > 2
    for i, (a, b) in enumerate(zip(first, second)):
        assert np.array_equal(a, b), f"sample {i} drawn differently"


def test_the_window_exports_the_view_the_page_and_an_animation_of_a_recording(qtbot, tmp_path, recording):
    """PNG (the trunk's colour in it), SVG, the page (the trunk in its data) and a GIF of the recording replayed
    into the panels (a frame per sample, the last with the trunk drawn)."""
    from PIL import Image

    w = _window(qtbot, tmp_path)
    with pytest.raises(ValueError, match="nothing to export"):
        w.exports.export("png", tmp_path / "none.png")
    _replay_to_end(w, recording)
    png = w.exports.export("png", tmp_path / "view.png")
    assert _count(np.asarray(Image.open(png).convert("RGB")), TRUNK) > 2000
    svg = w.exports.export("svg", tmp_path / "view.svg").read_text()
    assert svg.startswith("<?xml") and "<svg" in svg
    page = w.exports.export("page", tmp_path / "watch.html").read_text()
    assert "a trunk of 3 blocks with 4 branches" in page
    gif = w.exports.export("gif", tmp_path / "watch.gif")
    with Image.open(gif) as im:
        frames = im.n_frames
        im.seek(frames - 1)
        last = np.asarray(im.convert("RGB"))
    assert 2 <= frames <= w.source.total
    near = (np.abs(last.astype(int) - np.array(TRUNK)) <= 12).all(axis=2).sum()  # a GIF's palette is near
    assert near > 2000, near


def _watch_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("kvviz-watch")]


def _live(w, srv) -> None:
    from kvviz.ui.watch.dialog import make_request

    request = make_request(srv.url, events_port=srv.events_port, replay_port=srv.replay_port,
                           topic="kv-events", interval_s=0.25)
    assert w.watch(request), w.error_text()


def test_the_window_closes_reopens_and_quits_with_a_live_watch_leaving_no_thread(qtbot, tmp_path, server):
    from kvviz.ui.qtapp import quit_app

    w = _window(qtbot, tmp_path)
    _live(w, server)
    qtbot.waitUntil(lambda: _count(_pixels(w.transport.status), UP) > 0, timeout=60_000)
    assert _watch_threads()
    w.close()
    assert _watch_threads() == []
    w.show()
    assert w.start_run()  # Run: the same servers again
    assert _count(_pixels(w.transport.status), UP) == 0  # the closed session's picture is gone
    qtbot.waitUntil(lambda: _count(_pixels(w.transport.status), UP) > 0, timeout=60_000)
    assert _watch_threads()
    quit_app()
    assert not w.isVisible() and _watch_threads() == []


def test_a_server_killed_mid_watch_is_drawn_down_and_up_again(qtbot, tmp_path, server):
    """Killed: the status line's state turns red (down, retrying); started again: green, the mirror emptied (no
    block drawn) until a request's blocks come."""
    w = _window(qtbot, tmp_path)
    _live(w, server)
    status, tree = w.transport.status, w.grid.panels["tree"]
    qtbot.waitUntil(lambda: _count(_pixels(status), UP) > 0, timeout=60_000)
    server.kill()
    qtbot.waitUntil(lambda: _count(_pixels(status), DOWN) > 0 and _count(_pixels(status), UP) == 0, timeout=30_000)
    assert "down, retrying with backoff" in status.text()
    server.start()
    qtbot.waitUntil(lambda: _count(_pixels(status), UP) > 0 and _count(_pixels(status), DOWN) == 0, timeout=60_000)
    qtbot.waitUntil(lambda: _shades(_pixels(tree), TRUNK) == 0, timeout=30_000)
    server.complete(SYSTEM + QUESTIONS[0])
    qtbot.waitUntil(lambda: _shades(_pixels(tree), TRUNK) > 500, timeout=30_000)
    w.close()
    assert _watch_threads() == []


def _free_display() -> int:
    for n in range(89, 120):
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
            return n
    pytest.skip("no free X display number")


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_the_gui_command_draws_a_recording_under_xvfb_and_quits_on_ctrl_q(recording, tmp_path, size):
    for tool in ("Xvfb", "xdotool", "import"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    display = _free_display()
    xvfb = subprocess.Popen(["Xvfb", f":{display}", "-screen", "0", f"{size[0]}x{size[1]}x24"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    env = dict(os.environ, DISPLAY=f":{display}", QT_QPA_PLATFORM="xcb", XDG_RUNTIME_DIR=str(runtime))
    app = None
    try:
        for _ in range(50):
            if Path(f"/tmp/.X11-unix/X{display}").exists():
                break
            time.sleep(0.1)
        app = subprocess.Popen([sys.executable, "-m", "kvviz", "watch", "--replay", str(recording), "--gui",
                                "--settings", str(tmp_path / "s.ini")], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        shot = tmp_path / "shot.png"
        from PIL import Image

        trunk = 0
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and trunk < 3000:
            time.sleep(1)
            assert app.poll() is None, app.stdout.read().decode(errors="replace")[-2000:]
            subprocess.run(["import", "-window", "root", str(shot)], env=env, capture_output=True, timeout=30)
            if shot.exists():
                img = np.asarray(Image.open(shot).convert("RGB"))
                trunk = _count(img, TRUNK)
        if os.environ.get("KVVIZ_WATCH_SHOTS"):
            shutil.copy(shot, Path(os.environ["KVVIZ_WATCH_SHOTS"]) / f"watch-{size[0]}x{size[1]}.png")
        assert trunk >= 3000, f"the trunk's colour covers {trunk} px of the screen"
        subprocess.run(["xdotool", "mousemove", str(size[0] // 2), str(size[1] // 3), "click", "1"], env=env,
                       timeout=10)
        subprocess.run(["xdotool", "key", "ctrl+q"], env=env, timeout=10)
        assert app.wait(timeout=30) == 0
    finally:
        if app is not None and app.poll() is None:
            app.kill()
            app.wait()
        xvfb.terminate()
        xvfb.wait()


def test_the_gui_refuses_page_in_one_line(capsys, tmp_path):
    from kvviz.cli import main

    assert main(["watch", "--replay", str(tmp_path / "x.kvwatch"), "--gui", "--page", str(tmp_path / "p.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--page is written without the window" in err, err
