"""The Serve view: many requests served by one model, scheduler beside scheduler. The shell (kvviz.ui.shell)
with the serve form (Workload dock), the serve transport (timeline, narration), the serve panels' grid and the
exports, wired to a serve worker (its source).

No torch: the worker (handed in) runs the library; records arrive as signals into a ServeHistory, and a
frame is drawn only when the run or the selection changed (no timer runs while nothing changes).
"""
from __future__ import annotations

import uuid
from dataclasses import replace

from PySide6.QtCore import QCoreApplication, QObject, QSettings, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QDockWidget, QFileDialog, QFrame, QScrollArea, QWidget

from kvviz.serving.history import ServeHistory
from kvviz.serving.narration import vllm_status
from kvviz.serving.spec import ServeSpec
from kvviz.ui.dock_title import zooming_title_bar
from kvviz.ui.placement import first_size
from kvviz.ui.serve.form import ServeForm
from kvviz.ui.serve.grid import SERVE_GRID
from kvviz.ui.serve.transport import ServeTransport
from kvviz.ui.settings_file import SettingsReader, show_problems
from kvviz.ui.shell import keys
from kvviz.ui.shell.framed import FramedView
from kvviz.ui.shell.grid import ShellGrid
from kvviz.ui.shell.keys import ActionSpec
from kvviz.ui.shell.state import FRAME_MS, RunState


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


