"""The main window: the run form, the transport, the timeline, and the panels drawn from RunHistory.

No torch, no engines, no models: the window talks to a run worker (handed in by the app) through
signals, learns the presets, devices and engines from the Environment the worker lists, and
repaints the panels from the history on a timer, never from the worker's signals.
"""
from __future__ import annotations

import gc
import html
import importlib
import math
import sys
import time
import traceback
import uuid
from enum import Enum

from PySide6.QtCore import (
    QCoreApplication,
    QEvent,
    QObject,
    QProcess,
    QSettings,
    Qt,
    QThread,
    QTimer,
    Signal,
    Slot,
)
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent, QKeySequence, QTextDocument, QTextDocumentFragment
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QCheckBox,
    QComboBox,
    QDialog,
    QDockWidget,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSlider,
    QSpinBox,
    QSplitter,
    QStyle,
    QTableWidget,
    QTableWidgetItem,
    QTextEdit,
    QToolBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from kvviz import estimate
from kvviz.config import RunConfig, SamplingConfig, TraceOptions, canonical_dtype
from kvviz.format import DEFAULT_PROMPT, fmt_bytes, fmt_count_short, fmt_ms
from kvviz.trace import StepTrace
from kvviz.ui.app import ZOOM_KEY, ZOOMS, zoom_in_effect
from kvviz.ui.history import RunHistory, RunInfo
from kvviz.ui.messages import Environment, ModelChoice, RunRequest
from kvviz.ui.panels import PANELS
from kvviz.ui.panels.base import Panel

REPAINT_MS = 33  # ~30 Hz: the history is drawn at screen rate, whatever the engines' rate
PAINT_REST = 3.0  # while steps stream in, a frame that took t waits PAINT_REST * t before the next
ABORT_AFTER_MS = 3_000  # closing waits this long for the worker before killing its engine process
THREAD_WAIT_MS = 60_000  # and then this long (a step or model load in the worker's own thread)
PANEL_MIN_SIZE = (140, 110)
NARRATION_TALL_PX = 900  # from this window height the step narration gets two lines, below it one
NARRATION_STREAM_MS = 250  # while a run streams in, the narration is told again at most this often
SPEED_LADDER = (1, 2, 5, 10, 20, 50, 100, 200, 500, 0)  # steps per second; 0 = as fast as possible
DTYPES = ("auto", "fp32", "bf16", "fp16")
SLOW_RUN_S = 10.0  # a run estimated to take longer is announced before it starts


class RunState(Enum):
    IDLE = "idle"
    LOADING = "loading"  # asked for a run, the worker is loading the model
    RUNNING = "running"
    PAUSED = "paused"


def _tr(text: str) -> str:
    return QCoreApplication.translate("MainWindow", text)


def edits_text(widget: QWidget | None) -> bool:
    """Whether the widget (or the field it is part of) takes typed keys: a text box, a spin box, a combo.
    Such a field keeps Space, arrows and letters; anything else leaves them to the transport."""
    while widget is not None:
        if isinstance(widget, (QLineEdit, QAbstractSpinBox, QComboBox)):
            return True
        if isinstance(widget, (QTextEdit, QPlainTextEdit)):
            return not widget.isReadOnly()
        widget = widget.parentWidget()
    return False


class PanelFrame(QFrame):
    """A panel with its title above it; the panel's help is the tooltip of both. Double-clicking the
    title asks the window to give this panel the whole grid (and back)."""

    focus_requested = Signal(str)

    def __init__(self, panel: Panel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.panel = panel
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setObjectName(f"panel_{panel.key}")
        # An explicit minimum: a panel whose content grows (a legend of long figures) is clipped in its
        # cell instead of making the whole window wider than the screen.
        self.setMinimumSize(PANEL_MIN_SIZE[0], PANEL_MIN_SIZE[1])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 4)
        layout.setSpacing(2)
        self.header = QLabel(self)
        self.header.setStyleSheet("font-weight: bold;")
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.header, 1)
        for widget in panel.header_widgets():
            row.addWidget(widget)
        layout.addLayout(row)
        layout.addWidget(panel, 1)
        self.error = ""
        self.retranslate()

    def retranslate(self) -> None:
        self.panel.retranslate()
        self.header.setText(self.panel.title())
        help_text = self.panel.help_text()
        if self.panel.picks_steps:
            help_text += "\n\n" + self.tr("Click a point, a row or a token to show its step.")
        help_text += "\n" + self.tr("Double-click the title to give this panel the whole grid (again to go back).")
        self.header.setToolTip(help_text)
        self.setToolTip(help_text)

    def mouseDoubleClickEvent(self, event) -> None:  # noqa: N802 (Qt override)
        self.focus_requested.emit(self.panel.key)
        super().mouseDoubleClickEvent(event)

    def show_error(self, text: str) -> None:
        self.error = text
        self.header.setText(f"{self.panel.title()}  ⚠ {text}")


