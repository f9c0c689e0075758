"""The panel grid: every registered panel in a frame with its title, laid out in rows of splitters;
which panels are shown (View's toggles, one panel alone), the sizes the user dragged each arrangement
to, and the drawing of the shown panels at one step of a RunHistory.

It knows panels, frames and splitters; not the run form, the transport or the worker. The window
puts its actions in menus and tells it which step to draw.
"""
from __future__ import annotations

import importlib
import math
import time
import traceback

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from kvviz.ui.history import RunHistory
from kvviz.ui.panels import PANELS
from kvviz.ui.panels.base import Panel
from kvviz.ui.qtutil import blocked

PANEL_MIN_SIZE = (140, 110)
# Hidden until wanted: the quality panel shows nothing but zeros for exact caches, and a ninth panel
# made the grid five columns wide (too narrow at 1280x720). A run with an approximate cache shows it.
DEFAULT_HIDDEN = ("quality",)


class PanelFrame(QFrame):
    """A panel with its title above it; the panel's help is the tooltip of both. Double-clicking the
    title asks the grid to give this panel the whole grid (and back)."""

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


class PanelGrid(QSplitter):
    """Rows of panels (a vertical splitter of horizontal ones). `install()` builds the panels (once, after
    the window's first paint); `draw()` brings the shown ones to a step."""

    step_picked = Signal(int)  # a click in a panel picked a step (the timeline's job to show it)
    installed = Signal()

    def __init__(self, settings: QSettings, parent: QWidget | None = None) -> None:
        super().__init__(Qt.Orientation.Vertical, parent)
        self.setObjectName("panel_grid")
        self.setChildrenCollapsible(False)
        self.settings = settings
        self.panels: dict[str, Panel] = {}
        self.frames: dict[str, PanelFrame] = {}
        self.panel_load_errors: list[str] = []
        self.panel_actions: dict[str, QAction] = {}  # View's toggle per panel
        self.alone_actions: dict[str, QAction] = {}  # Ctrl+1..9: one panel alone
        self.act_all_panels = QAction(self)  # Ctrl+0: all again
        self.act_all_panels.setShortcut(QKeySequence("Ctrl+0"))
        self.act_all_panels.triggered.connect(lambda: self.show_checked_panels())
        self.rows: list[QSplitter] = []
        self.no_panels_label = QLabel()
        self.no_panels_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.addWidget(self.no_panels_label)
        self._parking = QWidget()  # never shown: holds the panels the grid does not show
        self._parking.hide()
        self.is_installed = False
        self.chosen: set[str] = set(settings.value("view/chosen_panels", "", type=str).split(",")) - {""}
        self._focused = ""  # the panel given the whole grid by a double-click on its title
        self._arrangement: str | None = None  # the shown panels, "+"-joined, that the grid is laid out for
        self._layouts: dict[str, tuple] = {}  # arrangement -> (grid state, row states) the user left it at
        # Drawing: (history version, step) each panel last drew, panels still showing the previous run
        # (cleared when next drawn), each frame's pyqtgraph scenes, panels whose warm-up may have work left.
        self.painted: dict[str, tuple[int, int]] = {}
        self._last_draw: tuple[RunHistory, int] | None = None  # the history and step last drawn
        self.zoom = 100  # percent: the panels' plot text, lines and readable sizes (set_zoom)
        self._zoomed_items: dict[str, int] = {}  # panel -> items in its scenes when last zoomed
        self._stale: set[str] = set()
        self._scenes: dict[str, list] = {}
        self.warming: list[str] = []

    # ------------------------------------------------------------------ building
    def install(self) -> bool:
        """Build every registered panel, its View toggle and its 'alone' action, and lay the shown ones
        out (once; False if already done). The panels hidden and the sizes dragged come from settings."""
        if self.is_installed:
            return False
        self.is_installed = True
        self._load_panels()
        for i, key in enumerate(self.frames):
            self.frames[key].setParent(self._parking)
            act = QAction(self, checkable=True, checked=True)
            act.toggled.connect(lambda _checked: self.show_checked_panels())  # and leaves a panel alone
            act.triggered.connect(lambda _checked=False, k=key: self.chosen.add(k))  # the user's own choice
            self.panel_actions[key] = act
            alone = QAction(self)
            if i < 9:
                alone.setShortcut(QKeySequence(f"Ctrl+{i + 1}"))
            alone.triggered.connect(lambda _checked=False, k=key: self.show_alone(k))
            self.alone_actions[key] = alone
        s = self.settings
        hidden = set(s.value("view/hidden_panels", ",".join(DEFAULT_HIDDEN), type=str).split(","))
        for key, act in self.panel_actions.items():
            with blocked(act):
                act.setChecked(key not in hidden)
        if s.contains("window/grid"):  # the sizes the user dragged the saved arrangement to
            rows = [s.value(f"window/row{i}") for i in range(2) if s.contains(f"window/row{i}")]
            # Settings from before arrangements were kept had the sizes of every panel shown.
            saved_for = s.value("window/grid_panels", "+".join(self.frames), type=str)
            self._layouts[saved_for] = (s.value("window/grid"), rows)
        self.retranslate()
        self.arrange()
        self.painted.clear()
        self.warming = list(self.panels)
        self.installed.emit()
        return True

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
            panel.step_picked.connect(self.step_picked)  # a click in a plot, as the timeline would

    def retranslate(self) -> None:
        self._update_no_panels_text()
        for key, frame in self.frames.items():
            frame.retranslate()
            self.panel_actions[key].setText(frame.panel.title())
            self.alone_actions[key].setText(frame.panel.title())
            # Help > Keyboard shortcuts names what the key does, not only the menu item's text.
            self.alone_actions[key].setProperty("shortcut_help", self.tr("{panel} alone in the grid").format(
                panel=frame.panel.title()))
        self.act_all_panels.setText(self.tr("All panels"))
        self.act_all_panels.setProperty("shortcut_help", self.tr("All panels in the grid again"))

    # ------------------------------------------------------------------ arrangement
    def shown_panels(self) -> list[str]:
        """The panels the grid shows, in registry order: those checked in View, or the focused one alone."""
        return [k for k, act in self.panel_actions.items() if act.isChecked() and self._focused in ("", k)]

    def arrange(self) -> None:
        """Lay the shown panels out as a grid: up to three in one row, more in two rows (the first the
        longer), so panels hidden in View give the others their room. Each arrangement keeps the
        sizes the user dragged it to; a new one starts with equal rows and columns."""
        shown = self.shown_panels()
        key = "+".join(shown)
        if key == self._arrangement:
            return
        if self._arrangement is not None:
            self._layouts[self._arrangement] = self.grid_state()
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
            self.addWidget(row)
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
            self.setSizes([0 if shown else 1000] + [1000 if r < n_rows else 0 for r in range(len(self.rows))])
        else:
            self.restoreState(grid)
        for r, row in enumerate(self.rows[:n_rows]):
            if r < len(rows) and rows[r] is not None:
                row.restoreState(rows[r])
            else:
                row.setSizes([1000] * row.count())  # equal columns (scaled to the width) until the user drags
        self._update_no_panels_text()

    def grid_state(self) -> tuple:
        return self.saveState(), [row.saveState() for row in self.rows]

    def _update_no_panels_text(self) -> None:
        if not self.is_installed:
            text = self.tr("Loading the panels...")
        elif not self.frames:
            text = self.tr("No panels registered yet")
        else:
            text = self.tr("Every panel is hidden: show some in the View menu")
        self.no_panels_label.setText(text)

    def show_alone(self, key: str) -> None:
        """This panel alone in the grid (shown first if View had hidden it); Ctrl+0 shows all again."""
        self.panel_actions[key].setChecked(True)
        if self._focused != key:
            self.toggle_focus(key)

    def toggle_focus(self, key: str) -> None:
        """Show only this panel in the grid, or, if it is already alone, every checked panel again."""
        self._focused = "" if self._focused == key else key
        self.arrange()

    def show_checked_panels(self) -> None:
        """No panel alone any more: the grid shows the panels checked in View."""
        self._focused = ""
        self.arrange()

    def show_unless_chosen(self, key: str) -> bool:
        """Show a panel hidden by default (DEFAULT_HIDDEN), unless the user chose in View to hide it;
        True if it was shown now."""
        act = self.panel_actions.get(key)
        if act is None or act.isChecked() or key in self.chosen:
            return False
        act.setChecked(True)
        return True

    def reset(self) -> None:
        """The panels shown by default, none alone, equal rows and columns; the sizes dragged forgotten."""
        self._layouts.clear()
        self._focused = ""
        self.chosen.clear()
        for key, act in self.panel_actions.items():
            with blocked(act):
                act.setChecked(key not in DEFAULT_HIDDEN)
        self._arrangement = None  # forgotten: laid out afresh, in equal rows and columns
        self.arrange()

    def save(self, settings: QSettings) -> None:
        """The panels hidden in View and the sizes of the checked panels' arrangement (not of a panel
        alone by a double-click)."""
        checked = "+".join(k for k, a in self.panel_actions.items() if a.isChecked())
        grid, rows = self.grid_state() if checked == self._arrangement else self._layouts.get(checked, (None, []))
        for i in range(2):
            settings.remove(f"window/row{i}")
        if grid is not None:
            settings.setValue("window/grid", grid)
            settings.setValue("window/grid_panels", checked)
            for i, row in enumerate(rows):
                settings.setValue(f"window/row{i}", row)
        settings.setValue("view/chosen_panels", ",".join(sorted(self.chosen)))
        settings.setValue("view/hidden_panels",
                          ",".join(k for k, a in self.panel_actions.items() if not a.isChecked()))

    # ------------------------------------------------------------------ drawing
    def forget_run(self) -> None:
        """A new run starts: each panel forgets the last one when it is next drawn, not all at once
        here (eight panels cleared together repainted in one ~60 ms frame as a run's steps began)."""
        self._stale = set(self.panels)
        self.painted.clear()
        self._last_draw = None
        for frame in self.frames.values():
            if frame.error:
                frame.error = ""
                frame.retranslate()

    def clear_stale(self) -> None:
        """A run that ended before its first step: the panels forget the last one now."""
        for key in sorted(self._stale):
            self.panels[key].clear()
        self._stale.clear()

    # ------------------------------------------------------------------ zoom
    def set_zoom(self, percent: int) -> None:
        """Rescale every panel's plot text (ticks, axis names, titles, legends' swatches), line widths
        and markers to percent (View > Zoom, Ctrl+plus / minus), live: the run and the step shown stay,
        and the shown panels are drawn again at once."""
        from kvviz.ui import style  # pyqtgraph: imported with the panels

        percent = int(percent)
        if percent == self.zoom and style.ZOOM == percent / 100:
            return
        self.zoom = percent
        style.set_zoom(percent)
        if not self.is_installed:
            return  # the panels are built at this zoom
        for key, panel in self.panels.items():
            panel.apply_zoom()
            self._zoom_panel(key, force=True)
            self.frames[key].retranslate()
        self.redraw()

    def redraw(self) -> None:
        """Draw the shown panels again at the step last drawn (after a zoom, a layout change)."""
        self.painted.clear()
        if self._last_draw is not None:
            history, step = self._last_draw
            self.draw(history, step, (history.version, step))

    def _zoom_panel(self, key: str, force: bool = False) -> None:
        """The panel's plot items at the zoom: all of them when asked, else only when items were added
        since (a run's new curves and labels); nothing to do at 100% for items never zoomed."""
        from kvviz.ui import style
        from kvviz.ui.panels._plots import scenes_in, zoom_items

        if key not in self._scenes:
            self._scenes[key] = scenes_in(self.frames[key])
        count = sum(len(scene.items()) for scene in self._scenes[key])
        if force or (style.ZOOM != 1.0 and count != self._zoomed_items.get(key)):
            zoom_items(self._scenes[key])
            self._zoomed_items[key] = count

    def draw(self, history: RunHistory, step: int, target: tuple[int, int]) -> dict[str, float]:
        """Draw every shown panel not already at `target` ((history version, step)) at `step`.
        Returns {panel: seconds its show_step took}."""
        drawn: dict[str, float] = {}
        for key in self.panels:
            if self.painted.get(key) == target or self.frames[key].isHidden():
                continue
            t = time.perf_counter()
            self.draw_panel(key, history, step)
            drawn[key] = time.perf_counter() - t
            self.painted[key] = target
        return drawn

    def draw_panel(self, key: str, history: RunHistory, step: int) -> None:
        self._last_draw = (history, step)
        try:
            if key in self._stale:
                self._stale.discard(key)
                self.panels[key].clear()
            self.panels[key].show_step(history, step)
            from kvviz.ui.panels._plots import scenes_in, settle  # pyqtgraph: imported with the panels

            if key not in self._scenes:
                self._scenes[key] = scenes_in(self.frames[key])
            self._zoom_panel(key)
            settle(self._scenes[key])  # painted once per draw (see settle)
        except Exception as exc:  # one broken panel must not take the window down
            frame = self.frames[key]
            if not frame.error:
                traceback.print_exc()
                frame.show_error(f"{type(exc).__name__}: {exc}")

    def warm_up_one(self, engines: tuple[str, ...], positions: int) -> bool:
        """One piece of a panel's warm-up for these engines, on an idle tick; False once all are done."""
        while self.warming:
            key = self.warming[0]
            if self.panels[key].warm_up(engines, positions):
                return True
            self.warming.pop(0)
        return False