class ServeWindow(FramedView):
    """Drive with `form`, `start_run`, `select`, the actions; read `run`, `grid`, `step`, `request`."""

    KEYS = (*keys.TRANSPORT, ActionSpec("open", ("Ctrl+O",), "open_record_dialog"),
            ActionSpec("close", ("Ctrl+W",), "close"), keys.QUIT)
    WORKER_THREAD = "kvviz-serve-worker"
    KEYS_ON_SHOW = True

    run_started = Signal(str)

    def __init__(self, worker: QObject | None, settings: QSettings | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(settings, parent)
        self.setObjectName("ServeWindow")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, False)
        self.run = ServeHistory()
        self.request: int | None = None
        self._frame_timer = QTimer(self)  # single shot: started when something changed, never left running
        self._frame_timer.setSingleShot(True)
        self._frame_timer.timeout.connect(self.draw)

        # The status bar first: made by the first message (Qt makes it when first asked for), it would take
        # its height from the panels under a reader's eyes.
        self.statusBar()
        self.form = ServeForm(self.settings)
        reader = SettingsReader(self.settings)
        self.form.restore(reader)  # the last launch's workload, schedulers and sizes
        self.form.run_clicked.connect(lambda: self.start_run())
        self.form.changed.connect(lambda: self._update_pause_text())
        from kvviz.ui.serve.exports import ServeExports

        self.build_menus(ServeExports(self), (self.act_open,))
        self._build_dock()
        self.transport = ServeTransport()
        self.transport.step_chosen.connect(self.select_step)
        self.grid = ShellGrid(SERVE_GRID)
        for panel in self.grid.panels.values():  # a cell clicked in any panel: that request and step
            panel.cell_picked.connect(self.select)
        self.grid.layout_changed.connect(lambda: self.request_frame(now=True))  # panels back from behind tabs
        self.build_shell(self.transport, self.grid, area="serve_panel_area", error="serve_error",
                         toolbar="serve_transport", speed_name="serve_speed", speed=0)
        self.speed_spin = self.toolbar.speed_spin
        self.fill_view_menu((self.form_dock.toggleViewAction(),))
        self.retranslate_ui()
        first_size(self)  # 1500x920, or the whole screen where that is smaller (a 1280x720 projector)
        show_problems(self, reader.problems)
        self.host_worker(worker)
        self._update_pause_text()  # Run needs the worker

    def connect_worker(self, worker: QObject) -> None:
        worker.run_started.connect(self._on_run_started)
        worker.steps_traced.connect(self._on_steps_traced)
        worker.results_ready.connect(self._on_results_ready)

    # ------------------------------------------------------------------ construction
    def _build_dock(self) -> None:
        self.form_dock = QDockWidget(self)
        self.form_dock.setObjectName("serve_inputs_dock")
        scroll = FormScroll()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(self.form)
        self.form_dock.setWidget(scroll)
        zooming_title_bar(self.form_dock)  # the title and its buttons grow with View > Zoom as the form does
        self.form_dock.setMinimumWidth(300)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.form_dock)

    def retranslate_ui(self) -> None:
        self.setWindowTitle(self.tr("kvviz: serving many requests"))
        for name, text in keys.transport_texts().items():
            self.actions_by_name[name].setText(text)
        for act, text in ((self.act_open, self.tr("Open serve record...")), (self.act_close, self.tr("&Close")),
                          (self.act_quit, self.tr("&Quit kvviz"))):
            act.setText(text)
        self.act_run.setToolTip(self.tr("Serve the workload with every ticked scheduler, in lockstep (Ctrl+R)"))
        self.form_dock.setWindowTitle(self.tr("Workload"))
        self.form_dock.toggleViewAction().setText(self.tr("Workload"))
        self.form.retranslate()
        self.retranslate_shell()

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
        self._set_state(RunState.LOADING)
        self.run_requested.emit(spec)
        self.give_keys_to_transport()
        return True

    def _on_run_started(self, run_id: str, started) -> None:
        if run_id != self.run_id:
            return
        self.show_run(ServeHistory.from_started(started))
        self._set_state(RunState.PAUSED if started.start_paused else RunState.RUNNING)
        self.run_started.emit(run_id)

    def _on_steps_traced(self, run_id: str, records) -> None:
        if run_id != self.run_id or not self.run.add(records, run_id):
            return  # a late batch of an earlier run
        self._show_vllm_status()
        self.request_frame()

    def _show_vllm_status(self) -> None:
        """vLLM beside the schedulers: its failure in the error strip, the seconds its start has been waited for in
        the status bar (kvviz.serving.narration.vllm_status, the sentence the serve page says)."""
        note = vllm_status(self.run, lambda text: QCoreApplication.translate("ServeNarration", text))
        if not note:
            return
        if self.run.vllm.state == "failed":
            if self.error_text() != note:
                self.show_error(note)
        else:
            self.statusBar().showMessage(note, 2_000)

    def _on_results_ready(self, run_id: str, results) -> None:
        if run_id == self.run_id and self.run.run_id == run_id:
            self.run.set_results(results)

    def _on_run_finished(self, run_id: str) -> None:
        if run_id != self.run_id:
            return
        self.run.finished = True
        self._set_state(RunState.IDLE)
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
        if self.state is not RunState.IDLE:
            self.stop_run()
        self.run_id = ""
        self.show_run(run)
        self._follow = False
        self.select_step(0)
        self.statusBar().showMessage(self.tr("replaying {0}").format(source or run.workload_name), 10_000)

    def state_changed(self) -> None:
        self.retranslate_ui()

    def _update_pause_text(self) -> None:
        super()._update_pause_text()
        self.act_run.setEnabled(self._worker is not None and not self.form.problem())

    # ------------------------------------------------------------------ selection
    def select_step(self, step: int) -> None:
        n = self.run.n_steps()
        self.step = max(0, min(step, n - 1)) if n else 0
        self._follow = n > 0 and self.step == n - 1 and self.state is not RunState.IDLE
        self.request_frame(now=True)

    def select(self, request: int, step: int) -> None:
        """A cell clicked: that request and that step."""
        self.request = request if 0 <= request < self.run.n_requests() else None
        self.select_step(step)

    def shown_steps(self) -> int:
        return self.run.n_steps()

    def follow_live(self) -> None:
        self.select_step(self.run.n_steps() - 1)
        self._follow = self.state is not RunState.IDLE

    # ------------------------------------------------------------------ drawing
    def request_frame(self, now: bool = False) -> None:
        """Something changed: draw it, at once (a key, a click) or at the next frame time (records)."""
        if now:
            self._frame_timer.stop()
            self._frame_timer.start(0)
        elif not self._frame_timer.isActive():
            # Records streaming in: the painting's cost sets the frame rate, so the window never takes
            # the machine from the engines (a frame of six panels at 1920x1080: ~50 ms of CPU here).
            self._frame_timer.start(max(FRAME_MS, round(self.frame_rest_s() * 1000)))

    def draw_frame(self) -> None:
        self.request_frame(now=True)

    def draw(self) -> None:
        """Bring every shown panel, the timeline and the narration to the selected step."""
        self._frame_timer.stop()
        n = self.run.n_steps()
        if self._follow and n:
            self.step = n - 1
        self.step = min(self.step, max(0, n - 1))
        self.paint_frame((id(self.run), self.run.version, self.step, self.request, self.grid.shown_key()),
                         self._draw_selection)

    def _draw_selection(self) -> None:
        self.transport.show_step(self.run, self.step, self.request)
        self.grid.draw(self.run, self.step, self.request)

    # ------------------------------------------------------------------ files
    def open_record_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, self.tr("Open serve record"), self.exports.folder(),
                                              self.tr("Serve records (*.json)"))
        if path:
            self.exports.open_record(path)

    # ------------------------------------------------------------------ closing
    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        self._frame_timer.stop()
        self.shutdown_worker()
        if self.state is not RunState.IDLE:  # the run ended with the worker: what it streamed stays shown, idle
            self.run_id = ""
            self.run.finished = True
            self._set_state(RunState.IDLE)
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
