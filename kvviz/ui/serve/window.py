"""The Serve window: many requests served by one model, scheduler beside scheduler. Composes the serve
form (Inputs dock), the transport (toolbar, timeline, narration), the serve panels' grid and the
exports, and wires them to a serve worker.

No torch: the worker (handed in) runs the library; records arrive as signals into a ServeHistory, and a
frame is drawn only when the run or the selection changed (no timer runs while nothing changes).
"""
from __future__ import annotations

import time
import uuid
from dataclasses import replace

from PySide6.QtCore import QCoreApplication, QEvent, QObject, QSettings, QSize, Qt, QThread, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QFileDialog,
    QFrame,
    QLabel,
    QMainWindow,
    QScrollArea,
    QSpinBox,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from kvviz.serving.history import ServeHistory
from kvviz.serving.spec import ServeSpec
from kvviz.ui.app import quit_app
from kvviz.ui.placement import first_size
from kvviz.ui.qtutil import edits_text
from kvviz.ui.serve.form import ServeForm
from kvviz.ui.serve.grid import ServeGrid
from kvviz.ui.serve.transport import ServeTransport
from kvviz.ui.settings_file import SettingsReader, show_problems

FRAME_MS = 33  # records streaming in are drawn at most this often
PAINT_REST = 3.0  # ... and after a frame that took t (drawn and painted), not before PAINT_REST * t
ABORT_AFTER_MS = 3_000  # closing waits this long for the worker before killing its engine process
THREAD_WAIT_MS = 30_000


class FormScroll(QScrollArea):
    """The Workload dock's scroll area: never narrower than its form and a vertical scroll bar beside it
    (so the form's spin boxes' and combos' arrows are not cut off on the right at 150%)."""

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        hint = super().minimumSizeHint()
        form = self.widget()
        if form is not None:
            hint.setWidth(form.minimumSizeHint().width() + self.verticalScrollBar().sizeHint().width()
                          + 2 * self.frameWidth())
        return hint


