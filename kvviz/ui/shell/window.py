"""The one step window every view is: the actions from the key map, the error strip above the transport
and the grid, the worker on its own thread, the run's state and the transport's verbs (pause, one step,
stop, scrub, follow), and where the keys go (a click off any text field gives them to the transport).

It knows no records, panels, forms or narrations: a view supplies them through the hooks below.
"""
from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QObject, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from kvviz.ui.qtutil import edits_text
from kvviz.ui.shell import keys
from kvviz.ui.shell.keys import ActionSpec
from kvviz.ui.shell.state import RunState
from kvviz.ui.shell.transport import TransportToolbar
from kvviz.ui.shell.worker_host import WorkerHost


class ErrorStrip(QFrame):
    """A run's error above the timeline: selectable text and a close button; hidden until one."""

    def __init__(self, name: str = "error") -> None:
        super().__init__()
        self.setStyleSheet("QFrame { background: #fdecea; border: 1px solid #b00020; }")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        self.label = QLabel()
        self.label.setObjectName(name)
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setStyleSheet("color: #b00020; border: none;")
        self.close_button = QToolButton()
        self.close_button.setText("×")
        self.close_button.clicked.connect(self.clear)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.close_button)
        self.hide()

    def show_error(self, message: str) -> None:
        self.label.setText(message)
        self.show()

    def clear(self) -> None:
        self.label.clear()
        self.hide()

    def text(self) -> str:
        return self.label.text() if self.isVisibleTo(self.window()) else ""


