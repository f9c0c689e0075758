"""The compare window's File > Export on the shell's (kvviz.ui.shell.exports: the actions, the save and open
dialogs, the reports): its own image dialog (the window or a panel, PNG, SVG or the clipboard), its animation
of chosen panels over chosen steps, the trace's data and page as the shell's kinds, File > Open trace, and the
functions behind them, which the headless `kvviz export` shares.

It works through the window's public surface (history, panels, frames, select_step, show_error,
statusBar, settings, the run signals), renders with kvviz.ui.exporters and reads and writes traces
with kvviz.records.traceio. No torch, no engines: a saved run replays without any model.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt
from PySide6.QtGui import QImage, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QMenu,
    QProgressDialog,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from kvviz.records import traceio
from kvviz.ui import exporters
from kvviz.ui.exporters import Cancelled
from kvviz.ui.shell.exports import (
    ExportKind,
    ShellExports,
    report_error,
)

WINDOW = "window"  # the export target meaning the whole window, beside the panel keys
IMAGE_FORMATS = ("png", "svg", "clipboard")
DATA_KINDS: dict[str, tuple[str, Callable]] = {  # kind -> (the save dialog's proposed name, traceio writer)
    "json": ("kvviz-trace.json", lambda path, h: traceio.save_run(path, h.info, h.traces)),
    "steps_csv": ("kvviz-steps.csv", lambda path, h: traceio.save_steps_csv(path, h.traces)),
    "summary_csv": ("kvviz-summary.csv", lambda path, h: traceio.save_summary_csv(path, h.traces, h.info)),
    "summary_md": ("kvviz-summary.md", lambda path, h: traceio.save_summary_markdown(path, h.traces, h.info)),
}

Progress = Callable[[int, int], bool]  # (frames done, total) -> False to cancel


def _tr(text: str) -> str:
    return QCoreApplication.translate("ExportActions", text)


# -- what can be exported ---------------------------------------------------------------------------------
def target_keys(window: QMainWindow, visible_only: bool = False) -> list[str]:
    """WINDOW, then the panel keys in the window's order (only those shown, if asked: in the grid or
    behind a tab, which an export brings forward)."""
    shown = set(window.grid.shown_panels())
    keys = [k for k, f in window.grid.frames.items() if not visible_only or f.isVisibleTo(window) or k in shown]
    return [WINDOW, *keys]


def target_title(window: QMainWindow, key: str) -> str:
    return _tr("Whole window") if key == WINDOW else window.grid.frames[key].panel.title()


def target_widget(window: QMainWindow, key: str) -> QWidget:
    if key == WINDOW:
        return window
    frame = window.grid.frames.get(key)
    if frame is None:
        raise ValueError(_tr("unknown panel {0!r}; choose from {1}").format(key, ", ".join(target_keys(window))))
    grid = window.grid
    tabs = getattr(grid, "tabs", None)
    if not frame.isVisibleTo(window) and tabs is not None and key in grid.shown_panels():
        # Behind a tab (no room in the grid at this size and zoom), or in the grid while a tab is shown:
        # its own tab, else the grid's, brought forward to draw it.
        want = key if key in getattr(grid, "moved", ()) else ""
        tabs.setCurrentIndex(next((i for i in range(tabs.count()) if (tabs.tabData(i) or "") == want), -1))
    if not frame.isVisibleTo(window):
        raise ValueError(_tr("the panel {0!r} is hidden: show it (View menu) to export it").format(key))
    return frame


def check_has_steps(window: QMainWindow) -> int:
    n = window.history.n_steps()
    if n == 0:
        raise ValueError(_tr("nothing to export yet: run the engines or open a saved trace first"))
    return n


def settle() -> None:
    """Apply pending layout requests (a longer label, a resized plot), so a render shows what was just
    set. Only those: processing every event would also paint the window on screen, twice the work."""
    for _ in range(3):  # a layout change can post another for the parent
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)


def draw_step(window: QMainWindow, step: int, keys: list[str]) -> int:
    """Select `step` and draw, now rather than at the next repaint tick, the panels `keys` show."""
    window.select_step(step)
    step = window.selected_step
    panel_keys = list(window.grid.panels) if WINDOW in keys else [k for k in keys if k in window.grid.panels]
    for key in panel_keys:
        try:
            window.grid.panels[key].show_step(window.history, step)
        except Exception as exc:  # a broken panel is reported on its frame, as the window does
            frame = window.grid.frames.get(key)
            if frame is not None and not frame.error:
                frame.show_error(f"{type(exc).__name__}: {exc}")
    settle()
    return step


def step_caption(window: QMainWindow, step: int) -> str:
    phase = ""
    for engine in window.history.engines:
        trace = window.history.at(engine, step)
        if trace is not None:
            phase = _tr("prefill") if trace.phase == "prefill" else _tr("decode")
            break
    return _tr("step {0} of {1} · {2}").format(step, window.history.n_steps() - 1, phase)


def render_view(window: QMainWindow, keys: list[str], scale: float = 1.0, caption: str = "") -> QImage:
    """One image of the targets: the only one as it is, several side by side, captioned if asked."""
    if not keys:
        raise ValueError(_tr("choose at least one panel (or the whole window)"))
    images = [exporters.render_widget(target_widget(window, k), scale) for k in keys]
    if len(images) == 1 and not caption:
        return images[0]
    return exporters.tile(images, caption)


# -- exports ----------------------------------------------------------------------------------------------
def export_image(window: QMainWindow, key: str, fmt: str, path: str | Path | None = None, scale: float = 1.0,
                 step: int | None = None) -> QImage | Path:
    """The window or one panel at `step` (default: the selected step) as PNG (at `scale`), SVG, or to the
    clipboard (returns the image). The selected step is restored afterwards."""
    if fmt not in IMAGE_FORMATS:
        raise ValueError(_tr("image format must be one of {0}").format(", ".join(IMAGE_FORMATS)))
    widget = target_widget(window, key)
    if fmt != "clipboard":
        if path is None:
            raise ValueError(_tr("no file name given"))
        exporters.check_target(path)
    exporters.check_scale(scale)
    before = window.selected_step
    try:
        if window.history.n_steps():
            draw_step(window, before if step is None else step, [key])
        if fmt == "svg":
            return exporters.save_svg(widget, path)
        image = exporters.render_widget(widget, scale)
        if fmt == "clipboard":
            exporters.copy_image(image)
            return image
        return exporters.save_png(image, path)
    finally:
        if step is not None and window.selected_step != before:
            window.select_step(before)


def export_data(window: QMainWindow, kind: str, path: str | Path) -> Path:
    """The run's traces (JSON, everything; CSV, one row per engine and step) or its summary (CSV,
    Markdown), via kvviz.records.traceio's atomic writers."""
    if kind not in DATA_KINDS:
        raise ValueError(_tr("data export must be one of {0}").format(", ".join(DATA_KINDS)))
    check_has_steps(window)
    return DATA_KINDS[kind][1](path, window.history)


