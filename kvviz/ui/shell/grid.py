"""Every view's panel grid, once: its panels built from a registry of "module:Class" entries (a broken one
reported, not fatal), each in a frame with its title, laid out in rows of splitters that give way
(kvviz.ui.shell.giveway) where the room is too small, the rest behind tabs under the grid (MovedStrip), each
shown or hidden from View, a panel given the whole grid by a double-click on its title. A view only
configures it (GridSpec: its registry, usual rows, priorities); it knows panels and frames, not records."""
from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QCoreApplication, QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QSplitter,
    QTabBar,
    QVBoxLayout,
    QWidget,
)

from kvviz.ui.qtutil import blocked
from kvviz.ui.shell.giveway import HANDLE_PX, give_way, share
from kvviz.ui.shell.panel import Panel

FRAME_MIN = (230, 170)  # no panel's readable size is taken below this


def load_panels(registry, on_error: Callable[[str], None]) -> dict[str, Panel]:
    """Every registered panel that imports and builds, by key ((key, "module:Class") pairs); a panel
    without a key of its own takes its entry's. A broken one is printed and told to `on_error`."""
    panels: dict[str, Panel] = {}
    for key, spec in registry:
        module_name, _, class_name = spec.partition(":")
        try:
            panel = getattr(importlib.import_module(module_name), class_name)()
        except Exception as exc:
            traceback.print_exc()
            on_error(f"{key}: {type(exc).__name__}: {exc}")
            continue
        panel.key = panel.key or key
        panels[key] = panel
    return panels


class MovedStrip(QWidget):
    """The tabs under a grid that gave way: the grid's own, then one per panel moved behind a tab (each
    tab's data its key), and the note saying why they are there (its whole story the tooltip)."""

    def __init__(self, tabs_name: str, note_name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(2, 0, 2, 0)
        self.tabs = QTabBar()
        self.tabs.setObjectName(tabs_name)
        self.tabs.setDrawBase(False)
        self.tabs.setExpanding(False)
        self.note = QLabel()
        self.note.setObjectName(note_name)
        self.note.setWordWrap(False)
        self.note.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Preferred)  # never widens the window
        layout.addWidget(self.note)  # first: many tabs scroll, the note stays in sight
        layout.addWidget(self.tabs, 1)

    def show_moved(self, grid_name: str, moved: list[tuple[str, str]], current: str) -> None:
        """The grid's tab (`grid_name`), one per moved panel ((key, title) pairs), the one showing `current`
        ("" for the grid) selected without a signal; the strip shown only with some."""
        names = [grid_name] + [title for _key, title in moved]
        keys = [""] + [key for key, _title in moved]
        tabs = self.tabs
        with blocked(tabs):
            while tabs.count() > len(names):
                tabs.removeTab(tabs.count() - 1)
            for i, name in enumerate(names):
                if i < tabs.count():
                    tabs.setTabText(i, name)
                else:
                    tabs.addTab(name)
                tabs.setTabData(i, keys[i])
            tabs.setCurrentIndex(keys.index(current) if current in keys else 0)
        if moved:  # the strings of the main window's grid (context PanelGrid), every view's
            self.note.setText(QCoreApplication.translate(
                "PanelGrid", "{n} panels behind tabs (no room to show them readable):").format(n=len(moved)))
            self.note.setToolTip(QCoreApplication.translate(
                "PanelGrid", "The window has no room to show these panels readable at this size and zoom, so they "
                "wait behind their tabs instead of being squeezed. A larger window, a smaller zoom (View > Zoom) or "
                "fewer panels (View) brings them back into the grid."))
        if self.isHidden() == bool(moved):  # only a change: a setVisible that changes nothing still lays out again
            self.setVisible(bool(moved))


def place_frames(rows: list[QSplitter], layout: list[list[str]], frames: dict[str, QWidget], parking: QWidget) -> None:
    """A grid's frames into its rows as give_way laid them out (`layout`: keys, row by row; `rows` at least as
    many); a frame not laid out waits, hidden, on `parking`, so a row holds exactly its laid-out panels; a row
    with none is hidden."""
    laid = {k for row in layout for k in row}
    for k, frame in frames.items():
        if k not in laid:
            frame.setParent(parking)
            frame.hide()
    for r, row in enumerate(rows):
        members = layout[r] if r < len(layout) else []
        for i, k in enumerate(members):
            row.insertWidget(i, frames[k])
            frames[k].show()
        row.setVisible(bool(members))