class ServeWindow(QMainWindow):
    """Drive with `form`, `start_run`, `select`, the actions; read `run`, `grid`, `step`, `request`."""

    run_started = Signal(str)
    run_finished = Signal(str)
    run_failed = Signal(str, str)
    frame_drawn = Signal()
    # Requests to the worker, queued into its thread.
    run_requested = Signal(object)  # ServeSpec
    pause_requested = Signal(bool)
    step_requested = Signal()

    def __init__(self, worker: QObject | None, settings: QSettings | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ServeWindow")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, False)
        self.settings = settings if settings is not None else QSettings()
        self._worker = worker
        self.run = ServeHistory()
        self.run_id = ""
        self.state = "idle"  # idle / running / paused
        self.step = 0
        self.request: int | None = None
        self._follow = True
        self._drawn: tuple | None = None
        self.frame_ms: list[float] = []  # how long each frame took, wall clock (the benchmark reads it)
        self.frame_cpu_ms: list[float] = []  # and the GUI thread's CPU time in it (the machine's load aside)
        self._frame_timer = QTimer(self)  # single shot: started when something changed, never left running
        self._frame_timer.setSingleShot(True)
        self._frame_timer.timeout.connect(self.draw)
        self._frame_cost_s = 0.0  # the last frame's drawing and painting, wall clock

        # The status bar now: made by the first message (Qt makes it when first asked for), it had taken its
        # height from the panels under a reader's eyes
        self.statusBar()
        self.form = ServeForm(self.settings)
        reader = SettingsReader(self.settings)
        self.form.restore(reader)  # the last launch's workload, schedulers and sizes
        self.form.run_clicked.connect(lambda: self.start_run())
        self.form.changed.connect(lambda: self._enable())
        self._build_actions()
        self._build_dock()
        self.transport = ServeTransport()
        self.transport.step_chosen.connect(self.select_step)
        self.grid = ServeGrid()
        self.grid.cell_picked.connect(self.select)
        self.grid.layout_changed.connect(lambda: self.request_frame(now=True))  # panels back from behind tabs
        self._build_central()
        self._build_toolbar()
        self.retranslate_ui()
        first_size(self)  # 1500x920, or the whole screen where that is smaller (a 1280x720 projector)
        show_problems(self, reader.problems)

        self._thread: QThread | None = None
        if worker is not None:
            self._thread = QThread(self)
            self._thread.setObjectName("kvviz-serve-worker")
            worker.moveToThread(self._thread)
            self.run_requested.connect(worker.start_run)
            self.pause_requested.connect(worker.set_paused)
            self.step_requested.connect(worker.request_step)
            worker.run_started.connect(self._on_run_started)
            worker.steps_traced.connect(self._on_steps_traced)
            worker.results_ready.connect(self._on_results_ready)
            worker.run_failed.connect(self._on_run_failed)
            worker.run_finished.connect(self._on_run_finished)
            self._thread.finished.connect(worker.shut_down, Qt.ConnectionType.DirectConnection)
        self.start_worker()
        app = QCoreApplication.instance()
        if app is not None:
            app.installEventFilter(self)
            app.aboutToQuit.connect(self.shutdown_worker)  # the app quitting with this window open

    def start_worker(self) -> None:
        """The worker's thread, started when the window is made and again when it is shown after a close
        (closing ends the thread and the engine process; a reopened window runs again)."""
        if self._thread is not None and not self._thread.isRunning():
            self._thread.start()

    # ------------------------------------------------------------------ construction
    def _action(self, slot, *keys) -> QAction:
        act = QAction(self)
        act.setShortcuts([QKeySequence(k) for k in keys])
        act.triggered.connect(slot)
        self.addAction(act)  # the keys work with the menu bar hidden
        return act

    def _build_actions(self) -> None:
        self.act_run = self._action(lambda: self.start_run(), "Ctrl+R", "F5")
        self.act_pause = self._action(self.toggle_pause, "Space")
        self.act_step = self._action(self.step_once, "N")
        self.act_stop = self._action(self.stop_run, "Esc")
        self.act_prev = self._action(lambda: self.scrub(-1), "Left")
        self.act_next = self._action(self.next_step, "Right")
        self.act_back10 = self._action(lambda: self.scrub(-10), "PgUp")
        self.act_fwd10 = self._action(lambda: self.scrub(10), "PgDown")
        self.act_first = self._action(lambda: self.select_step(0), "Home")
        self.act_last = self._action(self.follow_live, "End")
        self.act_open = self._action(self.open_record_dialog, "Ctrl+O")
        self.act_close = self._action(self.close, "Ctrl+W")
        self.act_quit = self._action(quit_app, QKeySequence.StandardKey.Quit, "Ctrl+Q")
        from kvviz.ui.serve.exports import ServeExports

        self.exports = ServeExports(self)
        bar = self.menuBar()
        self.file_menu = bar.addMenu("")
        self.file_menu.addAction(self.act_open)
        self.export_menu = self.file_menu.addMenu("")
        self.exports.fill_menu(self.export_menu)
        self.file_menu.addSeparator()
        self.file_menu.addAction(self.act_close)
        self.file_menu.addAction(self.act_quit)
        self.run_menu = bar.addMenu("")
        for act in (self.act_run, self.act_pause, self.act_step, self.act_stop, None, self.act_prev,
                    self.act_next, self.act_back10, self.act_fwd10, self.act_first, self.act_last):
            self.run_menu.addSeparator() if act is None else self.run_menu.addAction(act)
        self.view_menu = bar.addMenu("")

    def _build_dock(self) -> None:
        self.form_dock = QDockWidget(self)
        self.form_dock.setObjectName("serve_inputs_dock")
        scroll = FormScroll()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(self.form)
        self.form_dock.setWidget(scroll)
        self.form_dock.setMinimumWidth(300)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.form_dock)

    def _build_central(self) -> None:
        central = QWidget()
        central.setObjectName("serve_panel_area")
        central.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.panel_area = central
        layout = QVBoxLayout(central)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(4)
        self.error_label = QLabel()
        self.error_label.setObjectName("serve_error")
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("background: #fdecea; color: #b00020; border: 1px solid #b00020; padding: 2px;")
        self.error_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_label.hide()
        layout.addWidget(self.error_label)
        layout.addWidget(self.transport)
        layout.addWidget(self.grid, 1)
        self.setCentralWidget(central)

    def _build_toolbar(self) -> None:
        self.toolbar = QToolBar(self)
        self.toolbar.setObjectName("serve_transport")
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        for act in (self.act_run, self.act_pause, self.act_step, self.act_stop):
            self.toolbar.addAction(act)
        self.toolbar.addSeparator()
        self.speed_label = QLabel()
        self.speed_spin = QSpinBox()
        self.speed_spin.setObjectName("serve_speed")
        self.speed_spin.setRange(0, 1000)
        self.speed_spin.setValue(0)
        self.toolbar.addWidget(self.speed_label)
        self.toolbar.addWidget(self.speed_spin)
        self.toolbar.addSeparator()
        self.state_label = QLabel()
        self.toolbar.addWidget(self.state_label)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.toolbar)
        self.view_menu.addAction(self.form_dock.toggleViewAction())
        self.view_menu.addAction(self.toolbar.toggleViewAction())
        self.view_menu.addSeparator()
        for act in self.grid.panel_actions.values():  # each panel shown or hidden
            act.toggled.connect(lambda _on: self.request_frame(now=True))
            self.view_menu.addAction(act)

    def retranslate_ui(self) -> None:
        self.setWindowTitle(self.tr("kvviz: serving many requests"))
        for act, text in ((self.act_run, self.tr("&Run")), (self.act_step, self.tr("&Step")),
                          (self.act_stop, self.tr("S&top")), (self.act_prev, self.tr("Previous step")),
                          (self.act_next, self.tr("Next step")), (self.act_back10, self.tr("Back 10 steps")),
                          (self.act_fwd10, self.tr("Forward 10 steps")), (self.act_first, self.tr("First step")),
                          (self.act_last, self.tr("Newest step (follow the run)")),
                          (self.act_open, self.tr("Open serve record...")), (self.act_close, self.tr("&Close")),
                          (self.act_quit, self.tr("&Quit kvviz"))):
            act.setText(text)
        self.act_run.setToolTip(self.tr("Serve the workload with every ticked scheduler, in lockstep (Ctrl+R)"))
        self.act_pause.setText(self.tr("&Resume") if self.state == "paused" else self.tr("&Pause"))
        self.file_menu.setTitle(self.tr("&File"))
        self.export_menu.setTitle(self.tr("&Export"))
        self.run_menu.setTitle(self.tr("&Run"))
        self.view_menu.setTitle(self.tr("&View"))
        self.form_dock.setWindowTitle(self.tr("Workload"))
        self.form_dock.toggleViewAction().setText(self.tr("Workload"))
        self.toolbar.toggleViewAction().setText(self.tr("Transport"))
        self.speed_label.setText(self.tr(" Speed "))
        self.speed_spin.setSuffix(self.tr(" steps/s"))
        self.speed_spin.setSpecialValueText(self.tr("as fast as possible"))
        self.state_label.setText({"idle": self.tr("idle"), "loading": self.tr("loading the model..."),
                                  "running": self.tr("running"), "paused": self.tr("paused")}[self.state])
        self.form.retranslate()
        self.transport.retranslate()
        self.grid.retranslate()
        self.exports.retranslate()
        self._enable()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        self.start_worker()
        app = QCoreApplication.instance()
        if app is not None:  # taken off when the window closed
            app.installEventFilter(self)
        if not event.spontaneous():
            # Keys reach a new window at once with no window manager to give it the focus (a bare X server).
            QTimer.singleShot(0, self._reactivate)

    def _reactivate(self) -> None:
        if self.isVisible() and QApplication.activeWindow() is None:
            self.activateWindow()
        self.give_keys_to_transport()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.LanguageChange:
            self.retranslate_ui()
            self.request_frame(now=True)
        elif event.type() == QEvent.Type.FontChange:
            # View > Zoom in the main window: the plots' axis names take the zoom's type size once it
            # has set it (after the app's font), and the grid gives way again at the new needs.
            QTimer.singleShot(0, self._follow_zoom)
        super().changeEvent(event)

    def _follow_zoom(self) -> None:
        self.retranslate_ui()
        self._drawn = None
        self.request_frame(now=True)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if (event.type() == QEvent.Type.MouseButtonPress and isinstance(obj, QWidget) and obj.window() is self
                and self.panel_area.isAncestorOf(obj) and not edits_text(obj)):
            QTimer.singleShot(0, self.give_keys_to_transport)  # Space and the arrows act on the run
        return False

    def give_keys_to_transport(self) -> None:
        if not self.panel_area.hasFocus():
            self.panel_area.setFocus(Qt.FocusReason.OtherFocusReason)

    # ------------------------------------------------------------------ runs
    def start_run(self, *, paused: bool = False) -> bool:
        reason = self.form.problem()
        if reason or self._worker is None:
            self.statusBar().showMessage(reason or self.tr("no worker: this window only replays"), 10_000)
            return False
        spec = replace(self.form.spec(), run_id=uuid.uuid4().hex[:8], start_paused=paused,
                       steps_per_s=float(self.speed_spin.value()))
        self.run_id = spec.run_id
        self.clear_error()
        self._set_state("loading")
        self.run_requested.emit(spec)
        self.give_keys_to_transport()
        return True

    def _on_run_started(self, run_id: str, meta) -> None:
        if run_id != self.run_id:
            return
        self.show_run(ServeHistory.from_meta(meta))
        self._set_state("paused" if meta.get("start_paused") else "running")
        self.run_started.emit(run_id)

    def _on_steps_traced(self, run_id: str, records) -> None:
        if run_id != self.run_id or self.run.run_id != run_id:
            return
        self.run.add(records)
        self.request_frame()

    def _on_results_ready(self, run_id: str, results) -> None:
        if run_id == self.run_id and self.run.run_id == run_id:
            self.run.set_results(results)

    def _on_run_failed(self, run_id: str, message: str) -> None:
        if run_id in ("", self.run_id):
            self.show_error(message)
            self.run_failed.emit(run_id, message)

    def _on_run_finished(self, run_id: str) -> None:
        if run_id != self.run_id:
            return
        self.run.finished = True
        self._set_state("idle")
        self.draw()
        self.run_finished.emit(run_id)

    def show_run(self, run: ServeHistory) -> None:
        """Show this run (a new one starting, or a saved record replayed)."""
        self.run = run
        self.step, self.request, self._follow = 0, None, True
        self._drawn = None
        self.grid.clear()
        self.request_frame(now=True)

    def replay(self, run: ServeHistory, source: str = "") -> None:
        if self.state != "idle":
            self.stop_run()
        self.run_id = ""
        self.show_run(run)
        self._follow = False
        self.select_step(0)
        self.statusBar().showMessage(self.tr("replaying {0}").format(source or run.workload_name), 10_000)

    def toggle_pause(self) -> None:
        if self.state == "running":
            self._set_state("paused")
            self.pause_requested.emit(True)
        elif self.state == "paused":
            self._set_state("running")
            self._follow = True
            self.pause_requested.emit(False)

    def step_once(self) -> None:
        if self.state == "idle":
            self.start_run(paused=True)
            return
        if self.state == "running":
            self.toggle_pause()
        if self.state == "paused":
            self._follow = True
            self.step_requested.emit()

    def stop_run(self) -> None:
        if self.state != "idle" and self._worker is not None:
            self._worker.request_stop()

    def _set_state(self, state: str) -> None:
        self.state = state
        self.retranslate_ui()

    def _enable(self) -> None:
        idle = self.state == "idle"
        self.act_pause.setEnabled(self.state in ("running", "paused"))
        self.act_stop.setEnabled(not idle)
        self.act_run.setEnabled(self._worker is not None and not self.form.problem())

    def show_error(self, message: str) -> None:
        self.error_label.setText(message)
        self.error_label.show()

    def clear_error(self) -> None:
        self.error_label.clear()
        self.error_label.hide()

    def error_text(self) -> str:
        return self.error_label.text() if self.error_label.isVisibleTo(self) else ""

    # ------------------------------------------------------------------ selection
    def select_step(self, step: int) -> None:
        n = self.run.n_steps()
        self.step = max(0, min(step, n - 1)) if n else 0
        self._follow = n > 0 and self.step == n - 1 and self.state != "idle"
        self.request_frame(now=True)

    def select(self, request: int, step: int) -> None:
        """A cell clicked: that request and that step."""
        self.request = request if 0 <= request < self.run.n_requests() else None
        self.select_step(step)

    def scrub(self, delta: int) -> None:
        self.select_step(self.step + delta)
        if delta < 0:
            self._follow = False

    def next_step(self) -> None:
        n = self.run.n_steps()
        if self.state == "paused" and (self.step >= n - 1 or self._follow):  # following: at the newest
            self.step_once()
        else:
            self.scrub(1)

    def follow_live(self) -> None:
        self.select_step(self.run.n_steps() - 1)
        self._follow = self.state != "idle"

    # ------------------------------------------------------------------ drawing
    def request_frame(self, now: bool = False) -> None:
        """Something changed: draw it, at once (a key, a click) or at the next frame time (records)."""
        if now:
            self._frame_timer.stop()
            self._frame_timer.start(0)
        elif not self._frame_timer.isActive():
            # Records streaming in: the painting's cost sets the frame rate, so the window never takes
            # the machine from the engines (a frame of six panels at 1920x1080: ~50 ms of CPU here).
            self._frame_timer.start(max(FRAME_MS, round(PAINT_REST * self._frame_cost_s * 1000)))

    def draw(self) -> None:
        """Bring every shown panel, the timeline and the narration to the selected step."""
        self._frame_timer.stop()
        n = self.run.n_steps()
        if self._follow and n:
            self.step = n - 1
        self.step = min(self.step, max(0, n - 1))
        target = (id(self.run), self.run.version, self.step, self.request, self.grid.shown_key())
        if target == self._drawn:
            return
        started, cpu = time.perf_counter(), time.thread_time()
        self._drawn = target
        self.transport.show_step(self.run, self.step, self.request)
        self.grid.draw(self.run, self.step, self.request)
        self.frame_ms.append((time.perf_counter() - started) * 1000)
        self.frame_cpu_ms.append((time.thread_time() - cpu) * 1000)
        # Fires once the event loop has painted what this frame changed: the frame's whole cost.
        QTimer.singleShot(0, lambda: setattr(self, "_frame_cost_s", time.perf_counter() - started))
        self.frame_drawn.emit()

    # ------------------------------------------------------------------ files
    def open_record_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, self.tr("Open serve record"), self.exports.folder(),
                                              self.tr("Serve records (*.json)"))
        if path:
            self.exports.open_record(path)

    # ------------------------------------------------------------------ closing
    def shutdown_worker(self) -> None:
        if self._thread is None or not self._thread.isRunning():
            return
        self._worker.request_stop()
        self._thread.quit()
        if not self._thread.wait(ABORT_AFTER_MS):  # a long step holds the thread: end the engine process
            self._worker.session.abort()
            self._thread.wait(THREAD_WAIT_MS)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        app = QApplication.instance()
        if app is not None:
            app.removeEventFilter(self)
        self._frame_timer.stop()
        self.shutdown_worker()
        if self.state != "idle":  # the run ended with the worker: what it streamed stays shown, idle
            self.run_id = ""
            self.run.finished = True
            self._set_state("idle")
        self.form.save(self.settings)
        self.settings.sync()
        super().closeEvent(event)