def step_range(window: QMainWindow, first: int | None, last: int | None) -> range:
    n = check_has_steps(window)
    first = 0 if first is None else first
    last = n - 1 if last is None else last
    if not (0 <= first <= last <= n - 1):
        raise ValueError(_tr("the steps must satisfy 0 <= from <= to <= {0}, got {1}..{2}").format(n - 1, first, last))
    return range(first, last + 1)


def animation_frames(window: QMainWindow, keys: list[str], steps: range, scale: float = 1.0,
                     progress: Progress | None = None) -> Iterator[np.ndarray]:
    """One (H, W, 3) frame per step, drawn offscreen by selecting the step and rendering the targets.
    Panels alone get a caption with the step (the whole window shows it in its timeline)."""
    for i, step in enumerate(steps):
        if progress is not None and not progress(i, len(steps)):
            raise Cancelled()
        draw_step(window, step, keys)
        caption = "" if keys == [WINDOW] else step_caption(window, step)
        yield exporters.image_array(render_view(window, keys, scale, caption))
    if progress is not None:
        progress(len(steps), len(steps))


def export_animation(window: QMainWindow, keys: list[str], path: str | Path, fps: float = 4.0,
                     first: int | None = None, last: int | None = None, scale: float = 1.0,
                     fmt: str | None = None, progress: Progress | None = None) -> int:
    """GIF or MP4 of steps first..last (default: all), one frame per step, of the targets side by side.
    A running run is paused meanwhile; the selected step is restored. Returns the frame count."""
    fmt = exporters.animation_format(path, fmt)
    exporters.check_fps(fps, fmt)
    exporters.check_scale(scale)
    steps = step_range(window, first, last)
    for key in keys or [None]:
        if key is None:
            raise ValueError(_tr("choose at least one panel (or the whole window)"))
        target_widget(window, key)
    exporters.check_target(path)
    was_running = getattr(window, "state", None) is not None and window.state.value == "running"
    before = window.selected_step
    if was_running:
        window.set_paused(True)
    try:
        return exporters.write_animation(path, animation_frames(window, keys, steps, scale, progress), fps, fmt)
    finally:
        window.select_step(before)
        if was_running:
            window.set_paused(False)