class ShellWindow(QMainWindow):
    """A view: KEYS (its rows of the key map, the transport's included) become `act_<name>` actions;
    `build_shell(form_dock, transport, grid)` lays it out; `host_worker(worker)` runs the worker's
    thread. The view implements the hooks: start_run, select_step, follow_live, shown_steps, step_from_idle,
    state_changed. The step shown is `step`, and `_follow` whether it follows the newest (selected_step,
    following, set_following and scrub read and set them; a view keeping its selection elsewhere overrides them)."""

    KEYS: tuple[ActionSpec, ...] = keys.TRANSPORT
    WORKER_THREAD = "kvviz-run-worker"
    KEYS_ON_SHOW = False  # a view that gives its keys to the transport as it shows (no field to type in first)

    run_failed = Signal(str, str)  # run_id, message
    run_finished = Signal(str)  # run_id
    # Requests to the worker, queued into its thread (stop: called at once, from this thread).
    run_requested = Signal(object)
    stop_requested = Signal()
    pause_requested = Signal(bool)
    step_requested = Signal()
    speed_requested = Signal(float)

    def __init__(self, settings: QSettings | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.settings = settings if settings is not None else QSettings()
        self.state = RunState.IDLE
        self.run_id = ""  # the run this window asked for last
        self.step = 0  # the step shown
        self._follow = True  # the step shown follows the newest
        self._worker: QObject | None = None
        self._worker_host: WorkerHost | None = None
        self.actions_by_name = keys.build(self, self.KEYS)

    # ------------------------------------------------------------------ construction
    def build_shell(self, transport: QWidget, grid: QWidget, *, area: str, error: str,
                    spacing: int = 4, speed_name: str = "speed", speed: int = 20, toolbar: str = "transport") -> None:
        """The central area (the error strip, the transport, the grid) and the transport toolbar."""
        central = QWidget()
        # Where the transport's keys go: a click on the timeline, a panel or a plot (none of which
        # edits text) and a Run give it the focus, so Space, arrows and N reach the shortcuts instead
        # of a text field or a spin box, which would take them as typing (see give_keys_to_transport).
        central.setObjectName(area)
        central.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.panel_area = central
        layout = QVBoxLayout(central)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(spacing)
        self.error_frame = ErrorStrip(error)
        self.error_label = self.error_frame.label
        layout.addWidget(self.error_frame)
        layout.addWidget(transport)
        layout.addWidget(grid, 1)
        self.setCentralWidget(central)
        self.toolbar = TransportToolbar((self.act_run, self.act_pause, self.act_step, self.act_stop), self,
                                        name=toolbar, speed_name=speed_name, speed=speed)
        self.toolbar.speed_changed.connect(self._on_speed_changed)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.toolbar)

    def host_worker(self, worker: QObject | None) -> None:
        """The worker on a thread of its own (None: a view that only replays), the requests connected,
        the thread started; the app quitting with this window open ends it too."""
        self._worker = worker
        if worker is not None:
            self._worker_host = WorkerHost(worker, self, name=self.WORKER_THREAD)
            self.run_requested.connect(worker.start_run)
            # Direct: the stop is asked at once, even while the worker's thread is busy with a step.
            self.stop_requested.connect(worker.request_stop, Qt.ConnectionType.DirectConnection)
            self.pause_requested.connect(worker.set_paused)
            self.step_requested.connect(worker.request_step)
            self.speed_requested.connect(worker.set_speed)
            worker.run_failed.connect(self._on_run_failed)
            worker.run_finished.connect(self._on_run_finished)
            self.connect_worker(worker)
            self._worker_host.start()
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown_worker)
            app.installEventFilter(self)  # clicks anywhere in the window: see give_keys_to_transport

    def connect_worker(self, worker: QObject) -> None:
        """The view's own signals of its worker (records, run started)."""

    @property
    def _thread(self):
        return self._worker_host.thread if self._worker_host is not None else None

    def start_worker(self) -> None:
        """The worker's thread, started again when a closed window is shown (closing ended it)."""
        if self._worker_host is not None:
            self._worker_host.start()

    def shutdown_worker(self) -> None:
        """Stop the run and the worker's thread, waiting for a step or model load in progress to end."""
        if self._worker_host is not None:
            self._worker_host.shut_down(self.stop_requested.emit)

    def quit_app(self) -> None:
        from kvviz.ui.qtapp import quit_app

        quit_app()

    # ------------------------------------------------------------------ where the keys go
    def showEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        self.start_worker()
        app = QCoreApplication.instance()
        if app is not None:  # taken off when the window closed
            app.installEventFilter(self)
        if not event.spontaneous():
            # Typed keys reach a new window at once, with no window manager to give it the focus
            # (a bare X server, a kiosk) as with one.
            QTimer.singleShot(0, self._reactivate)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.MouseButtonRelease:
            if (isinstance(obj, QWidget) and obj.window() is self and self.panel_area.isAncestorOf(obj)
                    and not edits_text(obj)):
                # After the click is handled (a point picked, a check box toggled): Qt gives the focus
                # before any filter sees the press, and a plot or a label would keep a field's. On the
                # release, not the press: a button that loses the focus between its press and its release
                # drops the click.
                QTimer.singleShot(0, self.give_keys_to_transport)
            return False
        if (event.type() == QEvent.Type.Hide and isinstance(obj, QDialog) and obj.isWindow()
                and obj.parentWidget() is not None and obj.parentWidget().window() is self):
            # A dialog of this window closed (About, a file dialog, the shortcuts table): without a
            # window manager to activate the window again, its shortcuts stayed dead until a click.
            QTimer.singleShot(0, self._reactivate)
        return False

    def _reactivate(self) -> None:
        if self.isVisible() and QApplication.activeWindow() is None:
            self.activateWindow()
        if self.KEYS_ON_SHOW:
            self.give_keys_to_transport()

    def give_keys_to_transport(self) -> None:
        """Space, the arrows, N, Home and End act on the run: the focus leaves any field for the panel
        area. A field's text is never touched; clicking back into it gives it its keys again."""
        if not self.panel_area.hasFocus():
            self.panel_area.setFocus(Qt.FocusReason.OtherFocusReason)

    # ------------------------------------------------------------------ the transport's verbs
    def toggle_pause(self) -> None:
        if self.state is RunState.RUNNING:
            self._set_state(RunState.PAUSED)
            self.pause_requested.emit(True)
        elif self.state is RunState.PAUSED:
            self._set_state(RunState.RUNNING)
            self.set_following(True)
            self.pause_requested.emit(False)

    def set_paused(self, paused: bool) -> None:
        if paused != (self.state is RunState.PAUSED):
            self.toggle_pause()

    def step_once(self) -> None:
        """One lockstep round: a running run pauses first; from idle, the view's step_from_idle."""
        if self.state is RunState.IDLE:
            self.step_from_idle()
            return
        if self.state is RunState.RUNNING:
            self.toggle_pause()
        if self.state is RunState.PAUSED:
            self.set_following(True)
            self.step_requested.emit()

    def stop_run(self) -> None:
        if self.state is not RunState.IDLE and self._worker is not None:
            self.stop_requested.emit()

    def next_step(self) -> None:
        """Right: the step after; at the newest step of a paused run, compute one more."""
        n = self.shown_steps()
        at_newest = self.selected_step >= n - 1 or (self.following() and self.state is not RunState.IDLE)
        if at_newest and self.state is RunState.PAUSED:
            self.step_once()
        elif self.selected_step < n - 1:
            self.scrub(1)

    def change_speed(self, direction: int) -> None:
        self.toolbar.change_speed(direction)

    def _on_speed_changed(self, value: int) -> None:
        self.speed_requested.emit(float(value))

    def _set_state(self, state: RunState) -> None:
        self.state = RunState(state)
        self._update_pause_text()
        self.toolbar.show_state(self.state)
        self.state_changed()

    def _update_pause_text(self) -> None:
        """Pause's text (Pause or Resume) and which transport actions are enabled."""
        self.act_pause.setText(keys.pause_text(self.state is RunState.PAUSED))
        self.act_pause.setEnabled(self.state in (RunState.RUNNING, RunState.PAUSED))
        self.act_stop.setEnabled(self.state is not RunState.IDLE)

    def _on_run_failed(self, run_id: str, message: str) -> None:
        if run_id in ("", self.run_id):
            self.show_error(message)
            self.run_failed.emit(run_id, message)

    # ------------------------------------------------------------------ errors
    def show_error(self, message: str) -> None:
        self.error_frame.show_error(message)

    def clear_error(self) -> None:
        self.error_frame.clear()

    def error_text(self) -> str:
        return self.error_frame.text()

    # ------------------------------------------------------------------ hooks a view implements
    def start_run(self, *, paused: bool = False) -> bool:
        raise NotImplementedError

    def step_from_idle(self) -> None:
        self.start_run(paused=True)

    def state_changed(self) -> None:
        """The view's part of a state change (progress, status, enabling)."""

    def shown_steps(self) -> int:
        raise NotImplementedError

    @property
    def selected_step(self) -> int:
        return self.step

    def following(self) -> bool:
        return self._follow

    def set_following(self, on: bool) -> None:
        self._follow = on

    def select_step(self, step: int) -> None:
        raise NotImplementedError

    def scrub(self, delta: int) -> None:
        """`delta` steps on; a step back stops following the newest."""
        self.select_step(self.step + delta)
        if delta < 0:
            self._follow = False

    def follow_live(self) -> None:
        raise NotImplementedError

    def _on_run_finished(self, run_id: str) -> None:
        raise NotImplementedError

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        """The worker's thread ends with the window (a view saves its own state first)."""
        app = QCoreApplication.instance()
        if app is not None:
            app.removeEventFilter(self)
        self.shutdown_worker()
        super().closeEvent(event)
