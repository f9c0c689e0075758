"""The app on a Linux desktop: Qt's xcb platform under an X server (Xvfb), not the offscreen one.

`python main.py` runs as a person starts it (tests/xcb_driver.py only reports its events and answers
questions); the window is left idle, a prompt is typed and Ctrl+R pressed through the X server
(xdotool), and the screen the X server shows is checked panel by panel for the colours of the data.
Also: the one-line answers when the xcb plugin's system libraries or the X display are missing.
"""
from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import xserver

from kvviz.ui import xcb
from kvviz.ui.grid import DEFAULT_HIDDEN
from kvviz.ui.panels import PANELS

ROOT = Path(__file__).resolve().parent.parent
IDLE_S = 20  # the window left alone before the first key: a teacher reading it (idle must not break drawing)
PROMPT = "A cache is a promise"
TOKENS = 30
ENGINES = ("naive", "concat", "static", "paged")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Qt's xcb platform is Linux's")


# -- the X server and the app on it -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def x11():
    """Xvfb at 1920x1080 for this module (skipped, saying what is missing, where it cannot run)."""
    missing = xserver.what_is_missing()
    if missing:
        pytest.skip(missing)
    server = xserver.start_xvfb((1920, 1080))
    yield server
    server.stop()


class App:
    """`python main.py --settings INI` on the X server, watched through tests/xcb_driver.py."""

    def __init__(self, server: xserver.XServer, ini: Path) -> None:
        self.env = server.env(dict(os.environ, PYTHONPATH=str(ROOT)))
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "xcb_driver.py"), "--settings", str(ini)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=self.env, cwd=ROOT)
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
                continue  # the app's own prints
            (self.events if "event" in message else self.answers).put(message)

    def wait_event(self, name: str, timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {name!r} from the app in {timeout:g} s; stderr: "
                                     f"{''.join(self.stderr)[-2000:]}") from None
            if event["event"] == "failed":
                raise AssertionError(f"the run failed: {event['message']}")
            if event["event"] == name:
                return event

    def ask(self, question: str) -> dict:
        self.proc.stdin.write(question + "\n")
        self.proc.stdin.flush()
        return self.answers.get(timeout=30)

    def state(self) -> dict:
        return self.ask("state")

    def wait_until(self, test, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            state = self.state()
            if test(state) or time.monotonic() > deadline:
                return state
            time.sleep(0.1)

    def xdotool(self, *args: str) -> None:
        subprocess.run(["xdotool", *args], env=self.env, check=True, timeout=60)

    def click(self, rect: list[int]) -> None:
        x, y, w, h = rect
        self.xdotool("mousemove", "--sync", str(x + w // 2), str(y + h // 2))
        self.xdotool("click", "1")

    def key(self, *keys: str) -> None:
        self.xdotool("key", "--delay", "80", *keys)

    def grab(self, path: Path) -> np.ndarray:
        from PIL import Image

        assert self.ask(f"grab {path}")["grabbed"] == str(path)
        return np.asarray(Image.open(path).convert("RGB")).astype(np.int16)

    def close(self) -> int:
        """Ctrl+C in the terminal (the app closes its window) and the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def write_ini(path: Path, speed: int = 0) -> Path:
    # engines quoted: QSettings reads a bare a,b,c as a list
    path.write_text(f'[run]\nmodel=tiny-random\nengines="{",".join(ENGINES)}"\ntokens={TOKENS}\n'
                    f"[transport]\nspeed={speed}\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def first_run(x11, tmp_path_factory):
    """The app started, left idle IDLE_S seconds, the prompt clicked and typed, Ctrl+R pressed and the
    run finished: the app, the screen before the keys and after the run, and the panels' rectangles."""
    tmp = tmp_path_factory.mktemp("xcb")
    app = App(x11, write_ini(tmp / "kvviz.ini"))
    try:
        app.wait_event("ready", timeout=120)
        # The whole screen, as a maximised window: 1500x920 gives some panels no readable room, and the
        # grid puts them behind tabs (tests/test_lecture_layout_xcb.py); here every panel is checked.
        window = str(app.state()["window_id"])
        app.xdotool("windowmove", window, "0", "0")
        app.xdotool("windowsize", window, str(x11.size[0]), str(x11.size[1]))
        time.sleep(IDLE_S)
        idle = app.grab(tmp / "idle.png")
        app.click(app.ask("rects")["prompt"])
        app.key("ctrl+a")
        app.xdotool("type", "--delay", "30", PROMPT)
        typed = app.state()
        app.key("ctrl+r")
        app.wait_event("finished", timeout=120)
        time.sleep(1.5)  # the panels repaint from a timer
        shown = app.grab(tmp / "after_run.png")
        yield {"app": app, "typed": typed, "idle": idle, "shown": shown, "rects": app.ask("rects"), "dir": tmp}
    finally:
        code = app.close()
    assert code == 0, "".join(app.stderr)[-2000:]


# -- pixels -----------------------------------------------------------------------------------------------
def crop(image: np.ndarray, rect: list[int]) -> np.ndarray:
    x, y, w, h = rect
    return image[y:y + h, x:x + w]


def pixels_of(area: np.ndarray, colour: str, tol: int = 40) -> int:
    """Pixels within tol (summed over R, G, B) of colour: antialiased edges count when close."""
    rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.int16)
    return int((np.abs(area - rgb).sum(axis=2) < tol).sum())


def _cells(name: str) -> str:
    from kvviz.ui.style import CELL_COLORS

    return CELL_COLORS[name]


def _engine(name: str) -> str:
    from kvviz.ui.style import ENGINE_COLORS

    return ENGINE_COLORS[name]


DARK_TEXT = "#000000"
VIRIDIS_LOW = "#440154"  # the attention map's colour for weights near 0 (most of a causal row)


def check_token_stream(run, rect) -> dict:
    from kvviz.ui.style import HIGHLIGHT

    frame = rect["frame"]
    text_gain = pixels_of(crop(run["shown"], frame), DARK_TEXT, 120) - pixels_of(crop(run["idle"], frame),
                                                                                DARK_TEXT, 120)
    return {"dark text added": (text_gain, 800), "selected token highlighted": (
        pixels_of(crop(run["shown"], frame), HIGHLIGHT), 40)}


def check_work_matrix(run, rect) -> dict:
    plots = [crop(run["shown"], r) for r in rect["plots"]]
    out = {"matrices shown": (len(plots), len(ENGINES))}
    for engine, area in zip(ENGINES, plots):
        size = area.shape[0] * area.shape[1]
        out[f"{engine}: masked cells (% of plot)"] = (100 * pixels_of(area, _cells("masked"), 8) // size, 15)
        if engine == "naive":
            out["naive: recomputed cells (% of plot)"] = (100 * pixels_of(area, _cells("recomputed")) // size, 15)
        else:
            out[f"{engine}: cells not computed (% of plot)"] = (100 * pixels_of(area, _cells("empty"), 8) // size,
                                                               15)
    return out


def check_recompute(run, rect) -> dict:
    area = crop(run["shown"], rect["plots"][0])
    return {"naive's line": (pixels_of(area, _engine("naive")), 300),
            "concat's line": (pixels_of(area, _engine("concat")), 100)}


def check_attention(run, rect) -> dict:
    area = crop(run["shown"], rect["plots"][0])
    size = area.shape[0] * area.shape[1]
    return {"weights near 0 (% of plot)": (100 * pixels_of(area, VIRIDIS_LOW, 60) // size, 8),
            "masked (% of plot)": (100 * pixels_of(area, _cells("masked"), 8) // size, 8)}


def _series(run, rect, least: dict[str, int]) -> dict:
    out = {}
    for i, r in enumerate(rect["plots"]):
        area = crop(run["shown"], r)
        for engine, n in least.items():
            out[f"plot {i}: {engine}'s line"] = (pixels_of(area, _engine(engine)), n)
    return out


def check_latency(run, rect) -> dict:
    return _series(run, rect, {"naive": 100, "concat": 100, "static": 30, "paged": 30})


def check_bytes(run, rect) -> dict:
    return _series(run, rect, {"concat": 100, "paged": 40})


def check_cache_memory(run, rect) -> dict:
    from kvviz.ui.style import BLOCK_COLORS

    resident, pool = (crop(run["shown"], r) for r in rect["plots"])
    return {"concat's resident bytes": (pixels_of(resident, _engine("concat")), 50),
            "paged's pool: slots holding K/V": (pixels_of(pool, BLOCK_COLORS["used"]), 400)}


def check_summary(run, rect) -> dict:
    frame = rect["frame"]
    shown = crop(run["shown"], frame)
    gain = pixels_of(shown, DARK_TEXT, 120) - pixels_of(crop(run["idle"], frame), DARK_TEXT, 120)
    return {"figures added (dark text)": (gain, 200),
            "naive's column title": (pixels_of(shown, _engine("naive")), 10)}


CHECKS = {name.removeprefix("check_"): f for name, f in globals().items() if name.startswith("check_")}


# The panels a four-engine run shows (grid.DEFAULT_HIDDEN ones appear with an approximate cache:
# tests/test_window_status.py).
@pytest.mark.parametrize("key", [key for key, _ in PANELS if key not in DEFAULT_HIDDEN])
def test_each_panel_draws_its_run_after_an_idle_start(first_run, key):
    """After IDLE_S seconds idle, a typed prompt and Ctrl+R, each panel's plot area shows the run's data
    on the X server's screen (pixels of the data's colours; the idle screen had none of them)."""
    assert key in CHECKS, f"no pixel check for panel {key!r}: add check_{key} here"
    rect = first_run["rects"][key]
    figures = CHECKS[key](first_run, rect)
    short = {what: got for what, (got, least) in figures.items() if got < least}
    assert not short, f"{key}: {short} below {({w: figures[w][1] for w in short})}; see {first_run['dir']}"


def test_the_typed_prompt_is_what_ran(first_run):
    assert first_run["typed"]["prompt"] == PROMPT and first_run["typed"]["focus"] == "prompt"
    state = first_run["app"].state()
    assert state["state"] == "idle" and state["n_steps"] == TOKENS and state["selected_step"] == TOKENS - 1


def test_left_and_right_scrub_after_run_and_leave_the_prompt(first_run):
    """After Ctrl+R from the prompt, Left and Right move the timeline without another click, and the
    prompt keeps its text."""
    app = first_run["app"]
    last = TOKENS - 1
    app.key("Left", "Left")
    state = app.wait_until(lambda s: s["selected_step"] == last - 2, timeout=5)
    assert state["selected_step"] == last - 2 and state["timeline"] == last - 2, state
    app.key("Right")
    state = app.wait_until(lambda s: s["selected_step"] == last - 1, timeout=5)
    assert state["selected_step"] == last - 1 and state["timeline"] == last - 1, state
    assert state["prompt"] == PROMPT


def test_space_pauses_and_right_steps_a_streaming_run_typed_from_the_prompt(first_run):
    """A slow run started with Ctrl+R from the prompt: Space pauses it, Right steps it once, Left
    scrubs back, Space resumes; the prompt never receives a character."""
    app = first_run["app"]
    assert app.ask("speed 5")["speed"] == 5  # 5 steps/s: ~6 s of run to press keys in
    app.click(app.ask("rects")["prompt"])
    app.key("ctrl+r")
    app.wait_event("started")
    app.wait_until(lambda s: s["n_steps"] >= 3)
    try:
        app.key("space")
        paused = app.wait_until(lambda s: s["state"] == "paused", timeout=5)
        assert paused["state"] == "paused", paused
        time.sleep(0.5)
        held = app.state()
        assert held["n_steps"] == paused["n_steps"], "steps arrived while paused"
        app.key("Right")
        stepped = app.wait_until(lambda s: s["n_steps"] == held["n_steps"] + 1, timeout=10)
        assert stepped["n_steps"] == held["n_steps"] + 1, stepped
        app.key("Left")
        back = app.wait_until(lambda s: s["selected_step"] == stepped["selected_step"] - 1, timeout=5)
        assert back["selected_step"] == stepped["selected_step"] - 1, back
        assert back["prompt"] == PROMPT
    finally:
        app.key("Escape")  # stop what is left of the run
        app.wait_event("finished", timeout=60)
    assert app.state()["prompt"] == PROMPT


# -- a clean start: the xcb plugin's libraries and the X display ------------------------------------------
def start_main(env: dict[str, str], prefix: list[str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in env.items() if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([*(prefix or []), sys.executable, str(ROOT / "main.py")], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)


def test_a_display_nobody_serves_is_one_line_and_exit_code_2():
    """Qt aborted (exit 134, a page of advice) on DISPLAY naming no X server."""
    display = f":{xserver.unused_display()}"
    proc = start_main(dict(os.environ, DISPLAY=display))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    if xserver.what_is_missing() is None:
        assert f"no X server at DISPLAY='{display}'" in lines[0] and "QT_QPA_PLATFORM=offscreen" in lines[0]


def _resolved(sonames: list[str], plugin: Path) -> list[str | None]:
    """Where the dynamic loader finds each of sonames for the plugin (`ldd`; None where it does not)."""
    found = {}
    if shutil.which("ldd"):
        listing = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, timeout=30).stdout
        for line in listing.splitlines():
            name, _, where = line.strip().partition(" => ")
            if where.startswith("/"):
                found[name] = where.split(" (")[0]
    return [found.get(name) for name in sonames]


def test_missing_xcb_libraries_are_named_with_their_packages_in_one_line(tmp_path):
    """Hide libraries the xcb plugin needs (a private mount namespace binds /dev/null over them): one
    line naming each and the packages to install, exit code 2. Qt aborted with exit code 134."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("hiding a system library needs root and unshare (a private mount namespace)")
    plugin = xcb.plugin_path()
    if plugin is None:
        pytest.skip("PySide6 has no xcb platform plugin here")
    hide = ["libxcb-cursor.so.0", "libxcb-icccm.so.4"]
    paths = _resolved(hide, plugin)
    if None in paths:
        pytest.skip(f"ldd finds no {hide} for the plugin, so there is nothing to hide")
    binds = " && ".join(f"mount --bind /dev/null {p}" for p in paths)
    probe = subprocess.run(["unshare", "-m", "sh", "-c", binds], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here: {probe.stderr.strip()}")
    script = tmp_path / "hidden.sh"
    script.write_text(f'{binds} && exec "$@"\n')
    proc = start_main(dict(os.environ, DISPLAY=":0"), ["unshare", "-m", "sh", str(script)])
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    line = lines[0]
    assert "missing: libxcb-cursor.so.0, libxcb-icccm.so.4." in line
    assert "apt-get install libxcb-cursor0 libxcb-icccm4 (Debian/Ubuntu)" in line
    assert "dnf install xcb-util-cursor xcb-util-wm (Fedora)" in line


def test_which_platform_qt_will_start_on():
    assert xcb.will_use_xcb({"DISPLAY": ":0"}, "linux")
    assert xcb.will_use_xcb({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb"}, "linux")
    assert not xcb.will_use_xcb({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, "linux")
    assert not xcb.will_use_xcb({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb;offscreen"}, "linux")  # a fallback
    assert not xcb.will_use_xcb({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}, "linux")  # Qt 6 tries Wayland
    assert not xcb.will_use_xcb({"DISPLAY": ":0"}, "darwin")


def test_an_unknown_library_is_still_named_with_a_way_to_find_its_package():
    hint = xcb.install_hint(["libxcb-cursor.so.0", "libfoo.so.3"])
    assert "apt-get install libxcb-cursor0 (Debian/Ubuntu)" in hint and "apt-file search libfoo.so.3" in hint
    assert "dnf install xcb-util-cursor 'libfoo.so.3()(64bit)' (Fedora)" in hint


def test_a_first_launch_fits_a_screen_smaller_than_the_default_size(tmp_path):
    """1500x920 is the first size only where it fits: at 1280x720 the window had opened 220 px wider than
    the screen, the summary and attention panels cut off. Here it takes the screen."""
    missing = xserver.what_is_missing()
    if missing:
        pytest.skip(missing)
    server = xserver.start_xvfb((1280, 720))
    app = App(server, write_ini(tmp_path / "kvviz.ini"))
    try:
        app.wait_event("ready", timeout=120)
        window = app.state()["window_id"]
        out = subprocess.run(["xdotool", "getwindowgeometry", "--shell", str(window)], env=app.env, check=True,
                             capture_output=True, text=True, timeout=30).stdout
        geometry = dict(line.split("=", 1) for line in out.split())
        x, y, w, h = (int(geometry[k]) for k in ("X", "Y", "WIDTH", "HEIGHT"))
        assert 0 <= x and 0 <= y and x + w <= 1280 and y + h <= 720, geometry
        assert w >= 1200 and h >= 650, geometry  # the screen, not a small window in a corner
    finally:
        code = app.close()
        server.stop()
    assert code == 0, "".join(app.stderr)[-2000:]