# -- replay -----------------------------------------------------------------------------------------------
def replay_run(window: QMainWindow, saved: traceio.SavedRun, source: str = "") -> None:
    """Show a saved run in the window, as if it had just finished: no model, no worker. A run in
    progress is stopped first and the replay shown once it has ended."""
    run_ids = {t.run_id for steps in saved.traces.values() for t in steps}
    if not run_ids:
        raise ValueError(_tr("the trace holds no steps"))
    if len(run_ids) > 1:
        raise ValueError(_tr("the trace mixes steps of {0} runs").format(len(run_ids)))
    info = dataclasses.replace(saved.info, run_id=run_ids.pop(), engines=tuple(saved.traces))
    if window.state.value != "idle":
        # (a lambda, not a nested def: lupdate's Python parser loses the class contexts after one)
        window.run_finished.connect(lambda _run_id: replay_run(window, saved, source),
                                    Qt.ConnectionType.SingleShotConnection)
        window.stop_run()
        return
    history = window.history
    history.reset(info)
    for steps in saved.traces.values():
        for trace in steps:
            history.add(trace)
    for panel in window.grid.panels.values():
        panel.clear()
    window.grid.forget_run()  # every panel drawn afresh from the replay, an error mark dropped
    if "quality" in window.grid.start_panels(history):  # the trace has quality figures: shown
        window.grid.show_unless_chosen("quality")
    window.form.show_run(info)  # its settings, read-only while it is shown
    window.window_cost.reset()  # the last run's "window 0.23 core" is not this replay's
    window.status_fields.show_cost(window.window_cost)
    window.clear_error()
    n = history.n_steps()
    draw_step(window, n - 1, [WINDOW])
    window.statusBar().showMessage(_tr("Replaying {0}: {1} steps of {2}").format(
        Path(source).name or _tr("a saved run"), n, ", ".join(info.engines)), 15_000)


def open_trace(window: QMainWindow, path: str | Path) -> traceio.SavedRun:
    """Load a saved run (ValueError, one line, for anything wrong with the file) and replay it."""
    saved = traceio.load_run(path)
    replay_run(window, saved, str(path))
    return saved