def fits(rows: list[list[str]], needs: dict[str, tuple[int, int]], room: tuple[int, int]) -> bool:
    """Whether these rows give every panel its need in the room."""
    return (all(sum(needs[k][0] for k in row) + HANDLE_PX * (len(row) - 1) <= room[0] for row in rows)
            and sum(max(needs[k][1] for k in row) for row in rows) + HANDLE_PX * (len(rows) - 1) <= room[1])


def weighted_share(room: int, needs: list[int], weights: list[int]) -> list[int]:
    """Each cell its need and the room left shared out by weight (giveway.share where it does not fit)."""
    spare = room - sum(needs) - HANDLE_PX * (len(needs) - 1)
    if spare < 0:
        return share(room, needs)
    parts = [spare * w // sum(weights) for w in weights]
    parts[0] += spare - sum(parts)
    return [n + p for n, p in zip(needs, parts)]


class ElidedLabel(QLabel):
    """A one-line label that ends in "…" where its text does not fit (the whole text is its tooltip then),
    never cut mid-word; `full_text()` is the text set."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self._help = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt override)
        self._full = text
        self._elide()

    def full_text(self) -> str:
        return self._full

    def set_help(self, text: str) -> None:
        self._help = text
        self._elide()

    def _elide(self) -> None:
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, max(1, self.width()))
        if shown != super().text():
            super().setText(shown)
        tip = self._full + ("\n\n" + self._help if self._help else "") if shown != self._full else self._help
        if tip != self.toolTip():
            self.setToolTip(tip)

    def minimumSizeHint(self):  # noqa: N802 (Qt override)
        hint = super().minimumSizeHint()
        hint.setWidth(self.fontMetrics().horizontalAdvance("…") + 4)
        return hint

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._elide()

    def changeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._elide()


class TitledFrame(QFrame):
    """A panel with its title above; the panel's help is the tooltip of both. Double-clicking the title asks
    the grid to give this panel the whole grid (and back)."""

    focus_requested = Signal(str)

    def __init__(self, panel: Panel, name: str, frame_min: tuple[int, int] = FRAME_MIN,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.panel = panel
        self.frame_min = frame_min
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setObjectName(f"{name}_panel_{panel.key}")
        self.setMinimumSize(40, 40)  # the grid gives way (behind tabs) before a panel is squeezed
        panel.setMinimumSize(0, 0)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 4)
        layout.setSpacing(2)
        self.header = ElidedLabel(self)
        self.header.setStyleSheet("font-weight: bold;")
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.header, 1)
        for widget in getattr(panel, "header_widgets", list)():  # small controls beside the title (a log scale)
            row.addWidget(widget)
        layout.addLayout(row)
        layout.addWidget(panel, 1)
        self.error = ""  # what broke the panel's last draw, shown in its title ("": nothing)

    def retranslate(self, title: str | None = None) -> None:
        self.panel.retranslate()
        self.header.setText(title or self.panel.title())
        # Every view's frames say the same (context PanelFrame): one string, one translation.
        help_text = self.panel.help_text()
        if getattr(self.panel, "picks_steps", False):
            help_text += "\n\n" + QCoreApplication.translate(
                "PanelFrame", "Click a point, a row or a token to show its step.")
        help_text += "\n" + QCoreApplication.translate(
            "PanelFrame", "Double-click the title to give this panel the whole grid (again to go back).")
        self.header.set_help(help_text)
        self.setToolTip(help_text)

    def readable_size(self) -> tuple[int, int]:
        """The panel's readable size plus the title and the margins around it."""
        w, h = self.panel.readable_size()
        m = self.layout().contentsMargins()
        header = self.header.sizeHint().height() + self.layout().spacing()
        return (max(self.frame_min[0], w + m.left() + m.right() + 2),
                max(self.frame_min[1], h + header + m.top() + m.bottom() + 2))

    def mouseDoubleClickEvent(self, event) -> None:  # noqa: N802 (Qt override)
        self.focus_requested.emit(self.panel.key)
        super().mouseDoubleClickEvent(event)

    def show_error(self, text: str) -> None:
        """The panel's title with why its draw failed."""
        self.error = text
        self.header.setText(f"{self.panel.title()}  ⚠ {text}")


@dataclass(frozen=True)
class GridSpec:
    """What a view's grid is: `name` prefixes its widgets' object names ("<name>_grid", "<name>_panel_<key>",
    "<name>_moved_tabs"), `registry` its panels ((key, "module:Class") pairs, View's order), `rows` the rows
    it lays them out in where they read (empty: up to three in one row, more in two), `priority` which keep
    their room first (lowest first) where they do not (empty: each panel's own `priority`), `weights` how the
    room left in a row is shared (a key's parts, 1 where unnamed; empty: equally);
    `sized_by_data`: a panel's readable size follows what it drew (more requests, more schedulers), so each
    draw measures the needs again (a few ms a frame for six panels) and gives way where they changed;
    `deferred`: the panels are built by `install()` (after the window's first paint), not with the grid;
    `scrolls`: the rows scroll down where the one panel kept is taller than the room (else the rows' minimum
    is the grid's, and the window's)."""

    name: str
    registry: Sequence[tuple[str, str]]
    rows: tuple[tuple[str, ...], ...]
    priority: Mapping[str, int]
    weights: Mapping[str, int] = field(default_factory=dict)
    frame_min: tuple[int, int] = FRAME_MIN
    sized_by_data: bool = False
    deferred: bool = False
    scrolls: bool = True


class ShellGrid(QWidget):
    """A view's panels in rows that give way. `draw(history, step, *selection)` brings the laid-out panels to
    a step; `panels`, `frames`, `panel_actions` (View's check boxes) by key; `moved`: the panels behind tabs;
    `rows`: the splitters; `toggle_focus(key)`: one panel given the whole grid, or the grid back. The grid
    never scrolls sideways; it scrolls down only where the one panel kept is taller than the room."""

    layout_changed = Signal()  # panels came into the grid (or left it): draw them

    def __init__(self, spec: GridSpec, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.spec = spec
        self.setObjectName(f"{spec.name}_grid")
        self.frames: dict[str, TitledFrame] = {}
        self.panel_actions: dict[str, QAction] = {}
        self.load_errors: list[str] = []
        self.moved: list[str] = []
        self._tab = ""  # the moved panel shown alone from its tab ("": the grid)
        self._focused = ""  # the panel given the whole grid by a double-click ("": none)
        self._parking = QWidget()  # never shown: holds the frames not laid out
        self._parking.hide()
        self.body = QSplitter(Qt.Orientation.Vertical)
        self.body.setChildrenCollapsible(False)
        # give_way lays out at most two rows; a view's usual rows may be more.
        self.rows: list[QSplitter] = []
        while len(self.rows) < max(2, len(spec.rows)):
            self.add_row()
        self.scroll: QScrollArea | None = None
        if spec.scrolls:
            self.scroll = QScrollArea()
            self.scroll.setObjectName(f"{spec.name}_grid_scroll")
            self.scroll.setWidgetResizable(True)
            self.scroll.setFrameShape(QFrame.Shape.NoFrame)
            self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # never sideways
            self.scroll.setWidget(self.body)
        self.strip = MovedStrip(f"{spec.name}_moved_tabs", f"{spec.name}_moved_note")
        self.tabs, self.moved_note = self.strip.tabs, self.strip.note
        self.tabs.currentChanged.connect(self._on_tab_changed)
        self.strip.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.scroll or self.body, 1)
        layout.addWidget(self.strip)
        self._arrange_timer = QTimer(self)  # single shot: after a resize or a draw that changed a need
        self._arrange_timer.setSingleShot(True)
        self._arrange_timer.timeout.connect(self.arrange)
        self._needs: dict[str, tuple[int, int]] = {}
        self.panels: dict[str, Panel] = {}
        self.is_installed = False
        if not spec.deferred:
            self.install()

    def install(self) -> bool:
        """Build every registered panel in its frame, with its View toggle, and lay them out (once; False
        where done already)."""
        if self.is_installed:
            return False
        self.is_installed = True
        self.build_panels()
        self.arrange()
        return True

    def build_panels(self) -> None:
        """Every registered panel that builds (a broken one in `load_errors`), each in its titled frame
        waiting off the grid, with its View toggle (checked)."""
        self.panels = load_panels(self.spec.registry, self.load_errors.append)
        for key, panel in self.panels.items():
            self.frames[key] = frame = TitledFrame(panel, self.spec.name, self.spec.frame_min)
            frame.setParent(self._parking)
            frame.focus_requested.connect(self.toggle_focus)
            act = QAction(self, checkable=True, checked=True)
            act.toggled.connect(lambda _on: self.panel_toggled())
            self.panel_actions[key] = act

    def add_row(self) -> QSplitter:
        """One more row of panels, under the others."""
        row = QSplitter(Qt.Orientation.Horizontal)
        row.setChildrenCollapsible(False)
        self.body.insertWidget(self.body.indexOf(self.rows[-1]) + 1 if self.rows else self.body.count(), row)
        self.rows.append(row)
        return row

    def panel_toggled(self) -> None:
        """A panel shown or hidden in View: laid out again."""
        self.arrange()

    def retranslate(self) -> None:
        for key, frame in self.frames.items():
            frame.retranslate()
            self.panel_actions[key].setText(frame.panel.title())
        self._update_strip()

    # ------------------------------------------------------------------ giving way
    def shown_panels(self) -> list[str]:
        """The panels checked in View, in registry order."""
        return [k for k, act in self.panel_actions.items() if act.isChecked()]

    def laid_rows(self) -> list[list[str]]:
        """The panels in the grid now, row by row."""
        return [[row.widget(i).panel.key for i in range(row.count())] for row in self.rows if not row.isHidden()]

    def laid_out(self) -> list[str]:
        """The panels in the grid now (the rest are hidden in View or behind tabs)."""
        return [k for row in self.laid_rows() for k in row]

    def shown_key(self) -> str:
        return "+".join(self.laid_out())

    def focused(self) -> str:
        """The panel given the whole grid ("": none)."""
        return self._focused

    def toggle_focus(self, key: str) -> None:
        """Give this panel the whole grid, or, where it has it, the grid back to every shown panel."""
        self._focused = "" if self._focused == key else key
        self.arrange()

    def readable_size(self, key: str) -> tuple[int, int]:
        """The smallest frame in which the panel reads at the present type size."""
        return self.frames[key].readable_size()

    def room(self, strip: bool = False) -> tuple[int, int]:
        """The width and height the rows may take (less the tab strip's height where it is shown)."""
        height = self.height() - (self.strip.sizeHint().height() + self.layout().spacing() if strip else 0)
        return max(1, self.width()), max(1, height)

    def usual_rows(self, shown: list[str]) -> list[list[str]]:
        """The rows the shown panels take where they read: the view's (GridSpec.rows), else up to three in one
        row, more in two (the first the longer), as give_way tries first."""
        if self.spec.rows:
            return [row for row in ([k for k in row if k in shown] for row in self.spec.rows) if row]
        cols = len(shown) if len(shown) <= 3 else -(-len(shown) // 2)
        return [row for row in (shown[:cols], shown[cols:]) if row]

    def plan(self) -> tuple[list[list[str]], list[str]]:
        """The rows to lay out and the panels behind tabs: the focused panel alone; the usual rows where they
        read (and before the grid has a size of its own); else give_way in the grid's room."""
        shown = self.shown_panels()
        if self._focused in shown:
            return [[self._focused]], []
        usual = self.usual_rows(shown)
        if not self.isVisible() or self.width() < 50 or self.height() < 50:
            return usual, []
        needs = {k: self.readable_size(k) for k in shown}
        if fits(usual, needs, self.room()):
            return usual, []
        priority = self.spec.priority or {k: getattr(self.panels[k], "priority", 50) for k in shown}
        rows, moved = give_way(shown, needs, priority, self.room())
        if moved:  # the strip takes height: plan again in what it leaves
            rows, moved = give_way(shown, needs, priority, self.room(strip=True))
        width, height = self.room(strip=bool(moved))
        if self.scroll is not None and len(rows) == 1 and len(rows[0]) == 1 and needs[rows[0][0]][1] > height:
            # One panel taller than the room (the grid scrolls down to it): those that fit beside it in
            # width keep their readable size there too, the most important first.
            width -= self.scroll.verticalScrollBar().sizeHint().width()
            row = rows[0]
            for k in sorted(moved, key=lambda k: (priority.get(k, 50), shown.index(k))):
                if sum(needs[m][0] for m in row) + needs[k][0] + HANDLE_PX * len(row) <= width:
                    row.append(k)
            rows = [[k for k in shown if k in row]]
            moved = [k for k in moved if k not in row]
        return rows, moved

    def arrange(self) -> None:
        """Lay the shown panels out in the rows planned, each at least its readable size, the room left
        shared out; the rest behind tabs under the grid."""
        self._arrange_timer.stop()
        if self._focused not in self.shown_panels():
            self._focused = ""
        rows, self.moved = self.plan()
        if self._tab not in self.moved:
            self._tab = ""
        if self._tab:
            rows = [[self._tab]]
        self._needs = {k: self.readable_size(k) for k in self.frames}
        self._update_strip()
        changed = rows != self.laid_rows()
        if changed:
            place_frames(self.rows, rows, self.frames, self._parking)
        self._fit_sizes(rows)
        if changed:
            self.layout_changed.emit()

    def _fit_sizes(self, rows: list[list[str]]) -> None:
        """Each row its tallest panel's need and each cell its need, the room left shared out (by the view's
        weights); where the one panel kept needs more height than there is, the grid scrolls down to it."""
        if not rows or not self.isVisible() or self.width() < 50:
            self.body.setMinimumHeight(0)
            return
        viewport = self.scroll.viewport() if self.scroll is not None else self.body
        width = viewport.width() if viewport.width() > 50 else self.width()
        height = self.room(strip=bool(self.moved))[1]
        heights = [max(self._needs[k][1] for k in row) for row in rows]
        need = sum(heights) + HANDLE_PX * (len(rows) - 1)
        if need > height and self.scroll is not None:  # scrolling down: the vertical bar takes width
            width = self.width() - self.scroll.verticalScrollBar().sizeHint().width()
        self.body.setMinimumHeight(need if need > height else 0)
        self.body.setSizes([*share(max(height, need), heights), *[0] * (len(self.rows) - len(rows))])
        weights = self.spec.weights
        for r, members in enumerate(rows):
            needs = [self._needs[k][0] for k in members]
            self.rows[r].setSizes(weighted_share(width, needs, [weights.get(k, 1) for k in members]) if weights
                                  else share(width, needs))

    def _update_strip(self) -> None:
        # The main window's grid's string (context PanelGrid): every view's tab says the same.
        grid_name = QCoreApplication.translate("PanelGrid", "Grid")
        self.strip.show_moved(grid_name, [(k, self.panels[k].title()) for k in self.moved], self._tab)

    def _on_tab_changed(self, index: int) -> None:
        self._tab = self.tabs.tabData(index) or ""
        self.arrange()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._arrange_timer.start(0)

    def showEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        self._arrange_timer.start(0)

    def changeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:  # a zoom: every need changes
            self._arrange_timer.start(0)

    # ------------------------------------------------------------------ drawing
    def clear(self) -> None:
        for panel in self.panels.values():
            panel.clear()
        self._check_needs()

    def draw(self, history: Any, step: Any, *selection: Any) -> None:
        """Every laid-out panel at `step` of `history` (and the view's selection); one panel failing leaves
        the others drawn and says why in its title."""
        for frame in self.frames.values():
            if frame.isHidden():
                continue
            try:
                frame.panel.show_step(history, step, *selection)
                title = frame.panel.title()
                if frame.header.full_text() != title:
                    frame.header.setText(title)
            except Exception as exc:
                traceback.print_exc()
                frame.show_error(f"{type(exc).__name__}: {exc}")
        if self.spec.sized_by_data:
            self._check_needs()

    def _check_needs(self) -> None:
        """A draw that changed what a panel needs (more requests, more schedulers): give way again."""
        for k, frame in self.frames.items():
            if self._needs.get(k) != frame.readable_size():
                self._arrange_timer.start(0)
                return
