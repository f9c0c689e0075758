"""Windows that come back and go with the app: the Serve view closed and opened again runs again; closing
the main window closes its Serve view and memory calculator; Ctrl+Q quits the app (every window closed, worker
threads and engine processes ended, the process gone); a Serve view opened before the model list arrives says
so and fills it in. Also the calculator's length bound (the commands') and the Serve view's PNG cells.

Offscreen here, and under an X server (Xvfb, xcb) as a person drives it: `python tests/test_hostile_windows.py
drive --settings INI` starts the app as `python main.py` does and reports the Serve view's events as JSON lines.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from test_serve_view_xcb import App as ServeApp

ROOT = Path(__file__).resolve().parent.parent
REQUESTS = (("The cache grows", 4, 0), ("A second request", 3, 1))


def small_workload(form) -> None:
    """Test setup: two short requests of tiny-random under two schedulers (a run takes a second or two)."""
    from kvviz.serving.spec import WorkRequest

    form.set_models(["tiny-random"], "tiny-random")
    form.set_requests([WorkRequest(*r) for r in REQUESTS])
    form.set_schedulers(("static", "paged"))


# -- offscreen ------------------------------------------------------------------------------------------
def test_the_serve_view_closed_and_opened_again_runs_again(qtbot, tmp_path, torch_cpu):
    from kvviz.ui.serve.window import ServeWindow
    from kvviz.ui.serve.worker import ServeWorker
    from tests.conftest import settings_at

    w = ServeWindow(ServeWorker(threads=1, isolate=False), settings_at(tmp_path / "serve.ini"))
    qtbot.addWidget(w)
    w.show()
    small_workload(w.form)
    for _ in range(2):  # the second run after File > Close and the window shown again
        with qtbot.waitSignal(w.run_finished, timeout=120_000):
            assert w.start_run()
        assert w.error_text() == "" and w.state == "idle" and w.run.n_steps() > 0
        w.act_close.trigger()
        assert not w.isVisible() and not w._thread.isRunning()
        w.show()
        small_workload(w.form)  # the closed window saved its form; the same workload again
    w.close()


def test_closing_a_serve_view_mid_run_leaves_it_idle(qtbot, tmp_path, torch_cpu):
    from kvviz.ui.serve.window import ServeWindow
    from kvviz.ui.serve.worker import ServeWorker
    from tests.conftest import settings_at

    w = ServeWindow(ServeWorker(threads=1, isolate=False), settings_at(tmp_path / "serve.ini"))
    qtbot.addWidget(w)
    w.show()
    small_workload(w.form)
    w.speed_spin.setValue(2)  # two rounds a second: still running when closed
    with qtbot.waitSignal(w.run_started, timeout=120_000):
        assert w.start_run()
    w.close()
    assert w.state == "idle" and w.act_run.isEnabled() and not w.act_stop.isEnabled()


def _main_window(qtbot, tmp_path):
    from test_export import _fake_worker

    from kvviz.ui import app
    from kvviz.ui.window import MainWindow
    from tests.conftest import settings_at

    app.ensure_app()
    w = MainWindow(_fake_worker(), settings_at(tmp_path / "kvviz.ini"))
    qtbot.addWidget(w)
    w.show()
    return w


def test_closing_the_main_window_closes_its_serve_view_and_calculator(qtbot, tmp_path):
    w = _main_window(qtbot, tmp_path)
    w.act_serve.trigger()
    w.act_memory.trigger()
    serve, calculator = w.serve_window, w._memory_dialog
    assert serve.isVisible() and calculator.isVisible()
    w.close()
    assert not serve.isVisible() and not calculator.isVisible()
    assert serve._thread is not None and not serve._thread.isRunning()


def test_a_serve_view_opened_before_the_model_list_says_so_and_fills_it_in(qtbot, tmp_path):
    from kvviz.runtime.messages import Environment, ModelChoice

    w = _main_window(qtbot, tmp_path)
    assert w.env is None  # the fake worker has not listed the environment
    w.act_serve.trigger()
    serve = w.serve_window
    assert serve.form.model_combo.count() == 0
    assert serve.form.problem() == "the model list is loading..." and not serve.act_run.isEnabled()
    env = Environment(models=(ModelChoice(name="tiny-random", description="random weights"),
                              ModelChoice(name="tiny", description="trained")),
                      default_model="tiny-random", devices=("auto", "cpu"), auto_device="cpu",
                      engines=(("naive", "naive"),))
    w._on_environment_listed(env)
    assert [serve.form.model_combo.itemText(i) for i in range(serve.form.model_combo.count())] == \
        ["tiny-random", "tiny"]
    assert serve.form.model_combo.currentText() == "tiny-random" and serve.form.problem() == ""
    serve.close()


def test_the_calculator_takes_the_commands_bound_on_lengths(qtbot):
    from kvviz.options import BOUNDS
    from kvviz.ui.dialogs.memory import MemoryDialog, parse_lengths

    most = int(BOUNDS["tokens"].high)
    assert parse_lengths(f"1 {most}") == [1, most]
    for text in (str(most + 1), "1000000000000", "9" * 5000):
        with pytest.raises(ValueError, match="the most `kvviz memory --tokens` takes"):
            parse_lengths(text)
    dialog = MemoryDialog()
    qtbot.addWidget(dialog)
    dialog.lengths_edit.setText("1000000000000")
    assert "1000000000000 tokens is more than" in dialog.error_label.text()
    for spin, key in ((dialog.block_spin, "block_size"), (dialog.prompt_spin, "prompt_tokens"),
                      (dialog.window_spin, "window"), (dialog.sinks_spin, "sinks"), (dialog.residual_spin, "residual")):
        assert spin.maximum() == BOUNDS[key].high, key


def test_the_serve_views_png_keeps_one_colour_per_cell(qtbot, tmp_path):
    """Every pixel of a scheduler's block of cells in the exported PNG is a colour of the cells' palette:
    the export's painter smooths scaled pictures, which had blended the cells into gradients."""
    from PIL import Image
    from PySide6.QtCore import QPoint
    from test_serve_view_records import course_batch_static

    from kvviz.serving.history import ServeHistory
    from kvviz.ui.serve.window import ServeWindow
    from tests.conftest import settings_at

    w = ServeWindow(None, settings_at(tmp_path / "serve.ini"))
    qtbot.addWidget(w)
    w.resize(1280, 720)
    w.show()
    qtbot.waitExposed(w)
    w.replay(ServeHistory.from_runs((course_batch_static(),)))
    w.select_step(w.run.n_steps() - 1)  # the last step: no step after it faded
    w.draw()
    png = w.exports.export("png", tmp_path / "serve.png")
    pixels = np.asarray(Image.open(png).convert("RGB")).astype(int)
    panel = w.grid.panels["timeline"]
    assert panel.blocks
    for k, rect, _cell_w in panel.blocks:
        at = panel.mapTo(w.panel_area, QPoint(rect.x(), rect.y()))
        block = pixels[at.y():at.y() + rect.height(), at.x():at.x() + rect.width()]
        palette = {((c >> 16) & 255, (c >> 8) & 255, c & 255) for c in panel._image(k).colorTable()}
        seen = {tuple(p) for p in block.reshape(-1, 3)}
        assert seen <= palette, f"{k}: {len(seen - palette)} colours not of any cell"