# -- dialogs ----------------------------------------------------------------------------------------------
class ImageExportDialog(QDialog):
    """What to export as an image: the whole window or a panel; PNG (with a scale), SVG or clipboard."""

    def __init__(self, window: QMainWindow, key: str = WINDOW, fmt: str = "png", scale: float = 2.0) -> None:
        super().__init__(window)
        self.setObjectName("image_export_dialog")
        self.setWindowTitle(self.tr("Export image"))
        form = QFormLayout(self)
        self.target_combo = QComboBox()
        for k in target_keys(window, visible_only=True):
            self.target_combo.addItem(target_title(window, k), k)
        self.target_combo.setCurrentIndex(max(0, self.target_combo.findData(key)))
        self.format_combo = QComboBox()
        for value, label in (("png", self.tr("PNG image")), ("svg", self.tr("SVG (vector)")),
                             ("clipboard", self.tr("Copy to the clipboard"))):
            self.format_combo.addItem(label, value)
        self.format_combo.setCurrentIndex(max(0, self.format_combo.findData(fmt)))
        self.scale_spin = QDoubleSpinBox()
        self.scale_spin.setRange(0.5, 4.0)
        self.scale_spin.setSingleStep(0.5)
        self.scale_spin.setDecimals(1)
        self.scale_spin.setSuffix("×")
        self.scale_spin.setValue(scale)
        self.scale_spin.setToolTip(self.tr("2× gives a sharp image for slides: everything is drawn again at "
                                           "twice the resolution, not enlarged"))
        self.size_label = QLabel()
        form.addRow(self.tr("Export"), self.target_combo)
        form.addRow(self.tr("As"), self.format_combo)
        form.addRow(self.tr("Scale"), self.scale_spin)
        form.addRow("", self.size_label)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self._window = window
        for signal in (self.target_combo.currentIndexChanged, self.format_combo.currentIndexChanged,
                       self.scale_spin.valueChanged):
            signal.connect(self._update)
        self._update()

    def values(self) -> tuple[str, str, float]:
        return self.target_combo.currentData(), self.format_combo.currentData(), self.scale_spin.value()

    def _update(self, *_args) -> None:
        key, fmt, scale = self.values()
        self.scale_spin.setEnabled(fmt != "svg")
        widget = self._window if key == WINDOW else self._window.grid.frames[key]
        if fmt == "svg":
            self.size_label.setText(self.tr("{0} × {1} (vector, any size)").format(widget.width(), widget.height()))
        else:
            self.size_label.setText(self.tr("{0} × {1} pixels").format(round(widget.width() * scale),
                                                                       round(widget.height() * scale)))


class AnimationExportDialog(QDialog):
    """Which panels (or the whole window), GIF or MP4, frames per second, the steps, the scale."""

    def __init__(self, window: QMainWindow, fps: int = 4, scale: float = 1.0) -> None:
        super().__init__(window)
        self.setObjectName("animation_export_dialog")
        self.setWindowTitle(self.tr("Export animation"))
        n = max(1, window.history.n_steps())
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(self.tr("Panels (side by side, one frame per step):")))
        self.targets = QListWidget()
        for k in target_keys(window, visible_only=True):
            item = QListWidgetItem(target_title(window, k))
            item.setData(Qt.ItemDataRole.UserRole, k)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if k == WINDOW else Qt.CheckState.Unchecked)
            self.targets.addItem(item)
        layout.addWidget(self.targets)
        form = QFormLayout()
        self.format_combo = QComboBox()
        self.format_combo.addItem(self.tr("GIF (plays anywhere, larger)"), "gif")
        self.format_combo.addItem(self.tr("MP4 (H.264, small, for slides and video players)"), "mp4")
        try:
            exporters.ffmpeg_exe()
        except ValueError as exc:
            self.format_combo.model().item(1).setEnabled(False)
            self.format_combo.setItemData(1, str(exc), Qt.ItemDataRole.ToolTipRole)
        self.fps_spin = QSpinBox()
        self.fps_spin.setRange(1, exporters.MAX_GIF_FPS)
        self.fps_spin.setValue(fps)
        self.fps_spin.setSuffix(self.tr(" frames/s"))
        self.first_spin = QSpinBox()
        self.last_spin = QSpinBox()
        for spin in (self.first_spin, self.last_spin):
            spin.setRange(0, n - 1)
        self.last_spin.setValue(n - 1)
        self.scale_spin = QDoubleSpinBox()
        self.scale_spin.setRange(0.5, 3.0)
        self.scale_spin.setSingleStep(0.5)
        self.scale_spin.setDecimals(1)
        self.scale_spin.setSuffix("×")
        self.scale_spin.setValue(scale)
        self.info_label = QLabel()
        form.addRow(self.tr("Format"), self.format_combo)
        form.addRow(self.tr("Speed"), self.fps_spin)
        form.addRow(self.tr("From step"), self.first_spin)
        form.addRow(self.tr("To step"), self.last_spin)
        form.addRow(self.tr("Scale"), self.scale_spin)
        form.addRow("", self.info_label)
        layout.addLayout(form)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self.targets.itemChanged.connect(self._update)
        for spin in (self.fps_spin, self.first_spin, self.last_spin):
            spin.valueChanged.connect(self._update)
        self._update()

    def chosen(self) -> list[str]:
        items = (self.targets.item(i) for i in range(self.targets.count()))
        return [it.data(Qt.ItemDataRole.UserRole) for it in items if it.checkState() == Qt.CheckState.Checked]

    def values(self) -> dict:
        return dict(keys=self.chosen(), fmt=self.format_combo.currentData(), fps=self.fps_spin.value(),
                    first=self.first_spin.value(), last=self.last_spin.value(), scale=self.scale_spin.value())

    def _update(self, *_args) -> None:
        v = self.values()
        frames = v["last"] - v["first"] + 1
        ok = bool(v["keys"]) and frames > 0
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(ok)
        if not v["keys"]:
            self.info_label.setText(self.tr("Tick at least one panel."))
        elif frames <= 0:
            self.info_label.setText(self.tr("'From step' must not be after 'To step'."))
        else:
            self.info_label.setText(self.tr("{0} frames, {1:.1f} s at this speed").format(frames, frames / v["fps"]))


