"""The compare window's hooks into the other views and features: File > Watch a server... and Open a watch
recording... open the Watch window (one per main window, closed with it); Lesson > Open lesson... presents one and
Add this view as a scene... appends the view to a .toml lesson."""
from __future__ import annotations

from PySide6.QtCore import QSettings

from tests.test_shell import IdleWorker


def main_window(qtbot, tmp_path):
    from kvviz.ui.window import MainWindow

    window = MainWindow(IdleWorker(), QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(window)
    return window


def menu_texts(menu) -> list[str]:
    return [a.menu().title() if a.menu() else a.text() for a in menu.actions() if not a.isSeparator()]


def test_file_menu_opens_the_watch_window_asking_for_servers_or_a_recording(qtbot, tmp_path, monkeypatch):
    from kvviz.ui.watch.window import WatchWindow

    asked: list[str] = []
    monkeypatch.setattr(WatchWindow, "open_watch_dialog", lambda self: asked.append("servers"))
    monkeypatch.setattr(WatchWindow, "open_recording_dialog", lambda self: asked.append("recording"))
    window = main_window(qtbot, tmp_path)
    texts = menu_texts(window.file_menu)
    assert texts[:3] == ["Watch a server...", "Open a watch recording...", "&Export"]
    assert [k.toString() for k in window.act_watch.shortcuts()] == ["Ctrl+Shift+W"]
    window.act_watch.trigger()
    watch = window.watch_window
    assert isinstance(watch, WatchWindow) and watch.isVisible() and asked == ["servers"]
    window.act_watch_open.trigger()
    assert window.watch_window is watch and asked == ["servers", "recording"]  # one Watch window, raised again
    window.close()
    assert not watch.isVisible()  # closed with the main window, so the app quits with it
    # The Watch window's Pause reads the shell's text (the one key map's), in every language.
    assert "_update_pause_text" not in vars(WatchWindow)


def test_lesson_menu_opens_a_lesson_and_adds_the_view_as_a_scene(open_window, qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog, QInputDialog

    from kvviz.lessons import load_lesson
    from kvviz.ui.lessons import opener

    window = open_window()
    assert menu_texts(window.lesson_menu) == ["Open lesson...", "Add this view as a scene...", "Edit scenes..."]
    opened = []
    monkeypatch.setattr(opener, "open_lesson", lambda parent: opened.append(parent))
    window.act_lesson_open.trigger()
    assert opened == [window]

    window.form.prompt_edit.setPlainText("The cache holds")
    window.form.tokens_spin.setValue(5)
    answers = iter([("My view", True), ("What the class sees", True)])
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: next(answers))
    lesson = tmp_path / "mine.toml"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(lesson), ""))
    window.act_lesson_add.trigger()
    scene = load_lesson(lesson).scenes[0]
    assert (scene.title["en"], scene.caption["en"]) == ("My view", "What the class sees")
    assert (scene.source.settings["prompt"], scene.source.settings["tokens"]) == ("The cache holds", 5)
    assert list(scene.panels) == window.grid.shown_panels()

    # A file that is no .toml lesson: refused in one line in the error strip, nothing written.
    answers = iter([("Another", True), ("", True)])
    wrong = tmp_path / "mine.json"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(wrong), ""))
    window.act_lesson_add.trigger()
    assert window.error_text() == "mine.json: scenes are added to a .toml lesson" and not wrong.exists()


def test_the_forms_repeat_runs_the_window_run_that_many_times(open_window, qtbot):
    from kvviz.records.trace import RunInfo

    window = open_window()
    window.form.prompt_edit.setPlainText("The cache holds")
    window.form.set_engines(("concat",))
    window.form.tokens_spin.setValue(3)
    window.form.repeat_spin.setValue(3)
    window.toolbar.speed_spin.setValue(0)
    assert window.build_request().repeat == 3
    with qtbot.waitSignal(window.run_finished, timeout=120_000):
        assert window.start_run()
    info = window.history.info
    assert isinstance(info, RunInfo) and info.repeat == 3
    assert [len(ms) for ms in info.earlier_ms["concat"]] == [3, 3]  # the two runs before the one shown
    assert window.history.n_steps() == 3


def test_the_status_bar_names_a_kernel_comparisons_kernels_and_its_lanes(qapp):
    from PySide6.QtWidgets import QStatusBar

    from kvviz.kernels import lanes
    from kvviz.records.trace import RunInfo
    from kvviz.ui.status import StatusFields

    fields = StatusFields(QStatusBar())
    engines = lanes(("concat", "static"), ("torch", "native"))
    fields.show_run(RunInfo(model_name="tiny-random", engines=engines, max_new_tokens=4,
                            decode_kernels=("torch", "native") * 2))
    assert fields.kernel.text() == "kernels PyTorch vs C step"
    assert fields.kernel.toolTip().endswith(
        "lanes (concat · PyTorch, concat · C step, static · PyTorch, static · C step)")
    fields.show_run(RunInfo(model_name="tiny-random", engines=("concat", "static"), max_new_tokens=4,
                            decode_kernels=("native", "native")))
    assert fields.kernel.text() == "kernel C step"  # one kernel: said as before


def test_the_serve_window_says_vllms_wait_in_the_status_bar_and_its_failure_in_the_error_strip(qtbot, tmp_path):
    from kvviz.serving.history import ServeHistory
    from kvviz.serving.record import LaneRecord, PeerProgress
    from kvviz.ui.serve.window import ServeWindow

    window = ServeWindow(None, QSettings(str(tmp_path / "serve.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(window)
    window.run_id = "r1"
    window.show_run(ServeHistory(run_id="r1"))
    window._on_steps_traced("r1", [LaneRecord("vllm", PeerProgress("starting", 3.2), {})])
    assert window.statusBar().currentMessage() == (
        "vLLM: starting, 3 s waited (35-50 s on a CPU); the schedulers wait for it")
    assert window.error_text() == ""
    window._on_steps_traced("r1", [LaneRecord("vllm", PeerProgress("failed", 4.0, "no vLLM at /nowhere/python"), {})])
    assert window.error_text() == "vLLM failed: no vLLM at /nowhere/python"