# -- under an X server, as a person drives it ---------------------------------------------------------------
def drive() -> None:
    """In the app's process: `python main.py ARGS` with the Serve view's events and a few read-only answers
    as JSON lines (keys and clicks come through the X server, never from here)."""
    import runpy

    from kvviz.ui import app

    make_window = app.create_window

    def say(obj) -> None:
        print(json.dumps(obj), flush=True)

    def create_window(*args, **kwargs):
        from PySide6.QtCore import QObject, Signal

        main = make_window(*args, **kwargs)

        class Inbox(QObject):
            asked = Signal(str)

        def answer(question: str) -> None:
            from PySide6.QtWidgets import QApplication

            serve = getattr(main, "serve_window", None)
            active = QApplication.activeWindow()
            if question == "state":
                calc = getattr(main, "_memory_dialog", None)
                say({"env": main.env is not None, "main_id": int(main.winId()),
                     "serve": None if serve is None else {
                         "visible": serve.isVisible(), "state": serve.state, "n_steps": serve.run.n_steps(),
                         "error": serve.error_text(), "problem": serve.form.problem(), "id": int(serve.winId()),
                         "models": serve.form.model_combo.count()},
                     "calculator": calc is not None and calc.isVisible(),
                     "active": None if active is None else active.objectName() or type(active).__name__})
            elif question == "setup":  # test setup, not behaviour: a small workload in the Serve form
                small_workload(serve.form)
                if not getattr(serve, "watched", False):
                    serve.watched = True
                    serve.run_started.connect(lambda _r: say({"event": "started"}))
                    serve.run_finished.connect(lambda _r: say({"event": "finished"}))
                    serve.run_failed.connect(lambda _r, m: say({"event": "failed", "message": m}))
                say({"ok": True})

        inbox = Inbox(main)
        inbox.asked.connect(answer)
        threading.Thread(target=lambda: [inbox.asked.emit(line.strip()) for line in sys.stdin], daemon=True).start()
        main.environment_ready.connect(lambda: say({"event": "ready"}))
        return main

    app.create_window = create_window
    sys.argv = [str(ROOT / "main.py"), *sys.argv[2:]]
    runpy.run_path(str(ROOT / "main.py"), run_name="__main__")