class MainWindow(QMainWindow):
    """Drive with the form and transport; read `history`, `panels`, `badge`, `error_label`."""

    # Re-emitted in the GUI thread, after the history took the record: tests and tools wait on these.
    environment_ready = Signal()
    panels_ready = Signal()
    run_started = Signal(object)  # RunInfo
    step_traced = Signal(object)  # StepTrace
    run_failed = Signal(str, str)  # run_id, message
    run_finished = Signal(str)  # run_id
    # Requests to the worker, queued into its thread.
    environment_requested = Signal()
    run_requested = Signal(object)  # RunRequest
    stop_requested = Signal()
    pause_requested = Signal(bool)
    step_requested = Signal()
    speed_requested = Signal(float)

    def __init__(self, worker: QObject, settings: QSettings | None = None, parent: QWidget | None = None,
                 *, defer_panels: bool = False) -> None:
        super().__init__(parent)
        self.setObjectName("MainWindow")
        self.settings = settings if settings is not None else QSettings()
        self.history = RunHistory()
        self.env: Environment | None = None
        self.models: dict[str, ModelChoice] = {}
        self.state = RunState.IDLE
        self.run_id = ""  # the run this window asked for last
        self._start_paused = False
        self._selected = 0
        self._follow = True  # the timeline follows the newest step until the user scrubs back
        self._seen_version = -1
        self._painted: tuple[int, int] = (-1, -1)  # (history version, step) of the last draw
        self._panel_painted: dict[str, tuple[int, int]] = {}  # the same, per panel
        self._paint_resume_at = 0.0  # perf_counter time before which a streaming run is not drawn
        self._drew_last_tick = False
        self._warming: list[str] = []  # panels whose warm_up may have work left
        self._stale: set[str] = set()  # panels still showing the previous run (cleared when next drawn)
        self._panel_scenes: dict[str, list] = {}  # the pyqtgraph scenes in each panel's frame
        self._user_selected = False  # the user picked a step: draw it at the next tick, rest or not
        self._last_tick_end = 0.0
        self._fits: dict[tuple[str, str, str], dict[str, estimate.LatencyFit]] = {}  # measured, per model
        self._flops_per_s: float | None = None  # this machine's matrix rate, probed when first needed
        self._status_run: RunInfo | None = None  # the run the status bar describes
        self._own_info: RunInfo | None = None  # the RunInfo of the last run this window ran
        self._wanted: dict[str, str] = {}  # picker choices restored before the environment arrives
        self.panels: dict[str, Panel] = {}
        self.frames: dict[str, PanelFrame] = {}
        self.panel_load_errors: list[str] = []
        self._engine_help: dict[str, str] = {}  # engine key -> one-line help, from the environment
        self._focused = ""  # the panel given the whole grid by a double-click on its title
        self.torch_threads: int | None = None  # None: the worker's default (every core but one)
        self._panels_installed = False
        self.shortcuts_dialog: QDialog | None = None  # Help > Keyboard shortcuts, made when first asked for
        self.restart_argv: list[str] | None = None  # the app's command line, set by `kvviz` (app.run)
        self.zoom_note: QMessageBox | None = None  # View > Zoom's note that a new zoom applies next start
        self._presenting: tuple | None = None  # in presentation mode: (dock state, window state) before it
        self._arrangement: str | None = None  # the shown panels, "+"-joined, that the grid is laid out for
        self._layouts: dict[str, tuple] = {}  # arrangement -> (grid state, row states) the user left it at

        self._build_actions()
        self._build_form()
        self._build_central()
        self._build_menus()
        self._build_status()
        self.retranslate_ui()
        self._restore_settings()
        self._validate_form()

        if defer_panels:
            self.installEventFilter(self)
        else:
            self.install_panels()
        self._repaint_timer = QTimer(self)
        self._repaint_timer.setInterval(REPAINT_MS)
        self._repaint_timer.timeout.connect(self._on_repaint_timer_timeout)
        self._repaint_timer.start()

        self._worker = worker
        self._thread = QThread(self)
        self._thread.setObjectName("kvviz-run-worker")
        worker.moveToThread(self._thread)
        self._connect_worker(worker)
        self._thread.start()
        app = QCoreApplication.instance()
        if app is not None:  # quitting without closing this window still stops the thread first
            app.aboutToQuit.connect(self.shutdown_worker)
            app.installEventFilter(self)  # clicks anywhere in the window: see give_keys_to_transport
        # Asked once the event loop runs, so torch's import in the worker does not delay the first paint.
        QTimer.singleShot(0, self.environment_requested.emit)

    # ------------------------------------------------------------------ construction
    def _build_actions(self) -> None:
        def action(slot, *keys: str | QKeySequence.StandardKey, checkable: bool = False) -> QAction:
            act = QAction(self)
            sequences = {QKeySequence(k).toString(): QKeySequence(k) for k in keys}  # a key given twice: once
            act.setShortcuts(list(sequences.values()))
            act.setCheckable(checkable)
            act.triggered.connect(slot)
            self.addAction(act)  # shortcuts work even with the menu bar hidden
            return act

        self.act_run = action(lambda: self.start_run(), "Ctrl+R", "F5")
        self.act_pause = action(lambda: self.toggle_pause(), "Space")
        self.act_step = action(lambda: self.step_once(), "N")
        self.act_stop = action(lambda: self.stop_run(), "Esc")
        self.act_prev = action(lambda: self.scrub(-1), "Left")
        self.act_next = action(lambda: self.next_step(), "Right")
        self.act_back10 = action(lambda: self.scrub(-10), "PgUp")
        self.act_fwd10 = action(lambda: self.scrub(10), "PgDown")
        self.act_first = action(lambda: self.select_step(0), "Home")
        self.act_last = action(lambda: self.follow_live(), "End")
        self.act_faster = action(lambda: self.change_speed(+1), "]")
        self.act_slower = action(lambda: self.change_speed(-1), "[")
        self.act_open = action(lambda: self.open_checkpoint(), QKeySequence.StandardKey.Open)
        self.act_focus_prompt = action(lambda: self.prompt_edit.setFocus(), "Ctrl+L")
        # Ctrl+Q as well: the platform's Quit key is not Ctrl+Q everywhere (offscreen: none)
        self.act_quit = action(lambda: self.close(), QKeySequence.StandardKey.Quit, "Ctrl+Q")
        self.act_about = action(lambda: self._show_about())
        self.act_shortcuts = action(lambda: self.show_shortcuts(), QKeySequence.StandardKey.HelpContents, "Ctrl+/")
        self.act_memory = action(lambda: self.show_memory_calculator(), "Ctrl+M")
        self.act_reset_layout = action(lambda: self._reset_layout())
        self.act_present = action(lambda checked=False: self.set_presentation(checked), "F11", checkable=True)
        self.act_narration = action(lambda checked=False: self._on_narration_toggled(checked), checkable=True)
        self.act_narration.setChecked(True)

    def _build_form(self) -> None:
        self.form_dock = QDockWidget(self)
        self.form_dock.setObjectName("inputs_dock")
        # Closable: View > Inputs (its toggle action) is greyed out on a dock that cannot be closed.
        self.form_dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                                   | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                                   | QDockWidget.DockWidgetFeature.DockWidgetClosable)
        body = QWidget()
        outer = QVBoxLayout(body)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.form = form

        self.prompt_edit = QPlainTextEdit()
        self.prompt_edit.setObjectName("prompt")
        self.prompt_edit.setFixedHeight(84)
        self.prompt_edit.setTabChangesFocus(True)
        self.model_combo = QComboBox()
        self.model_combo.setObjectName("model")
        self.model_combo.setMinimumContentsLength(12)
        self.model_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.open_button = QToolButton()
        self.open_button.setDefaultAction(self.act_open)
        model_row = QHBoxLayout()
        model_row.setContentsMargins(0, 0, 0, 0)
        model_row.addWidget(self.model_combo, 1)
        model_row.addWidget(self.open_button)
        self.device_combo = QComboBox()
        self.device_combo.setObjectName("device")
        self.dtype_combo = QComboBox()
        self.dtype_combo.setObjectName("dtype")
        for key in DTYPES:
            self.dtype_combo.addItem(key, key)
        self.engine_box = QGroupBox()
        self.engine_layout = QVBoxLayout(self.engine_box)
        self.engine_layout.setContentsMargins(6, 4, 6, 4)
        self.engine_checks: dict[str, QCheckBox] = {}
        self.engine_placeholder = QLabel()
        self.engine_layout.addWidget(self.engine_placeholder)
        self.tokens_spin = QSpinBox()
        self.tokens_spin.setObjectName("max_new_tokens")
        self.tokens_spin.setRange(1, 1_000_000)
        self.tokens_spin.setValue(40)
        self.block_spin = QSpinBox()
        self.block_spin.setObjectName("block_size")
        self.block_spin.setRange(1, 4096)
        self.block_spin.setValue(16)

        self.sampling_box = QGroupBox()
        sform = QFormLayout(self.sampling_box)
        self.greedy_check = QCheckBox()
        self.greedy_check.setChecked(True)
        self.temperature_spin = QDoubleSpinBox()
        self.temperature_spin.setRange(0.0, 10.0)
        self.temperature_spin.setSingleStep(0.1)
        self.temperature_spin.setValue(0.8)
        self.top_k_spin = QSpinBox()
        self.top_k_spin.setRange(0, 1_000_000)
        self.top_p_spin = QDoubleSpinBox()
        self.top_p_spin.setRange(0.0, 1.0)
        self.top_p_spin.setSingleStep(0.05)
        self.top_p_spin.setValue(1.0)
        self.seed_spin = QSpinBox()
        self.seed_spin.setRange(0, 2**31 - 1)
        self.temperature_label, self.top_k_label, self.top_p_label, self.seed_label = (QLabel() for _ in range(4))
        sform.addRow(self.greedy_check)
        sform.addRow(self.temperature_label, self.temperature_spin)
        sform.addRow(self.top_k_label, self.top_k_spin)
        sform.addRow(self.top_p_label, self.top_p_spin)
        sform.addRow(self.seed_label, self.seed_spin)

        self.layer_spin = QSpinBox()
        self.layer_spin.setObjectName("weights_layer")
        self.layer_spin.setRange(-1, 1)
        self.layer_spin.setValue(0)
        self.head_spin = QSpinBox()
        self.head_spin.setObjectName("weights_head")
        self.head_spin.setRange(0, 3)
        attn_row = QHBoxLayout()
        attn_row.setContentsMargins(0, 0, 0, 0)
        self.layer_label, self.head_label = QLabel(), QLabel()
        attn_row.addWidget(self.layer_label)
        attn_row.addWidget(self.layer_spin, 1)
        attn_row.addWidget(self.head_label)
        attn_row.addWidget(self.head_spin, 1)

        self.prompt_label, self.model_label, self.device_label, self.dtype_label = (QLabel() for _ in range(4))
        self.tokens_label, self.attention_label, self.block_label = QLabel(), QLabel(), QLabel()
        form.addRow(self.prompt_label)
        form.addRow(self.prompt_edit)
        form.addRow(self.model_label, model_row)
        form.addRow(self.device_label, self.device_combo)
        form.addRow(self.dtype_label, self.dtype_combo)
        form.addRow(self.engine_box)
        form.addRow(self.tokens_label, self.tokens_spin)
        form.addRow(self.block_label, self.block_spin)
        form.addRow(self.sampling_box)
        form.addRow(self.attention_label, attn_row)
        outer.addLayout(form)

        self.validation_label = QLabel()
        self.validation_label.setObjectName("validation")
        self.validation_label.setWordWrap(True)
        self.validation_label.setStyleSheet("color: #b00020;")
        outer.addWidget(self.validation_label)
        self.run_button = QPushButton()
        self.run_button.clicked.connect(lambda: self.start_run())
        outer.addWidget(self.run_button)
        # How long the form's run will take, when that is long enough to matter (see _update_estimate).
        self.estimate_label = QLabel()
        self.estimate_label.setObjectName("estimate")
        self.estimate_label.setWordWrap(True)
        self.estimate_label.setStyleSheet("color: #5f5f5f;")
        self.estimate_label.hide()
        outer.addWidget(self.estimate_label)
        outer.addStretch(1)

        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(body)
        self._form_body = body
        self.form_dock.setWidget(scroll)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.form_dock)

        for widget, signal in ((self.prompt_edit, "textChanged"), (self.model_combo, "currentIndexChanged"),
                               (self.device_combo, "currentIndexChanged"), (self.dtype_combo, "currentIndexChanged"),
                               (self.tokens_spin, "valueChanged"), (self.block_spin, "valueChanged"),
                               (self.greedy_check, "toggled"),
                               (self.temperature_spin, "valueChanged"), (self.top_k_spin, "valueChanged"),
                               (self.top_p_spin, "valueChanged"), (self.seed_spin, "valueChanged"),
                               (self.layer_spin, "valueChanged"), (self.head_spin, "valueChanged")):
            getattr(widget, signal).connect(self._on_form_changed)
        self.model_combo.currentIndexChanged.connect(self._on_model_changed)

    def _build_central(self) -> None:
        central = QWidget()
        # Where the transport's keys go: a click on the timeline, a panel or a plot (none of which
        # edits text) and a Run give it the focus, so Space, arrows and N reach the shortcuts instead
        # of the prompt or a spin box, which would take them as typing (see give_keys_to_transport).
        central.setObjectName("panel_area")
        central.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.panel_area = central
        layout = QVBoxLayout(central)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(4)

        self.error_frame = QFrame()
        self.error_frame.setStyleSheet("QFrame { background: #fdecea; border: 1px solid #b00020; }")
        err_layout = QHBoxLayout(self.error_frame)
        err_layout.setContentsMargins(6, 2, 6, 2)
        self.error_label = QLabel()
        self.error_label.setObjectName("error")
        self.error_label.setWordWrap(True)
        self.error_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_label.setStyleSheet("color: #b00020; border: none;")
        self.error_close = QToolButton()
        self.error_close.setText("×")
        self.error_close.clicked.connect(self.clear_error)
        err_layout.addWidget(self.error_label, 1)
        err_layout.addWidget(self.error_close)
        self.error_frame.hide()
        layout.addWidget(self.error_frame)

        timeline = QHBoxLayout()
        self.timeline_label = QLabel()
        self.timeline = QSlider(Qt.Orientation.Horizontal)
        self.timeline.setObjectName("timeline")
        self.timeline.setRange(0, 0)
        self.timeline.setPageStep(10)
        self.timeline.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # Left/Right belong to the window's shortcuts
        self.timeline.valueChanged.connect(self._on_timeline_value_changed)
        self.step_label = QLabel()
        self.step_label.setMinimumWidth(150)
        self.badge = QLabel()
        self.badge.setObjectName("badge")
        self.badge.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.badge.setMinimumWidth(120)
        timeline.addWidget(self.timeline_label)
        timeline.addWidget(self.timeline, 1)
        timeline.addWidget(self.step_label)
        # Where the eye is while a run is asked for: the model loading (busy), then steps done and time left.
        self.progress = QProgressBar()
        self.progress.setObjectName("run_progress")
        self.progress.setMaximumWidth(260)
        self.progress.setTextVisible(True)
        self.progress.hide()
        timeline.addWidget(self.progress)
        # The panels show a run the form no longer describes (another model, device or dtype, a replay).
        self.shown_run_label = QLabel()
        self.shown_run_label.setObjectName("shown_run")
        self.shown_run_label.setStyleSheet("background: #fff4ce; color: #5c4400; padding: 2px 6px; border-radius: 4px;")
        self.shown_run_label.hide()
        timeline.addWidget(self.shown_run_label)
        timeline.addWidget(self.badge)
        layout.addLayout(timeline)
        # The selected step in words (View > Step narration): a fixed number of lines, so a new step's
        # text never changes the grid's height (which would lay every panel out again).
        self.narration = QLabel()
        self.narration.setObjectName("narration")
        self.narration.setTextFormat(Qt.TextFormat.RichText)
        self.narration.setWordWrap(True)
        self.narration.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.narration.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)  # for notes
        self._narration_lines = 0  # set by _narrate from the window's height
        self._narration_timer = QTimer(self)
        self._narration_timer.setSingleShot(True)
        self._narration_timer.setInterval(NARRATION_STREAM_MS)
        self._narration_timer.timeout.connect(lambda: self._narrate())
        # Its text sets no width: on one line, unwrapped, a long sentence had widened the window.
        self.narration.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.narration.installEventFilter(self)  # a new width may fit more or less of it
        layout.addWidget(self.narration)

        self.grid = QSplitter(Qt.Orientation.Vertical)
        self.grid.setObjectName("panel_grid")
        self.grid.setChildrenCollapsible(False)
        self.rows: list[QSplitter] = []
        self.no_panels_label = QLabel()
        self.no_panels_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.grid.addWidget(self.no_panels_label)
        layout.addWidget(self.grid, 1)
        self._parking = QWidget(central)  # never shown: holds the panels the grid does not show
        self._parking.hide()
        self.setCentralWidget(central)

        self.toolbar = QToolBar()
        self.toolbar.setObjectName("transport")
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        for act in (self.act_run, self.act_pause, self.act_step, self.act_stop):
            self.toolbar.addAction(act)
        self.toolbar.addSeparator()
        self.speed_label = QLabel()
        self.speed_spin = QSpinBox()
        self.speed_spin.setObjectName("speed")
        self.speed_spin.setRange(0, 1000)
        self.speed_spin.setValue(20)
        self.speed_spin.valueChanged.connect(self._on_speed_spin_value_changed)
        self.toolbar.addWidget(self.speed_label)
        self.toolbar.addWidget(self.speed_spin)
        self.toolbar.addSeparator()
        self.state_label = QLabel()
        self.state_label.setObjectName("run_state")
        self.toolbar.addWidget(self.state_label)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.toolbar)

    def install_panels(self) -> None:
        """Build every registered panel and lay the shown ones out in a grid of splitters (once).
        Deferred past the first paint when the app starts, since pyqtgraph's import is most of a
        launch's time."""
        if self._panels_installed:
            return
        self._panels_installed = True
        self._load_panels()
        for frame in self.frames.values():
            frame.setParent(self._parking)
        for i, key in enumerate(self.frames):
            act = QAction(self, checkable=True, checked=True)
            act.toggled.connect(lambda checked, k=key: self._on_panel_action_toggled(k, checked))
            self.view_menu.insertAction(self._panel_actions_end, act)
            self.panel_actions[key] = act
            alone = QAction(self)
            if i < 9:
                alone.setShortcut(QKeySequence(f"Ctrl+{i + 1}"))
            alone.triggered.connect(lambda _checked=False, k=key: self.show_alone(k))
            self.addAction(alone)  # shortcuts work with the menu bar hidden
            self.alone_menu.addAction(alone)
            self.alone_actions[key] = alone
        self.retranslate_ui()
        s = self.settings
        hidden = set(s.value("view/hidden_panels", "", type=str).split(","))
        for key, act in self.panel_actions.items():
            with _blocked(act):
                act.setChecked(key not in hidden)
        if s.contains("window/grid"):  # the sizes the user dragged the saved arrangement to
            rows = [s.value(f"window/row{i}") for i in range(2) if s.contains(f"window/row{i}")]
            # Settings from before arrangements were kept had the sizes of every panel shown.
            saved_for = s.value("window/grid_panels", "+".join(self.frames), type=str)
            self._layouts[saved_for] = (s.value("window/grid"), rows)
        self._arrange()
        self._panel_painted.clear()
        self._warming = list(self.panels)
        self.panels_ready.emit()

    def shown_panels(self) -> list[str]:
        """The panels the grid shows, in registry order: those checked in View, or the focused one alone."""
        return [k for k, act in self.panel_actions.items() if act.isChecked() and self._focused in ("", k)]

    def _arrange(self) -> None:
        """Lay the shown panels out as a grid: up to three in one row, more in two rows (the first the
        longer), so panels hidden in View give the others their room. Each arrangement keeps the
        sizes the user dragged it to; a new one starts with equal rows and columns."""
        shown = self.shown_panels()
        key = "+".join(shown)
        if key == self._arrangement:
            return
        if self._arrangement is not None:
            self._layouts[self._arrangement] = self._grid_state()
        self._arrangement = key
        for k, frame in self.frames.items():
            if k not in shown:
                frame.setParent(self._parking)  # out of every row: a row holds exactly its shown panels
                frame.hide()
        n_rows = 0 if not shown else 1 if len(shown) <= 3 else 2
        n_cols = math.ceil(len(shown) / n_rows) if n_rows else 0
        while len(self.rows) < n_rows:
            row = QSplitter(Qt.Orientation.Horizontal)
            row.setChildrenCollapsible(False)
            self.grid.addWidget(row)
            self.rows.append(row)
        for r, row in enumerate(self.rows):
            members = shown[r * n_cols:(r + 1) * n_cols]
            for i, k in enumerate(members):
                row.insertWidget(i, self.frames[k])
                self.frames[k].show()
            row.setVisible(bool(members))
        self.no_panels_label.setVisible(not shown)
        grid, rows = self._layouts.get(key, (None, []))
        if grid is None:
            self.grid.setSizes([0 if shown else 1000] + [1000 if r < n_rows else 0 for r in range(len(self.rows))])
        else:
            self.grid.restoreState(grid)
        for r, row in enumerate(self.rows[:n_rows]):
            if r < len(rows) and rows[r] is not None:
                row.restoreState(rows[r])
            else:
                row.setSizes([1000] * row.count())  # equal columns (scaled to the width) until the user drags
        self._update_no_panels_text()

    def _grid_state(self) -> tuple:
        return self.grid.saveState(), [row.saveState() for row in self.rows]

    def _update_no_panels_text(self) -> None:
        if not self._panels_installed:
            text = self.tr("Loading the panels...")
        elif not self.frames:
            text = self.tr("No panels registered yet")
        else:
            text = self.tr("Every panel is hidden: show some in the View menu")
        self.no_panels_label.setText(text)

    def _reactivate(self) -> None:
        if self.isVisible() and QApplication.activeWindow() is None:
            self.activateWindow()

    def give_keys_to_transport(self) -> None:
        """Space, the arrows, N, Home and End act on the run: the focus leaves any field for the panel
        area. A field's text is never touched; clicking back into it gives it its keys again."""
        if not self.panel_area.hasFocus():
            self.panel_area.setFocus(Qt.FocusReason.OtherFocusReason)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._update_narration()  # its lines follow the window's height

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.MouseButtonPress:
            if (isinstance(obj, QWidget) and obj.window() is self and self.panel_area.isAncestorOf(obj)
                    and not edits_text(obj)):
                # After the click is handled (a point picked, a check box toggled): Qt gives the focus
                # before any filter sees the press, and a plot or a label would keep the prompt's.
                QTimer.singleShot(0, self.give_keys_to_transport)
            return False
        if (event.type() == QEvent.Type.Hide and isinstance(obj, QDialog) and obj.isWindow()
                and obj.parentWidget() is not None and obj.parentWidget().window() is self):
            # A dialog of this window closed (About, a file dialog, the shortcuts table): without a
            # window manager to activate the window again, its shortcuts stayed dead until a click.
            QTimer.singleShot(0, self._reactivate)
            return False
        if obj is self.narration and event.type() == QEvent.Type.Resize:
            self._update_narration()
            return False
        if obj is self and event.type() == QEvent.Type.Paint:
            self.removeEventFilter(self)  # the window is on screen: now build the panels
            QTimer.singleShot(0, self.install_panels)
        return False

    def _load_panels(self) -> None:
        """Every registered panel that imports and builds; a broken one is reported, not fatal."""
        for key, spec in PANELS:
            module_name, _, class_name = spec.partition(":")
            try:
                panel = getattr(importlib.import_module(module_name), class_name)()
            except Exception as exc:
                traceback.print_exc()
                self.panel_load_errors.append(f"{key}: {type(exc).__name__}: {exc}")
                continue
            if not panel.key:
                panel.key = key
            self.panels[key] = panel
            self.frames[key] = frame = PanelFrame(panel)
            frame.focus_requested.connect(self.toggle_focus)
            panel.step_picked.connect(self.select_step)  # a click in a plot, as the timeline would

    def _build_menus(self) -> None:
        bar = self.menuBar()
        self.file_menu = bar.addMenu("")
        self.export_menu = self.file_menu.addMenu("")
        self.add_export_actions(self.export_menu)
        self.export_menu.menuAction().setEnabled(not self.export_menu.isEmpty())
        self.file_menu.addSeparator()
        self.file_menu.addAction(self.act_quit)

        self.model_menu = bar.addMenu("")
        self.model_menu.addAction(self.act_open)
        self.model_menu.addAction(self.act_memory)

        self.run_menu = bar.addMenu("")
        for act in (self.act_run, self.act_pause, self.act_step, self.act_stop, None, self.act_faster,
                    self.act_slower, None, self.act_prev, self.act_next, self.act_back10, self.act_fwd10,
                    self.act_first, self.act_last):
            if act is None:
                self.run_menu.addSeparator()
            else:
                self.run_menu.addAction(act)

        self.view_menu = bar.addMenu("")
        self.view_menu.addAction(self.act_present)
        self.view_menu.addSeparator()
        self.view_menu.addAction(self.act_narration)
        self.view_menu.addAction(self.form_dock.toggleViewAction())
        self.view_menu.addAction(self.toolbar.toggleViewAction())
        self.view_menu.addSeparator()
        self.panel_actions: dict[str, QAction] = {}
        self._panel_actions_end = self.view_menu.addSeparator()  # panel toggles go above this
        # Ctrl+1..9: one panel alone in the grid (as a double-click on its title); Ctrl+0: all again.
        self.alone_menu = self.view_menu.addMenu("")
        self.act_all_panels = QAction(self)
        self.act_all_panels.setShortcut(QKeySequence("Ctrl+0"))
        self.act_all_panels.triggered.connect(lambda: self.show_checked_panels())
        self.addAction(self.act_all_panels)
        self.alone_menu.addAction(self.act_all_panels)
        self.alone_menu.addSeparator()
        self.alone_actions: dict[str, QAction] = {}
        self.view_menu.addAction(self.act_reset_layout)
        self.zoom_menu = self.view_menu.addMenu("")
        self.zoom_group = QActionGroup(self)
        self.zoom_group.setExclusive(True)
        for percent in sorted({*ZOOMS, zoom_in_effect()}):
            act = QAction(f"{percent}%", self, checkable=True, checked=percent == zoom_in_effect())
            act.setData(percent)
            self.zoom_group.addAction(act)
            self.zoom_menu.addAction(act)
        self.zoom_group.triggered.connect(lambda act: self.choose_zoom(int(act.data())))
        self.language_menu = self.view_menu.addMenu("")
        self.language_group = QActionGroup(self)
        self.language_group.setExclusive(True)
        self.act_english = QAction("English", self, checkable=True, checked=True)
        self.act_english.setData("en")
        self.language_group.addAction(self.act_english)
        self.language_menu.addAction(self.act_english)

        self.help_menu = bar.addMenu("")
        self.help_menu.addAction(self.act_shortcuts)
        self.help_menu.addAction(self.act_about)

    def _build_status(self) -> None:
        status = self.statusBar()
        self.status_device, self.status_model, self.status_params, self.status_kv, self.status_mem = (
            QLabel() for _ in range(5))
        for label in (self.status_device, self.status_model, self.status_params, self.status_kv, self.status_mem):
            status.addPermanentWidget(label)
        self.status_mem.hide()

    def add_export_actions(self, menu) -> None:
        """Hook for File > Export (screenshots, data, animations): add actions to `menu`."""

    def retranslate_ui(self) -> None:
        """Every visible string, so a language switch (View > Language) can re-run it."""
        self.setWindowTitle(self.tr("kvviz: the KV cache, step by step"))
        texts = {
            self.act_run: (self.tr("&Run"), self.tr("Start a compare run of the checked engines")),
            self.act_pause: (self.tr("&Pause"), self.tr("Pause or resume the run")),
            self.act_step: (self.tr("&Step"), self.tr("Run one step of every engine, then pause")),
            self.act_stop: (self.tr("S&top"), self.tr("Stop the run; its steps stay viewable")),
            self.act_prev: (self.tr("Previous step"), self.tr("Show the step before")),
            self.act_next: (self.tr("Next step"),
                            self.tr("Show the step after; at the newest step of a paused run, compute one more")),
            self.act_back10: (self.tr("Back 10 steps"), ""),
            self.act_fwd10: (self.tr("Forward 10 steps"), ""),
            self.act_first: (self.tr("First step"), ""),
            self.act_last: (self.tr("Newest step (follow the run)"), ""),
            self.act_faster: (self.tr("Faster"), ""),
            self.act_slower: (self.tr("Slower"), ""),
            self.act_open: (self.tr("Open checkpoint..."),
                            self.tr("Add a model folder (config.json and weights) to the model picker")),
            self.act_focus_prompt: (self.tr("Edit prompt"), ""),
            self.act_quit: (self.tr("&Quit"), ""),
            self.act_about: (self.tr("&About kvviz"), ""),
            self.act_shortcuts: (self.tr("&Keyboard shortcuts"), ""),
            self.act_memory: (self.tr("Memory calculator..."),
                              self.tr("What a model's KV cache costs at scale, computed from its config")),
            self.act_reset_layout: (self.tr("Reset layout"), ""),
            self.act_narration: (self.tr("Step &narration"),
                                 self.tr("The selected step in words, under the timeline: what each engine "
                                         "computed, read from its cache and moved")),
            self.act_present: (self.tr("&Presentation mode"),
                               self.tr("Full screen for the panels: the inputs and the status bar hidden")),
        }
        for act, (text, tip) in texts.items():
            act.setText(text)
            act.setProperty("tip", tip or text)
            self._set_action_tip(act)
        self._update_pause_text()
        self.open_button.setText("...")
        self.form_dock.setWindowTitle(self.tr("Inputs"))
        self.prompt_label.setText(self.tr("Prompt"))
        self.prompt_edit.setPlaceholderText(self.tr("Type a prompt, then Run (Ctrl+R)"))
        self.model_label.setText(self.tr("Model"))
        self.device_label.setText(self.tr("Device"))
        self.dtype_label.setText(self.tr("Dtype"))
        self.dtype_combo.setItemText(0, self.tr("auto"))
        self.dtype_combo.setToolTip(self.tr("auto: bf16 on CUDA, else the model's own dtype"))
        self.engine_box.setTitle(self.tr("Engines"))
        self.engine_placeholder.setText(self.tr("loading PyTorch..."))
        for key, box in self.engine_checks.items():
            box.setText(key)
            box.setToolTip(QCoreApplication.translate("engines", self._engine_help.get(key, "")))
        self.tokens_label.setText(self.tr("New tokens"))
        self.block_label.setText(self.tr("Block size"))
        self.block_spin.setToolTip(self.tr("Tokens per block of the paged cache"))
        self.sampling_box.setTitle(self.tr("Sampling"))
        self.greedy_check.setText(self.tr("Greedy (always the most likely token)"))
        self.temperature_label.setText(self.tr("Temperature"))
        self.top_k_label.setText(self.tr("Top-k"))
        self.top_k_spin.setSpecialValueText(self.tr("off"))
        self.top_p_label.setText(self.tr("Top-p"))
        self.top_p_spin.setToolTip(self.tr("1.00 keeps every token"))
        self.seed_label.setText(self.tr("Seed"))
        self.attention_label.setText(self.tr("Attention"))
        self.layer_label.setText(self.tr("layer"))
        self.head_label.setText(self.tr("head"))
        self.layer_spin.setSpecialValueText(self.tr("off"))
        tip = self.tr("Which layer and head the engines copy attention weights from (applies to the next run)")
        self.layer_spin.setToolTip(tip)
        self.head_spin.setToolTip(tip)
        self.run_button.setText(self.tr("Run (Ctrl+R)"))
        self.timeline_label.setText(self.tr("Step"))
        self.timeline.setToolTip(self.tr("Scrub through the recorded steps (Left/Right, Home/End)"))
        self.badge.setToolTip(self.tr("Whether the engines' tokens so far are the same"))
        self.speed_label.setText(self.tr(" Speed "))
        self.speed_spin.setSuffix(self.tr(" steps/s"))
        self.speed_spin.setSpecialValueText(self.tr("as fast as possible"))
        self.speed_spin.setToolTip(self.tr("Lockstep rounds per second ([ slower, ] faster)"))
        self._update_no_panels_text()
        for key, frame in self.frames.items():
            frame.retranslate()
            self.panel_actions[key].setText(frame.panel.title())
            self.alone_actions[key].setText(frame.panel.title())
            # Help > Keyboard shortcuts names what the key does, not only the menu item's text.
            self.alone_actions[key].setProperty("shortcut_help", self.tr("{panel} alone in the grid").format(
                panel=frame.panel.title()))
        self.alone_menu.setTitle(self.tr("Panel &alone"))
        self.act_all_panels.setText(self.tr("All panels"))
        self.act_all_panels.setProperty("shortcut_help", self.tr("All panels in the grid again"))
        self.file_menu.setTitle(self.tr("&File"))
        self.export_menu.setTitle(self.tr("&Export"))
        self.model_menu.setTitle(self.tr("&Model"))
        self.run_menu.setTitle(self.tr("&Run"))
        self.view_menu.setTitle(self.tr("&View"))
        self.language_menu.setTitle(self.tr("&Language"))
        self.zoom_menu.setTitle(self.tr("&Zoom"))
        self.zoom_menu.setToolTip(self.tr("Text and plots larger or smaller, from the next start"))
        self.help_menu.setTitle(self.tr("&Help"))
        self.form_dock.toggleViewAction().setText(self.tr("Inputs"))
        self.toolbar.toggleViewAction().setText(self.tr("Transport"))
        self.toolbar.setWindowTitle(self.tr("Transport"))
        self._update_state_label()
        self._update_badge()
        self._update_step_label()
        self._update_status()
        if self.shortcuts_dialog is not None:
            self._fill_shortcuts()
        scrollbar = self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        self.form_dock.setMinimumWidth(self._form_body.minimumSizeHint().width() + scrollbar + 8)

    def showEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        if not event.spontaneous():
            # Typed keys reach a new window at once, with no window manager to give it the focus
            # (a bare X server, a kiosk) as with one.
            QTimer.singleShot(0, self._reactivate)

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.LanguageChange:
            self.retranslate_ui()
            self._validate_form()
        super().changeEvent(event)

    # ------------------------------------------------------------------ the worker
    def _connect_worker(self, worker: QObject) -> None:
        self.environment_requested.connect(worker.list_environment)
        self.run_requested.connect(worker.start_run)
        self.stop_requested.connect(worker.request_stop)
        self.pause_requested.connect(worker.set_paused)
        self.step_requested.connect(worker.request_step)
        self.speed_requested.connect(worker.set_speed)
        worker.environment_listed.connect(self._on_environment_listed)
        worker.model_loaded.connect(self._on_model_loaded)
        worker.run_started.connect(self._on_run_started)
        worker.run_noted.connect(self._on_run_noted)
        worker.step_traced.connect(self._on_step_traced)
        worker.run_failed.connect(self._on_run_failed)
        worker.run_finished.connect(self._on_run_finished)
        # Direct: runs in the worker's thread as it ends, so the worker's timer is stopped there.
        self._thread.finished.connect(worker.shut_down, Qt.ConnectionType.DirectConnection)

    @Slot(object)
    def _on_environment_listed(self, env: Environment) -> None:
        self.env = env
        self._engine_help = dict(env.engines)
        self.models = {m.name: m for m in env.models}
        for path in self._saved_list("models/checkpoints"):
            self.models.setdefault(path, ModelChoice(name=path, description=self.tr("checkpoint folder")))
        with _blocked(self.model_combo):
            self.model_combo.clear()
            for choice in self.models.values():
                self._add_model_item(choice)
        wanted = self._wanted.get("model")
        if wanted in self.models and not self.models[wanted].available:
            wanted = None  # e.g. the trained model's weights went away: fall back to the default
        self._select_combo(self.model_combo, wanted, fallback=env.default_model)
        with _blocked(self.device_combo):
            self.device_combo.clear()
            for dev in env.devices:
                label = self.tr("auto ({0})").format(env.auto_device) if dev == "auto" else dev
                self.device_combo.addItem(label, dev)
        self._select_combo(self.device_combo, self._wanted.get("device"), fallback="auto")
        self.engine_placeholder.hide()
        wanted = self._wanted.get("engines")
        checked = set(wanted.split(",")) if wanted is not None else {k for k, _ in env.engines}
        for key, _ in env.engines:
            box = QCheckBox(key)
            box.setObjectName(f"engine_{key}")
            box.setChecked(key in checked)
            box.toggled.connect(self._on_form_changed)
            self.engine_layout.addWidget(box)
            self.engine_checks[key] = box
        self.retranslate_ui()
        self._on_model_changed()
        self.environment_ready.emit()

    def _add_model_item(self, choice: ModelChoice) -> None:
        self.model_combo.addItem(choice.name, choice.name)
        index = self.model_combo.count() - 1
        tip = "\n".join(t for t in (choice.description, choice.warning, choice.reason) if t)
        self.model_combo.setItemData(index, tip, Qt.ItemDataRole.ToolTipRole)

    @Slot(object)
    def _on_model_loaded(self, choice: ModelChoice) -> None:
        old = self.models.get(choice.name)
        if old is None or old.config is None:
            self.models[choice.name] = ModelChoice(name=choice.name, description=old.description if old else "",
                                                   config=choice.config)
            self._on_model_changed()

    @Slot(object)
    def _on_run_started(self, info: RunInfo) -> None:
        if info.run_id != self.run_id:
            return
        self.history.reset(info)
        self._own_info = info  # a history holding another RunInfo is a replayed trace
        # Each panel forgets the last run when it is next drawn, not all at once here: eight panels
        # cleared together repainted in one ~60 ms frame as the run's steps began to stream in.
        self._stale = set(self.panels)
        self._panel_painted.clear()
        for frame in self.frames.values():
            if frame.error:
                frame.error = ""
                frame.retranslate()
        self._selected = 0
        self._follow = True
        self._set_state(RunState.PAUSED if self._start_paused else RunState.RUNNING)
        self._update_status()
        self.run_started.emit(info)

    @Slot(str, str)
    def _on_run_noted(self, run_id: str, note: str) -> None:
        if run_id == self.run_id:
            self.statusBar().showMessage(note, 15_000)

    @Slot(object)
    def _on_step_traced(self, trace: StepTrace) -> None:
        if trace.run_id != self.history.info.run_id:
            return  # a late record of an earlier run
        self.history.add(trace)
        self.step_traced.emit(trace)

    @Slot(str, str)
    def _on_run_failed(self, run_id: str, message: str) -> None:
        if run_id not in ("", self.run_id):
            return
        self.show_error(message)
        self.run_failed.emit(run_id, message)

    @Slot(str)
    def _on_run_finished(self, run_id: str) -> None:
        if run_id != self.run_id:
            return
        self._set_state(RunState.IDLE)
        n = self.history.n_steps() if self.history.info.run_id == run_id else 0
        if n:
            total = self.history.info.max_new_tokens
            self.statusBar().showMessage(
                self.tr("finished: {0} steps").format(n) if n >= total else
                self.tr("stopped after {0} of {1} steps").format(n, total), 10_000)
        info = self.history.info
        if info.run_id == run_id:
            # What this run measured, per engine: the next run's estimate on this model starts from it.
            key = (info.model_name, info.device, info.dtype)
            self._fits[key] = {**self._fits.get(key, {}), **estimate.fit_history(self.history.traces)}
            self._repaint()  # the final step, one frame, before anyone waiting looks
        self._update_estimate()
        self.run_finished.emit(run_id)

    def shutdown_worker(self) -> None:
        """Stop the run and the worker's thread, waiting for a step or model load in progress to end."""
        if not self._thread.isRunning():
            return
        self.stop_requested.emit()
        self._thread.quit()
        if self._thread.wait(ABORT_AFTER_MS):
            return
        # A long step or model load holds the thread: end the engine process, if there is one.
        abort = getattr(self._worker, "abort", None)
        if abort is not None:
            abort()
        if not self._thread.wait(THREAD_WAIT_MS):
            print("kvviz: still waiting for the worker thread to finish its step...", file=sys.stderr)
            self._thread.wait()

    # ------------------------------------------------------------------ transport
    def start_run(self, *, paused: bool = False) -> bool:
        """Ask the worker for a run of the form's settings; False (with the reason shown) if refused."""
        reason = self._validate_form()
        if reason:
            self.statusBar().showMessage(reason, 10_000)
            return False
        self.install_panels()
        request = self.build_request(paused=paused)
        if self.state is not RunState.IDLE:
            self.stop_requested.emit()
        self.clear_error()
        self.run_id = request.run_id
        self._start_paused = paused
        found = self.form_estimate_ms()
        if found is not None and found[0] >= SLOW_RUN_S * 1000:
            self.statusBar().showMessage(self.tr("This run will take about {0}; the bar beside the timeline "
                                                 "shows the time left.").format(fmt_ms(found[0])), 15_000)
        self._set_state(RunState.LOADING)
        self._save_form()
        self.run_requested.emit(request)
        self.give_keys_to_transport()  # Ctrl+R from the prompt, then Space pauses: no other click
        return True

    def build_request(self, *, paused: bool = False) -> RunRequest:
        layer = self.layer_spin.value()
        run = RunConfig(
            prompt=self.prompt_edit.toPlainText(),
            max_new_tokens=self.tokens_spin.value(),
            engines=self.checked_engines(),
            sampling=self._sampling(),
            block_size=self.block_spin.value(),
            trace=TraceOptions(masks=True, weights_layer=None if layer < 0 else layer,
                               weights_head=self.head_spin.value()),
        )
        return RunRequest(run_id=uuid.uuid4().hex[:8], model=self.current_model(), run=run,
                          device=self.device_combo.currentData() or "auto",
                          dtype=self.dtype_combo.currentData() or "auto",
                          steps_per_s=float(self.speed_spin.value()), start_paused=paused,
                          threads=self.torch_threads)

    def toggle_pause(self) -> None:
        if self.state is RunState.RUNNING:
            self._set_state(RunState.PAUSED)
            self.pause_requested.emit(True)
        elif self.state is RunState.PAUSED:
            self._set_state(RunState.RUNNING)
            self._follow = True
            self.pause_requested.emit(False)

    def set_paused(self, paused: bool) -> None:
        if paused != (self.state is RunState.PAUSED):
            self.toggle_pause()

    def step_once(self) -> None:
        """One lockstep round: from idle it starts a paused run; a running run pauses first."""
        if self.state is RunState.IDLE:
            self.start_run(paused=True)
            return
        if self.state is RunState.RUNNING:
            self.toggle_pause()
        if self.state is RunState.PAUSED:
            self._follow = True
            self.step_requested.emit()

    def stop_run(self) -> None:
        if self.state is not RunState.IDLE:
            self.stop_requested.emit()

    def change_speed(self, direction: int) -> None:
        ladder = list(SPEED_LADDER)
        value = self.speed_spin.value()
        ordered = [v if v else math.inf for v in ladder]
        current = value if value else math.inf
        if direction > 0:
            nxt = next((v for v in ordered if v > current), ordered[-1])
        else:
            nxt = next((v for v in reversed(ordered) if v < current), ordered[0])
        self.speed_spin.setValue(0 if nxt == math.inf else int(nxt))

    # ------------------------------------------------------------------ timeline
    @property
    def selected_step(self) -> int:
        return self._selected

    def select_step(self, step: int) -> None:
        n = self.history.n_steps()
        self._selected = max(0, min(step, n - 1)) if n else 0
        self._follow = n > 0 and self._selected == n - 1 and self.state is not RunState.IDLE
        self._user_selected = True
        with _blocked(self.timeline):
            self.timeline.setValue(self._selected)
        self._update_step_label()

    def scrub(self, delta: int) -> None:
        self.select_step(self._selected + delta)
        if delta < 0:
            self._follow = False

    def next_step(self) -> None:
        """Right: the step after; at the newest step of a paused run, compute one more."""
        n = self.history.n_steps()
        at_newest = self._selected >= n - 1 or (self._follow and self.state is not RunState.IDLE)
        if at_newest and self.state is RunState.PAUSED:
            self.step_once()
        elif self._selected < n - 1:
            self.scrub(1)

    def follow_live(self) -> None:
        self.select_step(self.history.n_steps() - 1)
        self._follow = True

    @Slot(int)
    def _on_timeline_value_changed(self, value: int) -> None:
        self._selected = value
        self._follow = value == self.timeline.maximum() and self.state is not RunState.IDLE
        self._user_selected = True
        self._update_step_label()

    @Slot(int)
    def _on_speed_spin_value_changed(self, value: int) -> None:
        self.speed_requested.emit(float(value))
        self._update_estimate()

    # ------------------------------------------------------------------ painting
    @Slot()
    def _on_repaint_timer_timeout(self) -> None:
        now = time.perf_counter()
        if self._drew_last_tick:
            # The thread was busy past the timer's period: mostly rendering what the last tick drew
            # (pyqtgraph paints in the event loop, after show_step returns). Rest in proportion.
            lag = max(0.0, now - self._last_tick_end - REPAINT_MS / 1000.0)
            self._paint_resume_at = max(self._paint_resume_at, now + PAINT_REST * lag)
        self._drew_last_tick = bool(self._repaint(timed=True))
        if not self._drew_last_tick and self.state is RunState.IDLE and self._warming:
            self._warm_up_one()
        self._last_tick_end = time.perf_counter()

    def _warm_up_one(self) -> None:
        """One piece of a panel's warm-up for the engines this app offers, on an idle tick."""
        if self.env is None:
            return  # the engines are not known yet
        keys = tuple(k for k, _ in self.env.engines)
        choice = self.models.get(self.current_model())
        positions = choice.config.max_seq_len if choice is not None and choice.config is not None else 0
        while self._warming:
            key = self._warming[0]
            if self.panels[key].warm_up(keys, positions):
                return
            self._warming.pop(0)
        # Warmed up: the ~200,000 objects Qt, pyqtgraph and the panels made so far live as long as
        # the app. Out of the collector's way, a full collection during a run scans only the run's
        # own objects (measured: 50-130 ms stalls mid-run before, 3-4 ms after).
        gc.collect()
        gc.freeze()

    def refresh(self) -> None:
        """Draw every visible panel at the selected step now (tests, screenshots, the end of a run)."""
        self._repaint()

    def _repaint(self, *, timed: bool = False) -> dict[str, float]:
        """Bring the visible panels, the timeline, the step label and the badge up to the history and
        the selected step, all in one go: a frame shows one step everywhere (panels drawn in turn, one
        per tick, had shown steps 71, 82 and 86 at once while a run streamed in). A panel already
        showing the step is not drawn again. Returns {panel: seconds its show_step took}.

        Timed (the repaint timer): while a run streams in, painting then rests PAINT_REST times as
        long as the frame took, so the frame rate follows the panels' cost, the GUI thread stays
        responsive between frames and the CPU goes to the engines. A step the user selects is drawn at once."""
        started = time.perf_counter()
        user = self._user_selected
        if timed and started < self._paint_resume_at and not user:
            return {}
        version = self.history.version
        n = self.history.n_steps()
        if version != self._seen_version:
            self._seen_version = version
            with _blocked(self.timeline):
                self.timeline.setMaximum(max(0, n - 1))
                if self._follow and n:
                    self._selected = n - 1
                self._selected = min(self._selected, max(0, n - 1))
                self.timeline.setValue(self._selected)
            self._update_badge()
            self._update_step_label()
            self._update_memory()
            self._update_progress()
            if self.history.info is not self._status_run:  # a new run shown (or a trace replayed)
                self._update_status()
        if n == 0:
            if not timed:  # a run that ended before its first step: forget the last one
                for key in sorted(self._stale):
                    self.panels[key].clear()
                self._stale.clear()
            return {}
        target = (version, self._selected)
        self._user_selected = False
        drawn: dict[str, float] = {}
        for key in self.panels:
            if self._panel_painted.get(key) == target or self.frames[key].isHidden():
                continue
            t = time.perf_counter()
            self._draw_panel(key)
            drawn[key] = time.perf_counter() - t
            self._panel_painted[key] = target
        self._painted = target
        if drawn and timed and not user:
            self._paint_resume_at = time.perf_counter() + PAINT_REST * (time.perf_counter() - started)
        return drawn

    def _draw_panel(self, key: str) -> None:
        try:
            if key in self._stale:
                self._stale.discard(key)
                self.panels[key].clear()
            self.panels[key].show_step(self.history, self._selected)
            from kvviz.ui.panels._plots import scenes_in, settle  # pyqtgraph: imported with the panels

            if key not in self._panel_scenes:
                self._panel_scenes[key] = scenes_in(self.frames[key])
            settle(self._panel_scenes[key])  # painted once per draw (see settle)
        except Exception as exc:  # one broken panel must not take the window down
            frame = self.frames[key]
            if not frame.error:
                traceback.print_exc()
                frame.show_error(f"{type(exc).__name__}: {exc}")

    def show_alone(self, key: str) -> None:
        """This panel alone in the grid (shown first if View had hidden it); Ctrl+0 shows all again."""
        self.panel_actions[key].setChecked(True)
        if self._focused != key:
            self.toggle_focus(key)

    def toggle_focus(self, key: str) -> None:
        """Show only this panel in the grid, or, if it is already alone, every checked panel again."""
        self._focused = "" if self._focused == key else key
        self._arrange()

    def show_checked_panels(self) -> None:
        """No panel alone any more: the grid shows the panels checked in View."""
        self._focused = ""
        self._arrange()

    def _on_panel_action_toggled(self, key: str, checked: bool) -> None:
        self.show_checked_panels()  # leaves a panel alone and applies the View menu's choice

    def _update_badge(self) -> None:
        with_steps = [k for k, v in self.history.traces.items() if v]
        if len(with_steps) < 2:
            text, colors = (self.tr("one engine") if with_steps else ""), ""
        elif (k := self.history.divergence()) is None:
            text, colors = self.tr("identical"), "background: #d7f0db; color: #1b5e20;"
        else:
            text, colors = self.tr("differ at step {0}").format(k), "background: #fdecea; color: #b00020;"
        # The same padding in every state, set only when it changes: a badge that gained padding as
        # the first steps arrived grew the timeline row by 3 px, which resized and repainted every
        # panel at once (a 100 ms stall in a compare run); a style set again re-polishes it.
        style = colors + " padding: 2px 6px; border-radius: 4px;"
        if self.badge.text() != text:
            self.badge.setText(text)
        if self.badge.styleSheet() != style:
            self.badge.setStyleSheet(style)

    def _update_step_label(self) -> None:
        n = self.history.n_steps()
        if not n:
            self.step_label.setText(self.tr("no steps yet: Run (Ctrl+R)"))
            return
        phase = ""
        for key in self.history.engines:
            trace = self.history.at(key, self._selected)
            if trace is not None:
                phase = self.tr("prefill") if trace.phase == "prefill" else self.tr("decode")
                break
        self.step_label.setText(self.tr("step {0} / {1}  {2}").format(self._selected, n - 1, phase))
        self._update_narration()

    def _update_narration(self) -> None:
        """The selected step in words, in the lines the window gives it (two from NARRATION_TALL_PX
        of height, else one): the whole, else without the bytes sentence (the bytes panel has them),
        else that shortened to fit. The full text is the tooltip. While a run streams in, at most
        every NARRATION_STREAM_MS: faster than that it cannot be read, and each is a text layout."""
        if self.narration.isHidden():
            return
        if self.state is RunState.RUNNING:
            if not self._narration_timer.isActive():
                self._narration_timer.start()
            return
        self._narration_timer.stop()
        self._narrate()

    def _narrate(self) -> None:
        lines = 2 if self.height() >= NARRATION_TALL_PX else 1
        if lines != self._narration_lines:
            self._narration_lines = lines
            self.narration.setWordWrap(lines > 1)
            self.narration.setFixedHeight(lines * self.narration.fontMetrics().lineSpacing() + 4)
        if not self._panels_installed or not self.history.n_steps():
            self.narration.clear()
            return
        from kvviz.ui.narration import describe

        text = describe(self.history, self._selected)
        self.narration.setToolTip(text)
        if not self._narration_fits(text, lines):
            text = describe(self.history, self._selected, traffic=False)
            if not self._narration_fits(text, lines):  # not even the K/V sentence: its words, cut to the line
                plain = QTextDocumentFragment.fromHtml(text).toPlainText()
                text = html.escape(self.narration.fontMetrics().elidedText(
                    plain, Qt.TextElideMode.ElideRight, self.narration.contentsRect().width()))
        if text != self.narration.text():
            self.narration.setText(text)

    def _narration_fits(self, text: str, lines: int) -> bool:
        document = QTextDocument()
        document.setDocumentMargin(0)
        document.setDefaultFont(self.narration.font())
        document.setHtml(text)
        width = self.narration.contentsRect().width()
        if lines == 1:
            return document.idealWidth() <= width
        document.setTextWidth(width)
        return document.size().height() <= self.narration.contentsRect().height()

    def _on_narration_toggled(self, checked: bool) -> None:
        self.narration.setVisible(checked)
        self._update_narration()

    def _update_memory(self) -> None:
        for key in self.history.engines:
            steps = self.history.traces[key]
            if steps and steps[-1].device_mem_bytes is not None:
                self.status_mem.setText(self.tr("device memory {0}").format(fmt_bytes(steps[-1].device_mem_bytes)))
                self.status_mem.show()
                return
        self.status_mem.hide()

    # ------------------------------------------------------------------ state, errors, status
    def _set_state(self, state: RunState) -> None:
        self.state = state
        self._update_pause_text()
        self._update_state_label()
        self._update_progress()
        self._update_status()
        self._update_narration()  # paused or done: told at once again

    def _update_pause_text(self) -> None:
        self.act_pause.setText(self.tr("&Resume") if self.state is RunState.PAUSED else self.tr("&Pause"))
        self.act_pause.setEnabled(self.state in (RunState.RUNNING, RunState.PAUSED))
        self.act_stop.setEnabled(self.state is not RunState.IDLE)

    def _update_state_label(self) -> None:
        self.state_label.setText({
            RunState.IDLE: self.tr("idle"), RunState.LOADING: self.tr("loading the model..."),
            RunState.RUNNING: self.tr("running"), RunState.PAUSED: self.tr("paused"),
        }[self.state])

    def show_error(self, message: str) -> None:
        self.error_label.setText(message)
        self.error_frame.show()

    def clear_error(self) -> None:
        self.error_label.clear()
        self.error_frame.hide()

    def error_text(self) -> str:
        return self.error_label.text() if self.error_frame.isVisibleTo(self) else ""

    def _update_status(self) -> None:
        """Device, model, parameter count, KV bytes per token of what the panels show: the run drawn
        (a replayed trace's model too), else the form's selection, from the model's config. A run the
        form no longer describes is marked beside the timeline."""
        info = self.history.info
        self._status_run = info
        if info.run_id and info.model_name:
            self.status_device.setText(self.tr("device {0}, {1}").format(info.device or "-", info.dtype or "-"))
            self.status_model.setText(self.tr("model {0}").format(info.model_name))
            self.status_params.setText(self.tr("{0} parameters").format(fmt_count_short(info.param_count)))
            self.status_kv.setText(self.tr("KV {0} per token").format(fmt_bytes(info.kv_bytes_per_token)))
            self._update_shown_run_mark(info)
            return
        self.shown_run_label.hide()
        model = self.current_model()
        device = self.current_device()
        dtype = self._form_dtype()
        self.status_device.setText(self.tr("device {0}, {1}").format(device or "-", dtype or "-"))
        choice = self.models.get(model)
        self.status_model.setText(self.tr("model {0}").format(model or "-"))
        if choice is None or choice.config is None:
            self.status_params.setText(self.tr("parameters: read when loaded") if model else "")
            self.status_kv.setText("")
            return
        cfg = choice.config
        self.status_params.setText(self.tr("{0} parameters").format(fmt_count_short(cfg.param_count())))
        self.status_kv.setText(self.tr("KV {0} per token").format(fmt_bytes(cfg.kv_bytes_per_token(dtype))))

    def _update_shown_run_mark(self, info: RunInfo) -> None:
        replay = info is not self._own_info
        differs = self.state is RunState.IDLE and self.env is not None and not (
            info.model_name == self.current_model() and self._form_matches(info))
        if replay:
            text = self.tr("replay: {0}").format(info.model_name)
            tip = self.tr("The panels show a saved run of {0} ({1}, {2}); Run starts a new one from the form.")
        elif differs:
            text = self.tr("last run: {0}").format(info.model_name)
            tip = self.tr("The panels show the last run, of {0} ({1}, {2}); the form now asks for another "
                          "model, device or dtype: Run to see it.")
        else:
            self.shown_run_label.hide()
            return
        self.shown_run_label.setText(text)
        self.shown_run_label.setToolTip(tip.format(info.model_name, info.device, info.dtype))
        self.shown_run_label.show()

    def _update_progress(self) -> None:
        """The busy bar while the model loads; steps done and time left while the run goes on."""
        bar = self.progress
        if self.state is RunState.IDLE:
            bar.hide()
            return
        if self.state is RunState.LOADING:
            bar.setRange(0, 0)
            bar.setFormat(self.tr("loading {0}...").format(self.current_model()))
            bar.setToolTip(self.tr("Loading the model (PyTorch reads its weights)"))
            bar.show()
            return
        info = self.history.info
        total = max(1, info.max_new_tokens)
        n = min(self.history.n_steps(), total)
        bar.setRange(0, total)
        bar.setValue(n)
        text = self.tr("{0} / {1} steps").format(n, total)
        if self.state is RunState.PAUSED:
            text = self.tr("{0}, paused").format(text)
        elif (left := self.time_left_ms()) is not None:
            text = self.tr("{0}, about {1} left").format(text, fmt_ms(left))
        bar.setFormat(text.replace("%", "%%"))
        bar.setToolTip(self.tr("Time left from this run's measured step times (and the Speed control)"))
        bar.show()

    def time_left_ms(self) -> float | None:
        """The run's remaining rounds, from its own steps' latencies (None before it has decode steps)."""
        info = self.history.info
        fits = estimate.fit_history(self.history.traces)
        if not fits or not any(t.phase == "decode" for steps in self.history.traces.values() for t in steps[-1:]):
            return None
        return estimate.run_ms(fits, len(info.prompt_ids), info.max_new_tokens, from_step=self.history.n_steps(),
                               steps_per_s=float(self.speed_spin.value()))

    def machine_flops_per_s(self) -> float:
        if self._flops_per_s is None:
            self._flops_per_s = estimate.probe_flops_per_s()
        return self._flops_per_s

    def form_estimate_ms(self) -> tuple[float, bool] | None:
        """(ms, measured) for the run the form describes: from the last run of this model, device and
        dtype where it measured every checked engine, never below what the config's arithmetic needs
        at this machine's measured matrix rate. None when the model's config is not read yet."""
        choice = self.models.get(self.current_model())
        engines = self.checked_engines()
        if choice is None or choice.config is None or not engines:
            return None
        cfg = choice.config
        # The byte tokenizer: a token per UTF-8 byte; another tokenizer makes no more tokens than bytes.
        prompt_len = max(1, len(self.prompt_edit.toPlainText().encode("utf-8")))
        n_new = self.tokens_spin.value()
        speed = float(self.speed_spin.value())
        from_config = estimate.config_fits(cfg, engines, self.machine_flops_per_s())
        measured = self._fits.get((self.current_model(), self.current_device(), self._form_dtype()), {})
        fits = {e: measured.get(e, from_config[e]) for e in engines}
        ms = max(estimate.run_ms(fits, prompt_len, n_new, steps_per_s=speed),
                 estimate.run_ms(from_config, prompt_len, n_new, steps_per_s=speed))
        return ms, all(e in measured for e in engines)

    def _update_estimate(self) -> None:
        """Under the Run button, before a run that will take more than SLOW_RUN_S: about how long."""
        found = self.form_estimate_ms() if self.state is RunState.IDLE and not self._form_problem() else None
        if found is None or found[0] < SLOW_RUN_S * 1000:
            self.estimate_label.hide()
            return
        ms, measured = found
        speed = self.speed_spin.value()
        paced = speed > 0 and self.tokens_spin.value() * 1000.0 / speed >= 0.9 * ms
        if paced:
            why = self.tr("at {0} steps/s (the Speed control; 0 runs as fast as possible)").format(speed)
        elif measured:
            why = self.tr("from the step times of the last run of this model here")
        else:
            why = self.tr("at least: from the model's size and this machine's measured {0:.0f} GFLOP/s").format(
                self.machine_flops_per_s() / 1e9)
        self.estimate_label.setText(self.tr("This run will take about {0} ({1}).").format(fmt_ms(ms), why))
        self.estimate_label.show()

    def _form_matches(self, info: RunInfo) -> bool:
        return info.device == self.current_device() and info.dtype == self._form_dtype()

    def current_model(self) -> str:
        return self.model_combo.currentData() or ""

    def current_device(self) -> str:
        dev = self.device_combo.currentData() or ""
        if dev == "auto" and self.env is not None:
            return self.env.auto_device
        return dev

    def _form_dtype(self) -> str:
        """The dtype a run would use: what `resolve_dtype` picks for "auto", from the config."""
        choice = self.models.get(self.current_model())
        picked = self.dtype_combo.currentData() or "auto"
        if picked != "auto":
            return canonical_dtype(picked)
        if self.current_device().startswith("cuda"):
            return "bfloat16"
        return choice.config.dtype if choice is not None and choice.config is not None else ""

    def show_memory_calculator(self) -> None:
        """The KV memory calculator (non-modal; one instance, raised when asked again)."""
        from kvviz.ui.memory_dialog import MemoryDialog

        if getattr(self, "_memory_dialog", None) is None:
            self._memory_dialog = MemoryDialog(self)
        self._memory_dialog.show()
        self._memory_dialog.raise_()
        self._memory_dialog.activateWindow()

    def shortcut_rows(self) -> list[tuple[str, str]]:
        """(what, keys) for every action with a shortcut, from the actions themselves (menus, the
        transport, exports), in the order they were made; then the mouse's gestures."""
        rows: list[tuple[str, str]] = []
        for act in self.findChildren(QAction):
            keys = list(dict.fromkeys(k.toString(QKeySequence.SequenceFormat.NativeText) for k in act.shortcuts()))
            text = act.property("shortcut_help") or act.text().replace("&&", "\0").replace("&", "").replace("\0", "&")
            text = text.strip()
            if keys and text and (text, ", ".join(keys)) not in rows:
                rows.append((text, ", ".join(keys)))
        rows.append((self.tr("Show a step"), self.tr("click a point, a row or a token in a panel")))
        rows.append((self.tr("Give a panel the whole grid, or share it again"), self.tr("double-click its title")))
        rows.append((self.tr("Resize panels"), self.tr("drag the gaps between them")))
        return rows

    def show_shortcuts(self) -> None:
        """Help > Keyboard shortcuts (F1): a table to keep open beside the window, not modal."""
        if self.shortcuts_dialog is None:
            dialog = self.shortcuts_dialog = QDialog(self)
            dialog.setWindowFlag(Qt.WindowType.WindowContextHelpButtonHint, False)
            dialog.setObjectName("shortcuts_dialog")
            table = QTableWidget(0, 2, dialog)
            table.setObjectName("shortcuts_table")
            table.verticalHeader().hide()
            table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
            table.setSelectionMode(QTableWidget.SelectionMode.NoSelection)
            table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
            table.horizontalHeader().setStretchLastSection(True)
            layout = QVBoxLayout(dialog)
            layout.addWidget(table)
            dialog.resize(460, 560)
        self._fill_shortcuts()
        self.shortcuts_dialog.show()
        self.shortcuts_dialog.raise_()

    def _fill_shortcuts(self) -> None:
        """The shortcuts table's rows and titles in the current language (again after a switch)."""
        dialog = self.shortcuts_dialog
        table = dialog.findChild(QTableWidget, "shortcuts_table")
        rows = self.shortcut_rows()
        dialog.setWindowTitle(self.tr("Keyboard shortcuts"))
        table.setHorizontalHeaderLabels([self.tr("Action"), self.tr("Keys")])
        table.setRowCount(len(rows))
        for i, (text, keys) in enumerate(rows):
            table.setItem(i, 0, QTableWidgetItem(text))
            table.setItem(i, 1, QTableWidgetItem(keys))
        table.resizeColumnToContents(0)
        table.resizeRowsToContents()

    def _show_about(self) -> None:
        from kvviz import __version__

        env = self.env
        extra = self.tr("PyTorch {0}, {1} CPU thread(s)").format(env.torch_version, env.threads) if env else ""
        QMessageBox.about(self, self.tr("About kvviz"), self.tr("kvviz {0}").format(__version__) + "\n\n" + self.tr(
            "kvviz makes a transformer's KV cache visible: type a prompt, pick engines and watch "
            "decode step by step.") + ("\n\n" + extra if extra else ""))

    # ------------------------------------------------------------------ the form
    def checked_engines(self) -> tuple[str, ...]:
        return tuple(k for k, box in self.engine_checks.items() if box.isChecked())

    def set_engines(self, engines) -> None:
        for key, box in self.engine_checks.items():
            box.setChecked(key in set(engines))

    def set_model(self, name: str) -> None:
        if self.model_combo.findData(name) < 0:
            self.add_model_path(name)
        self.model_combo.setCurrentIndex(self.model_combo.findData(name))

    def _sampling(self) -> SamplingConfig:
        if self.greedy_check.isChecked():
            return SamplingConfig(temperature=0.0, seed=self.seed_spin.value())
        top_k = self.top_k_spin.value() or None
        top_p = self.top_p_spin.value()
        return SamplingConfig(temperature=self.temperature_spin.value(), top_k=top_k,
                              top_p=None if top_p >= 1.0 else top_p, seed=self.seed_spin.value())

    def validation_text(self) -> str:
        return self.validation_label.text()

    def _validate_form(self) -> str:
        """The first reason the form cannot run, shown under the form ("" when it can)."""
        reason = self._form_problem()
        self.validation_label.setText(reason)
        self.validation_label.setVisible(bool(reason))
        self.act_run.setEnabled(not reason)
        self.run_button.setEnabled(not reason)
        self.act_step.setEnabled(not reason or self.state is not RunState.IDLE)
        return reason

    def _form_problem(self) -> str:
        if self.env is None:
            return self.tr("Starting: loading PyTorch and the model list...")
        prompt = self.prompt_edit.toPlainText()
        if not prompt.strip():
            return self.tr("Type a prompt.")
        choice = self.models.get(self.current_model())
        if choice is None:
            return self.tr("Choose a model.")
        if not choice.available:
            return choice.reason or self.tr("This model is not available.")
        if not self.checked_engines():
            return self.tr("Check at least one engine.")
        greedy = self.greedy_check.isChecked()
        if not greedy and self.temperature_spin.value() <= 0:
            return self.tr("Temperature must be above 0 when sampling (tick Greedy for the most likely token).")
        if not greedy and self.top_p_spin.value() <= 0:
            return self.tr("Top-p must be above 0 (1.00 keeps every token).")
        try:
            self._sampling()
        except ValueError as exc:
            return self.tr("Sampling: {0}").format(exc)
        cfg = choice.config
        if cfg is not None:
            n_new = self.tokens_spin.value()
            if cfg.tokenizer == "bytes":
                n_prompt = len(prompt.encode("utf-8"))  # the byte tokenizer: one token per UTF-8 byte
                if n_prompt + n_new > cfg.max_seq_len:
                    return self.tr("The prompt ({0} tokens) + new tokens ({1}) = {2} exceeds the model's "
                                   "context of {3}.").format(n_prompt, n_new, n_prompt + n_new, cfg.max_seq_len)
            elif n_new >= cfg.max_seq_len:
                return self.tr("New tokens ({0}) must leave room for the prompt in the model's context of "
                               "{1}.").format(n_new, cfg.max_seq_len)
            if self.layer_spin.value() >= cfg.n_layer:
                return self.tr("Attention layer must be below {0}.").format(cfg.n_layer)
            if self.head_spin.value() >= cfg.n_head:
                return self.tr("Attention head must be below {0}.").format(cfg.n_head)
        return ""

    @Slot()
    def _on_form_changed(self, *_args) -> None:
        self.temperature_spin.setEnabled(not self.greedy_check.isChecked())
        self.top_k_spin.setEnabled(not self.greedy_check.isChecked())
        self.top_p_spin.setEnabled(not self.greedy_check.isChecked())
        self._validate_form()
        self._update_status()
        self._update_estimate()

    @Slot()
    def _on_model_changed(self, *_args) -> None:
        choice = self.models.get(self.current_model())
        if choice is not None and choice.config is not None:
            cfg = choice.config
            self.layer_spin.setMaximum(cfg.n_layer - 1)
            self.head_spin.setMaximum(cfg.n_head - 1)
        else:  # a checkpoint not read yet: the worker checks the range when it loads it
            self.layer_spin.setMaximum(255)
            self.head_spin.setMaximum(255)
        self._on_form_changed()

    def open_checkpoint(self) -> None:
        path = QFileDialog.getExistingDirectory(self, self.tr("Open checkpoint folder"))
        if path:
            self.set_model(path)

    def add_model_path(self, path: str) -> None:
        """Add a model folder to the picker; the worker reads and loads it when a run starts."""
        if path not in self.models:
            self.models[path] = ModelChoice(name=path, description=self.tr("checkpoint folder"))
        if self.model_combo.findData(path) < 0:
            self._add_model_item(self.models[path])
        paths = self._saved_list("models/checkpoints")
        if path not in paths:
            self.settings.setValue("models/checkpoints", "\n".join([*paths, path]))

    @staticmethod
    def _select_combo(combo: QComboBox, wanted: str | None, fallback: str) -> None:
        index = combo.findData(wanted) if wanted else -1
        if index < 0 or not (combo.model().flags(combo.model().index(index, 0)) & Qt.ItemFlag.ItemIsEnabled):
            index = combo.findData(fallback)
        combo.setCurrentIndex(max(index, 0))

    # ------------------------------------------------------------------ settings
    def _saved_list(self, key: str) -> list[str]:
        text = self.settings.value(key, "", type=str)
        return [p for p in text.split("\n") if p]

    def _save_form(self) -> None:
        s = self.settings
        s.setValue("run/prompt", self.prompt_edit.toPlainText())
        if self.env is not None:
            s.setValue("run/model", self.current_model())
            s.setValue("run/device", self.device_combo.currentData() or "auto")
            s.setValue("run/engines", ",".join(self.checked_engines()))
        s.setValue("run/dtype", self.dtype_combo.currentData() or "auto")
        s.setValue("run/tokens", self.tokens_spin.value())
        s.setValue("run/block_size", self.block_spin.value())
        s.setValue("sampling/greedy", self.greedy_check.isChecked())
        s.setValue("sampling/temperature", self.temperature_spin.value())
        s.setValue("sampling/top_k", self.top_k_spin.value())
        s.setValue("sampling/top_p", self.top_p_spin.value())
        s.setValue("sampling/seed", self.seed_spin.value())
        s.setValue("trace/layer", self.layer_spin.value())
        s.setValue("trace/head", self.head_spin.value())
        s.setValue("transport/speed", self.speed_spin.value())

    def save_settings(self) -> None:
        self._save_form()
        s = self.settings
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        # The sizes of the checked panels' arrangement (not of a panel alone by a double-click).
        checked = "+".join(k for k, a in self.panel_actions.items() if a.isChecked())
        grid, rows = self._grid_state() if checked == self._arrangement else self._layouts.get(checked, (None, []))
        for i in range(2):
            s.remove(f"window/row{i}")
        if grid is not None:
            s.setValue("window/grid", grid)
            s.setValue("window/grid_panels", checked)
            for i, row in enumerate(rows):
                s.setValue(f"window/row{i}", row)
        s.setValue("view/narration", self.act_narration.isChecked())
        s.setValue("view/hidden_panels", ",".join(k for k, a in self.panel_actions.items() if not a.isChecked()))
        s.sync()

    def _restore_settings(self) -> None:
        s = self.settings
        self.prompt_edit.setPlainText(s.value("run/prompt", DEFAULT_PROMPT, type=str))
        for key in ("model", "device", "engines"):
            if s.contains(f"run/{key}"):
                self._wanted[key] = s.value(f"run/{key}", "", type=str)
        index = self.dtype_combo.findData(s.value("run/dtype", "auto", type=str))
        self.dtype_combo.setCurrentIndex(max(index, 0))
        self.tokens_spin.setValue(s.value("run/tokens", self.tokens_spin.value(), type=int))
        self.block_spin.setValue(s.value("run/block_size", self.block_spin.value(), type=int))
        self.greedy_check.setChecked(s.value("sampling/greedy", True, type=bool))
        self.temperature_spin.setValue(s.value("sampling/temperature", self.temperature_spin.value(), type=float))
        self.top_k_spin.setValue(s.value("sampling/top_k", 0, type=int))
        self.top_p_spin.setValue(s.value("sampling/top_p", 1.0, type=float))
        self.seed_spin.setValue(s.value("sampling/seed", 0, type=int))
        self.layer_spin.setMaximum(255)
        self.head_spin.setMaximum(255)
        self.layer_spin.setValue(s.value("trace/layer", 0, type=int))
        self.head_spin.setValue(s.value("trace/head", 0, type=int))
        self.speed_spin.setValue(s.value("transport/speed", self.speed_spin.value(), type=int))
        self.act_narration.setChecked(s.value("view/narration", True, type=bool))
        self.narration.setVisible(self.act_narration.isChecked())
        self._default_state = self.saveState()
        if s.contains("window/geometry"):
            self.restoreGeometry(s.value("window/geometry"))
        else:
            self.resize(1500, 920)
        if s.contains("window/state"):
            self.restoreState(s.value("window/state"))

    @staticmethod
    def _set_action_tip(act: QAction) -> None:
        """The action's tooltip (the "tip" property retranslate_ui set) with its keys, as they are now."""
        keys = ", ".join(k.toString(QKeySequence.SequenceFormat.NativeText) for k in act.shortcuts())
        tip = act.property("tip") or act.text()
        act.setToolTip(f"{tip} ({keys})" if keys else tip)

    def _give_escape_to_presentation(self, presenting: bool) -> None:
        """In presentation mode Esc leaves it, as it leaves full screen everywhere else (a teacher's
        Esc had stopped the run instead); Stop keeps its button and menu item. Esc is Stop's again after."""
        escape = QKeySequence(Qt.Key.Key_Escape)
        stop = [k for k in self.act_stop.shortcuts() if k != escape]
        present = [k for k in self.act_present.shortcuts() if k != escape]
        self.act_stop.setShortcuts(stop if presenting else [escape, *stop])
        self.act_present.setShortcuts([*present, escape] if presenting else present)
        for act in (self.act_stop, self.act_present):
            self._set_action_tip(act)

    def set_presentation(self, on: bool, *, full_screen: bool = True) -> None:
        """Presentation mode (F11): the panels get the screen. Full screen, the Inputs dock and the
        status bar hidden; the menus, the transport and the timeline stay, so a run can be started,
        paused and scrubbed. Leaving it puts back what was shown before and the window's own state."""
        with _blocked(self.act_present):
            self.act_present.setChecked(on)
        if on == (self._presenting is not None):
            return
        if on:
            self._presenting = (self.saveState(), self.windowState(), full_screen)
            self.form_dock.hide()
            self.statusBar().hide()
            self.setFocus()  # not a box of the form's neighbours: Space, arrows and F11 reach the window
            if full_screen:
                self.setWindowState(self.windowState() | Qt.WindowState.WindowFullScreen)
        else:
            state, window_state, was_full = self._presenting
            self._presenting = None
            if was_full:
                self.setWindowState(window_state)
            self.restoreState(state)
            self.statusBar().show()
        self._give_escape_to_presentation(on)

    def choose_zoom(self, percent: int) -> None:
        """View > Zoom: saved, and applied from the next start (Qt's scale factor is fixed at launch)."""
        self.settings.setValue(ZOOM_KEY, percent)
        for act in self.zoom_group.actions():
            with _blocked(act):
                act.setChecked(act.data() == percent)
        now = zoom_in_effect()
        if percent == now:
            return
        self.zoom_note = note = QMessageBox(QMessageBox.Icon.Information, self.tr("Zoom"), self.tr(
            "kvviz opens at {percent}% from its next start (now {now}%): text, plots and controls all "
            "scale, as on a projector.").format(percent=percent, now=now), QMessageBox.StandardButton.NoButton,
            self)
        if self.restart_argv:
            restart = note.addButton(self.tr("Restart now"), QMessageBox.ButtonRole.AcceptRole)
            restart.setToolTip(self.tr("Close kvviz and open it again at the new zoom (the steps shown are not kept)"))
            restart.clicked.connect(self.restart)
        note.addButton(self.tr("Later") if self.restart_argv else self.tr("OK"), QMessageBox.ButtonRole.RejectRole)
        note.open()  # not modal to the app: the run goes on

    def restart(self) -> bool:
        """Open kvviz again with the command line that started it, then close this window (its
        settings saved, its worker stopped). False, and nothing closed, if it cannot be started."""
        if not self.restart_argv:
            return False
        program, *args = self.restart_argv
        self.save_settings()  # the new process reads them
        if not QProcess.startDetached(program, args):
            self.show_error(self.tr("Could not start kvviz again: {command}").format(
                command=" ".join(self.restart_argv)))
            return False
        self.close()
        return True

    def presenting(self) -> bool:
        return self._presenting is not None

    def _reset_layout(self) -> None:
        self.set_presentation(False)
        self.restoreState(self._default_state)
        self.form_dock.show()
        self.toolbar.show()
        self._layouts.clear()
        self._focused = ""
        for act in self.panel_actions.values():
            with _blocked(act):
                act.setChecked(True)
        self._arrangement = None  # forgotten: laid out afresh, in equal rows and columns
        self._arrange()

    # ------------------------------------------------------------------ closing
    def closeEvent(self, event: QCloseEvent) -> None:
        app = QCoreApplication.instance()
        if app is not None:
            app.removeEventFilter(self)
        self.set_presentation(False)  # what is saved is the window as it was before presenting
        self.save_settings()
        self._repaint_timer.stop()
        self.shutdown_worker()
        gc.unfreeze()  # what the window held may be collected again (see _warm_up_one)
        super().closeEvent(event)


class _blocked:
    """`with _blocked(widget):` silences its signals for a programmatic change."""

    def __init__(self, obj: QObject) -> None:
        self.obj = obj

    def __enter__(self) -> QObject:
        self._old = self.obj.blockSignals(True)
        return self.obj

    def __exit__(self, *exc) -> None:
        self.obj.blockSignals(self._old)
