"""The shell every view is (kvviz.ui.shell): the compare window and the Serve view are both ShellWindows
with the transport's keys from the one key map, one run-state type and the shell's constants typed once;
every panel of both keeps the one Panel protocol; and a view made of a form, a panel and a source alone
(the throwaway view below, nothing else) runs, pauses, steps and scrubs on the shell.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, QSettings, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QLabel, QSpinBox, QWidget

from kvviz.ui.shell import keys
from kvviz.ui.shell.panel import Panel
from kvviz.ui.shell.state import RunState
from kvviz.ui.shell.window import ShellWindow

UI = Path(__file__).resolve().parent.parent / "kvviz" / "ui"


def settings(tmp_path, name="s.ini") -> QSettings:
    return QSettings(str(tmp_path / name), QSettings.Format.IniFormat)


class IdleWorker(QObject):
    """The compare window's worker, doing nothing (no model needed)."""

    environment_listed, model_loaded, run_started, step_traced = (Signal(object) for _ in range(4))
    run_noted, run_failed = Signal(str, str), Signal(str, str)
    run_finished = Signal(str)

    def __getattr__(self, name):  # every control slot: accepted, ignored
        return lambda *args: None


def key_texts(act) -> list[str]:
    return [k.toString() for k in act.shortcuts()]


def test_both_views_are_the_shell_with_one_key_map_and_one_run_state(qtbot, tmp_path):
    from kvviz.ui.serve.window import ServeWindow
    from kvviz.ui.window import MainWindow

    main = MainWindow(IdleWorker(), settings(tmp_path))
    qtbot.addWidget(main)
    main.install_panels()
    serve = ServeWindow(None, settings(tmp_path, "serve.ini"))
    qtbot.addWidget(serve)
    for view in (main, serve):
        assert isinstance(view, ShellWindow)
        assert view.state is RunState.IDLE and view.state == "idle"
        for spec in (*keys.TRANSPORT, keys.QUIT):  # the transport's keys and Quit, from the one table
            expected = list(dict.fromkeys(QKeySequence(k).toString() for k in spec.keys))
            assert key_texts(getattr(view, f"act_{spec.name}")) == expected, (type(view).__name__, spec.name)
        assert view.toolbar.actions()[:4] == [
            view.act_run, view.act_pause, view.act_step, view.act_stop]
    for grid in (main.grid, serve.grid):
        assert grid.panels and all(isinstance(p, Panel) for p in grid.panels.values())


def test_the_transport_keys_and_the_shell_constants_are_typed_once():
    sources = {p: p.read_text(encoding="utf-8") for p in UI.rglob("*.py")}
    typed = {str(p.relative_to(UI)) for p, text in sources.items() if re.search(r'["\'](Space|PgUp|PgDown)["\']', text)}
    assert typed == {"shell/keys.py"}, typed
    for name in ("THREAD_WAIT_MS", "ABORT_AFTER_MS", "PAINT_REST", "NARRATION_LINES"):
        defined = {str(p.relative_to(UI)) for p, text in sources.items() if re.search(rf"^{name} = ", text, re.M)}
        assert defined == {"shell/state.py"}, (name, defined)
    enum = re.compile(r"^class \w*State\(.*Enum\)", re.M)
    enums = {str(p.relative_to(UI)) for p, text in sources.items() if enum.search(text)}
    assert enums == {"shell/state.py"}, enums


# -- a throwaway view: a form, a panel and a source, nothing else --------------------------------
@dataclass(frozen=True)
class CountRequest:
    run_id: str
    steps: int
    paused: bool


class CountSource(QObject):
    """The view's source: one record (the step's number squared) per tick, on the shell's worker thread."""

    run_started = Signal(str, bool)  # run_id, paused
    step_traced = Signal(str, int)  # run_id, value
    run_failed = Signal(str, str)
    run_finished = Signal(str)

    def __init__(self) -> None:
        super().__init__()
        self._timer = QTimer(self)
        self._timer.setInterval(5)
        self._timer.timeout.connect(self._emit_one)
        self._stop = threading.Event()
        self._run: CountRequest | None = None
        self._done = 0
        self._paused = False

    @Slot(object)
    def start_run(self, request: CountRequest) -> None:
        self._stop.clear()
        self._run, self._done, self._paused = request, 0, request.paused
        self.run_started.emit(request.run_id, request.paused)
        if not request.paused:
            self._timer.start()

    def request_stop(self) -> None:  # any thread
        self._stop.set()

    @Slot(bool)
    def set_paused(self, paused: bool) -> None:
        self._paused = paused
        if paused:
            self._timer.stop()
        elif self._run is not None:
            self._timer.start()

    @Slot()
    def request_step(self) -> None:
        if self._paused:
            self._emit_one()

    @Slot(float)
    def set_speed(self, steps_per_s: float) -> None:
        self._timer.setInterval(round(1000 / steps_per_s) if steps_per_s > 0 else 5)

    @Slot()
    def shut_down(self) -> None:
        self._timer.stop()

    def _emit_one(self) -> None:
        run = self._run
        if run is None:
            return
        if not self._stop.is_set() and self._done < run.steps:
            self.step_traced.emit(run.run_id, self._done * self._done)
            self._done += 1
        if self._stop.is_set() or self._done >= run.steps:
            self._timer.stop()
            self._run = None
            self.run_finished.emit(run.run_id)