class App(ServeApp):
    """`python main.py --settings INI` (through this file's driver) on the X server, every process it starts
    marked in its environment."""

    def __init__(self, server, ini: Path) -> None:
        self.mark = uuid.uuid4().hex
        super().__init__(server.display, [sys.executable, __file__, "drive", "--settings", str(ini)],
                         {"KVVIZ_TEST_MARK": self.mark})

    def keys_to(self, window_id: int, *keys: str) -> None:
        """Keys typed into that window, as a person who clicked it first (a bare X server has no window
        manager to give it the focus)."""
        subprocess.run(["xdotool", "windowfocus", "--sync", str(window_id)], env=self.env, check=True, timeout=30)
        subprocess.run(["xdotool", "key", "--delay", "80", *keys], env=self.env, check=True, timeout=60)

    def shot(self, path: Path) -> None:
        time.sleep(0.7)
        subprocess.run(["import", "-window", "root", str(path)], env=self.env, check=True, timeout=60)
        shots = os.environ.get("KVVIZ_WINDOW_SHOTS")
        if shots:
            Path(shots, path.name).write_bytes(path.read_bytes())

    def marked_processes(self) -> list[int]:
        """Processes alive with this app's mark in their environment (the app, its engine processes)."""
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes()
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            if f"KVVIZ_TEST_MARK={self.mark}".encode() in environ and "State:\tZ" not in status:
                found.append(int(pid))
        return found


@pytest.fixture(scope="module")
def x11():
    import xserver

    missing = xserver.what_is_missing() or (None if sys.platform.startswith("linux") else "Linux only")
    if missing:
        pytest.skip(missing)
    server = xserver.start_xvfb((1600, 900))
    yield server
    server.stop()


def test_serve_view_reopened_runs_again_and_ctrl_q_quits_with_every_window_open(x11, tmp_path):
    """Under Xvfb, keys through the X server: View > Serve view (Ctrl+Shift+V), a run (Ctrl+R), File > Close
    (Ctrl+W), the Serve view again and a second run; the memory calculator (Ctrl+M) beside it; then Ctrl+Q in
    the main window: the process exits, with no traceback, and no process it started is left."""
    app = App(x11, tmp_path / "kvviz.ini")
    try:
        app.wait_event("ready", timeout=180)
        main_id = app.ask("state")["main_id"]
        for attempt in range(2):
            app.keys_to(main_id, "ctrl+shift+v")
            state = app.until(lambda s: s["serve"] is not None and s["serve"]["visible"], timeout=60)
            assert state["serve"]["visible"] and state["serve"]["models"] > 0, state
            app.ask("setup")
            app.keys_to(state["serve"]["id"], "ctrl+r")
            app.wait_event("finished", timeout=180)  # the reopened view had stayed at "loading the model..."
            state = app.until(lambda s: s["serve"]["state"] == "idle")
            assert state["serve"]["n_steps"] > 0 and state["serve"]["error"] == "", state
            app.shot(tmp_path / f"serve-run-{attempt}.png")
            if attempt == 0:
                app.keys_to(state["serve"]["id"], "ctrl+w")
                assert not app.until(lambda s: not s["serve"]["visible"])["serve"]["visible"]
        app.keys_to(main_id, "ctrl+m")
        state = app.until(lambda s: s["calculator"])
        assert state["calculator"] and state["serve"]["visible"], state
        app.shot(tmp_path / "before-quit.png")
        assert len(app.marked_processes()) >= 2  # the app and its Serve view's engine process at least
        app.keys_to(main_id, "ctrl+q")
        try:
            code = app.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError("Ctrl+Q left the app running with the Serve view and the calculator open") from None
        assert code == 0
        deadline = time.monotonic() + 10
        while app.marked_processes() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert app.marked_processes() == []
        time.sleep(0.5)
        assert "Traceback" not in "".join(app.stderr), "".join(app.stderr)[-3000:]
    finally:
        if app.proc.poll() is None:
            app.proc.kill()
            app.proc.wait()


if __name__ == "__main__" and sys.argv[1:2] == ["drive"]:
    drive()


def test_a_replayed_trace_with_a_million_character_word_as_its_prompt_shows(tmp_path):
    """Opening a saved run puts its prompt in the form as the settings do (kvviz.ui.form.set_prompt_text): one
    unbroken line of a million characters, which Qt's word wrap lays out in minutes, shows in seconds. In a child
    process, so a hang fails, bounded."""
    import textwrap

    code = textwrap.dedent("""
        from PySide6.QtWidgets import QApplication
        from kvviz.records.trace import RunInfo
        from kvviz.ui.form import RunForm
        from tests.conftest import settings_at
        import pathlib, sys
        app = QApplication([])
        form = RunForm(settings_at(pathlib.Path(sys.argv[1]) / "form.ini"))
        form.resize(300, 600)
        form.show()
        form.show_run(RunInfo(run_id="r", model_name="tiny", prompt="a" * 1_000_000, engines=("concat",)))
        app.processEvents()
        print(len(form.prompt_edit.toPlainText()))
        """)
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=90,
                          cwd=ROOT, env=dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-1] == "1000000"


def test_closing_the_window_while_the_engine_process_starts_prints_no_traceback(qtbot, capsys):
    """The worker's environment call is cut short by the window closing (EngineStopped): nothing to report."""
    from kvviz.runtime.session import EngineStopped
    from kvviz.ui.worker import RunWorker

    class Stopping:
        def environment(self):
            raise EngineStopped("the engine process was stopped")

    worker = RunWorker(isolate=False)
    worker.session = Stopping()
    failed = []
    worker.run_failed.connect(lambda *a: failed.append(a))
    worker.list_environment()
    assert failed == [] and "Traceback" not in capsys.readouterr().err