# -- the actions ------------------------------------------------------------------------------------------
class ExportActions(ShellExports):
    """The shell's exports with the compare window's own: the trace's data and its page as the shell's kinds
    (checked, asked for, written and reported on its one path), the image dialog, the clipboard, the animation
    dialog, File > Open trace and the toolbar's Export button. Success is said in the status bar, a failure
    in the error strip and the status bar."""

    SAVED_MS = 15_000

    def __init__(self, window: QMainWindow) -> None:
        from kvviz.ui.page_action import PageAction  # Interactive page... (kvviz.page)

        def has_steps() -> None:
            check_has_steps(window)

        kinds = {kind: ExportKind("", name, lambda path, k=kind: export_data(window, k, path), has_steps)
                 for kind, (name, _write) in DATA_KINDS.items()}
        kinds["page"] = ExportKind("", "kvviz-run.html", lambda path: self.page_action.write(path), has_steps)
        # (no texts for the shell: retranslate, words and the reports below say this window's words)
        super().__init__(window, kinds, dict, lambda: draw_step(window, window.selected_step, [WINDOW]))
        self.setObjectName("export_actions")
        self.settings = window.settings
        self.act_image = self.action(lambda: self.image_dialog(), "Ctrl+E")
        self.act_copy = self.action(lambda: self.copy_window(), "Ctrl+Shift+C")
        self.act_animation = self.action(lambda: self.animation_dialog(), "Ctrl+Shift+E")
        self.act_data = {kind: self.actions[kind] for kind in DATA_KINDS}
        self.act_open_trace = self.action(lambda: self.open_trace_dialog(), "Ctrl+Shift+O")

        menu: QMenu = getattr(window, "export_menu", None) or window.menuBar().addMenu("")
        self.menu = menu
        menu.addAction(self.act_image)
        menu.addAction(self.act_copy)
        menu.addSeparator()
        for act in self.act_data.values():
            menu.addAction(act)
        menu.addSeparator()
        menu.addAction(self.actions["page"])
        menu.addAction(self.act_animation)
        menu.menuAction().setEnabled(True)
        self.page_action = PageAction(self)
        file_menu = getattr(window, "file_menu", None)
        if file_menu is not None:
            file_menu.insertAction(menu.menuAction(), self.act_open_trace)
        toolbar = getattr(window, "toolbar", None)
        self.button = QToolButton()
        self.button.setObjectName("export_button")
        self.button.setDefaultAction(self.act_image)
        self.button.setMenu(menu)
        self.button.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        if toolbar is not None:
            toolbar.addSeparator()
            toolbar.addWidget(self.button)
        window.installEventFilter(self)
        self.retranslate()

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if obj is self.window and event.type() == QEvent.Type.LanguageChange:
            self.retranslate()
        return False

    def retranslate(self) -> None:
        texts = {
            self.act_image: (self.tr("&Image..."), self.tr("Export the window or one panel as PNG or SVG")),
            self.act_copy: (self.tr("&Copy window image"), self.tr("Copy the whole window to the clipboard")),
            self.act_animation: (self.tr("&Animation (GIF/MP4)..."),
                                 self.tr("One frame per step of the chosen panels, as GIF or MP4")),
            self.act_data["json"]: (self.tr("Trace as &JSON..."),
                                    self.tr("Every step of every engine, masks and weights included; "
                                            "File > Open trace replays it")),
            self.act_data["steps_csv"]: (self.tr("Steps as CS&V..."),
                                         self.tr("One row per engine and step, scalar fields")),
            self.act_data["summary_csv"]: (self.tr("Summary as &CSV..."), self.tr("The summary table")),
            self.act_data["summary_md"]: (self.tr("Summary as &Markdown..."),
                                          self.tr("The summary table, ready for notes and slides")),
            self.act_open_trace: (self.tr("Open &trace..."), self.tr("Replay a saved run (JSON) without a model")),
        }
        for act, (text, tip) in texts.items():
            act.setText(text)
            keys = act.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
            act.setToolTip(f"{tip} ({keys})" if keys else tip)
        self.page_action.retranslate()
        self.button.setText(self.tr("Export"))
        self.button.setToolTip(self.act_image.toolTip())
        if not getattr(self.window, "export_menu", None):
            self.menu.setTitle(self.tr("&Export"))

    # -- the shell's dialog and reports, in this window's words
    def words(self, kind: str) -> tuple[str, str, str]:
        """A kind's save dialog title, its file filter and the name its failure is told by."""
        if kind == "page":
            return self.page_action.words()
        filters = {".json": self.tr("kvviz traces (*.json)"), ".csv": self.tr("CSV files (*.csv)"),
                   ".md": self.tr("Markdown files (*.md)")}
        return self.tr("Export data"), filters[Path(DATA_KINDS[kind][0]).suffix], self.tr("Data export")

    def report_saved(self, kind: str, path: Path) -> None:
        self.saved(path, self.tr("{0} bytes").format(f"{path.stat().st_size:,}"))

    def report_failed(self, kind: str, exc: ValueError) -> None:
        self.failed(self.words(kind)[2], exc)

    def saved(self, path: Path, detail: str = "") -> None:
        self.window.statusBar().showMessage(
            self.tr("Saved {0}").format(path) + (f" ({detail})" if detail else ""), self.SAVED_MS)

    def failed(self, what: str, exc: Exception) -> None:
        report_error(self.window, self.tr("{0} failed: {1}").format(what, exc))

    def _saved_number(self, key: str, default: float, low: float, high: float, *, integer: bool = True) -> float:
        """A saved dialog value through the settings' one reader: a bad one said in one line naming the file and
        the key, and the dialog opens at its default."""
        from kvviz.ui.settings_file import SettingsReader, show_problems

        reader = SettingsReader(self.settings)
        value = reader.number(key, default, low, high, integer=integer)
        show_problems(self.window, reader.problems)
        return value

    # -- images
    def image_dialog(self) -> None:
        dialog = ImageExportDialog(self.window, scale=self._saved_number("export/scale", 2.0, 0.5, 4.0,
                                                                         integer=False))
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return
        key, fmt, scale = dialog.values()
        self.settings.setValue("export/scale", scale)
        path = None
        if fmt != "clipboard":
            step = self.window.selected_step
            name = f"kvviz-{key}-step{step}.{fmt}"
            flt = self.tr("PNG images (*.png)") if fmt == "png" else self.tr("SVG images (*.svg)")
            path = self.ask_save_path(self.tr("Export image"), name, flt)
            if not path:
                return
        self.export_image(key, fmt, path, scale)

    def export_image(self, key: str, fmt: str, path: str | None, scale: float = 1.0) -> QImage | Path | None:
        try:
            result = export_image(self.window, key, fmt, path, scale)
        except ValueError as exc:
            self.failed(self.tr("Image export"), exc)
            return None
        if fmt == "clipboard":
            self.window.statusBar().showMessage(self.tr("Copied {0} × {1} pixels to the clipboard").format(
                result.width(), result.height()), 10_000)
        else:
            self.saved(result)
        return result

    def copy_window(self) -> None:
        self.export_image(WINDOW, "clipboard", None, 1.0)

    # -- animations
    def animation_dialog(self) -> None:
        if not self.window.history.n_steps():
            self.failed(self.tr("Animation export"), ValueError(_tr(
                "nothing to export yet: run the engines or open a saved trace first")))
            return
        dialog = AnimationExportDialog(self.window, fps=int(self._saved_number("export/fps", 4, 1,
                                                                                   exporters.MAX_GIF_FPS)))
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return
        v = dialog.values()
        self.settings.setValue("export/fps", v["fps"])
        flt = self.tr("GIF animations (*.gif)") if v["fmt"] == "gif" else self.tr("MP4 videos (*.mp4)")
        path = self.ask_save_path(self.tr("Export animation"), f"kvviz-decode.{v['fmt']}", flt)
        if path:
            self.export_animation(path=path, **v)

    def export_animation(self, keys: list[str], path: str, fmt: str | None = None, fps: float = 4.0,
                         first: int | None = None, last: int | None = None, scale: float = 1.0) -> int:
        """With a progress dialog (Cancel removes the partial file). Returns the frames written (0 if none)."""
        total = len(range(first or 0, (self.window.history.n_steps() - 1 if last is None else last) + 1))
        dialog = QProgressDialog(self.tr("Rendering one frame per step..."), self.tr("Cancel"), 0, max(total, 1),
                                 self.window)
        dialog.setObjectName("animation_progress")
        dialog.setWindowTitle(self.tr("Export animation"))
        dialog.setWindowModality(Qt.WindowModality.WindowModal)
        dialog.setMinimumDuration(0)
        dialog.setAutoClose(False)
        dialog.setAutoReset(False)

        def progress(done: int, n: int) -> bool:
            dialog.setValue(done)
            if done >= n:
                dialog.setLabelText(self.tr("Encoding..."))
            QApplication.processEvents()
            return not dialog.wasCanceled()

        t0 = time.perf_counter()
        try:
            frames = export_animation(self.window, keys, path, fps, first, last, scale, fmt, progress)
        except Cancelled:
            self.window.statusBar().showMessage(self.tr("Animation cancelled; nothing was saved."), 10_000)
            return 0
        except ValueError as exc:
            self.failed(self.tr("Animation export"), exc)
            return 0
        finally:
            dialog.close()
            dialog.deleteLater()
        self.saved(Path(path), self.tr("{0} frames in {1:.1f} s").format(frames, time.perf_counter() - t0))
        return frames

    # -- replay
    def open_trace_dialog(self) -> None:
        path = self.ask_open_path(self.tr("Open trace"), self.tr("kvviz traces (*.json);;All files (*)"))
        if path:
            self.open_trace(path)

    def open_trace(self, path: str) -> bool:
        try:
            open_trace(self.window, path)
        except ValueError as exc:
            report_error(self.window, self.tr("Could not open the trace: {0}").format(exc))
            return False
        return True


def install_export_actions(window: QMainWindow) -> ExportActions:
    """File > Open trace, File > Export (image, clipboard, data, animation), an Export toolbar button and
    the shortcuts Ctrl+E, Ctrl+Shift+C, Ctrl+Shift+E, Ctrl+Shift+O on `window`. Installing twice
    returns the first installation."""
    existing = window.findChild(ExportActions, "export_actions")
    return existing if existing is not None else ExportActions(window)