class SquarePanel(QLabel):
    """The view's one panel: the value at the selected step."""

    key = "square"

    def title(self) -> str:
        return "Square"

    def help_text(self) -> str:
        return "The step's number, squared."

    def show_step(self, history: list[int], step: int) -> None:
        self.setText(str(history[step]) if history else "")

    def retranslate(self) -> None:
        pass

    def readable_size(self) -> tuple[int, int]:
        return 80, 20


class CountView(ShellWindow):
    """Its form (how many steps), its panel and its source; everything else is the shell's."""

    def __init__(self, source: CountSource, settings: QSettings) -> None:
        super().__init__(settings)
        self.form = QSpinBox()
        self.form.setRange(1, 100)
        self.form.setValue(12)
        self.history: list[int] = []
        self.panel = SquarePanel()
        self.label = QLabel()
        self.build_shell(self.label, self.panel, area="count_area", error="count_error")
        self.host_worker(source)

    def connect_worker(self, worker: QObject) -> None:
        worker.run_started.connect(self._on_run_started)
        worker.step_traced.connect(self._on_step_traced)

    def start_run(self, *, paused: bool = False) -> bool:
        self.run_id = f"count{len(self.history)}"
        self.history.clear()
        self._set_state(RunState.LOADING)
        self.run_requested.emit(CountRequest(self.run_id, self.form.value(), paused))
        return True

    def _on_run_started(self, run_id: str, paused: bool) -> None:
        self._set_state(RunState.PAUSED if paused else RunState.RUNNING)

    def _on_step_traced(self, run_id: str, value: int) -> None:
        self.history.append(value)
        self.select_step(len(self.history) - 1 if self._follow else self.step)

    def _on_run_finished(self, run_id: str) -> None:
        self._set_state(RunState.IDLE)
        self.run_finished.emit(run_id)

    def shown_steps(self) -> int:
        return len(self.history)

    def select_step(self, step: int) -> None:
        self.step = max(0, min(step, len(self.history) - 1))
        self.panel.show_step(self.history, self.step)
        self.label.setText(f"step {self.step}")

    def follow_live(self) -> None:
        self._follow = True
        self.select_step(len(self.history) - 1)


def test_a_view_of_a_form_a_panel_and_a_source_runs_on_the_shell(qtbot, tmp_path):
    view = CountView(CountSource(), settings(tmp_path))
    qtbot.addWidget(view)
    view.show()
    assert isinstance(view.panel, Panel) and isinstance(view.panel, QWidget)
    with qtbot.waitSignal(view.run_finished, timeout=10_000):
        view.act_run.trigger()
    assert view.history == [k * k for k in range(12)] and view.panel.text() == "121"
    assert view.state is RunState.IDLE and view.toolbar.state_label.text() == "idle"
    view.act_first.trigger()  # Home
    assert view.panel.text() == "0" and view.label.text() == "step 0"
    view.act_next.trigger()  # Right
    view.act_next.trigger()
    assert view.panel.text() == "4"
    view.act_last.trigger()  # End
    assert view.panel.text() == "121"
    # N from idle: a paused run; N again computes one more step, Space resumes it to the end.
    view.form.setValue(5)
    view.act_step.trigger()
    qtbot.waitUntil(lambda: view.state is RunState.PAUSED, timeout=5_000)
    assert view.act_pause.isEnabled() and view.act_stop.isEnabled()
    view.act_step.trigger()
    qtbot.waitUntil(lambda: view.history == [0], timeout=5_000)
    view.act_next.trigger()  # at the newest step of a paused run: one more
    qtbot.waitUntil(lambda: view.history == [0, 1], timeout=5_000)
    with qtbot.waitSignal(view.run_finished, timeout=10_000):
        view.act_pause.trigger()  # Space: resumes
    assert view.history == [0, 1, 4, 9, 16] and not view.act_stop.isEnabled()
    view.act_faster.trigger()  # ]: the shell's speed control, one rung up from 20 steps/s
    assert view.toolbar.speed_spin.value() == 50
    view.show_error("a one-line error")
    assert view.error_text() == "a one-line error"
    view.close()
    assert not view._thread.isRunning()
    assert view.panel_area.objectName() == "count_area" and view.centralWidget() is view.panel_area
    assert view.windowFlags() & Qt.WindowType.Window