def open_serve_window(parent: QWidget | None = None, settings: QSettings | None = None,
                      spec: ServeSpec | None = None) -> ServeWindow:
    """A Serve window with its own worker (the engines in a child process), shown."""
    from kvviz.ui.serve.worker import ServeWorker

    window = ServeWindow(ServeWorker(), settings)
    if parent is not None and getattr(parent, "form", None) is not None:
        if getattr(parent, "env", True) is None:  # the main window's worker has not listed the models yet
            window.form.set_models_loading()
            shown = window.form.model_combo.currentText()
            parent.environment_ready.connect(lambda: take_models(window, parent, shown),
                                             Qt.ConnectionType.SingleShotConnection)
        else:
            take_models(window, parent)
    if spec is not None:
        window.form.apply(spec)
    window.show()
    return window


def take_models(window: ServeWindow, main: QWidget, shown: str | None = None) -> None:
    """The main window's model picker's names in the Serve form's, its choice chosen; a model typed in the
    Serve form since it showed `shown` (while the list loaded) is kept."""
    models = main.form.model_combo
    names = [models.itemData(i) or models.itemText(i) for i in range(models.count())]
    typed = window.form.model_combo.currentText().strip()
    keep = shown is not None and typed and typed != shown.strip()
    window.form.set_models([n for n in names if n], typed if keep else main.form.current_model())
