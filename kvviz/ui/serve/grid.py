"""The serve panels' grid: each registered serve panel in a frame with its title, in rows of splitters that
give way on a small screen or a large zoom as the main window's grid does (kvviz.ui.shell.giveway): every panel
declares the smallest size at which it reads at the present type size (ServePanel.readable_size), the most
important keep it (the timeline, then the pool, the plots, the counters, the text) and the rest wait behind
tabs under the grid, which says so. The grid never scrolls sideways; it scrolls down only where the one
panel kept is taller than the room (a timeline of many requests under many schedulers).

It knows panels and frames; not the form, the transport or the worker.
"""
from __future__ import annotations

import traceback

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QSizePolicy, QSplitter, QVBoxLayout, QWidget

from kvviz.serving.history import ServeHistory
from kvviz.ui.serve.panels import SERVE_PANELS
from kvviz.ui.serve.panels.base import ServePanel
from kvviz.ui.shell.giveway import HANDLE_PX, give_way, share
from kvviz.ui.shell.grid import MovedStrip, load_panels, place_frames

FRAME_MIN = (230, 170)  # no panel's readable size is taken below this
# Which panels keep their room first (lowest first) when the grid has too little for all.
PRIORITY = {"timeline": 0, "pool": 1, "usage": 2, "latency": 2, "counters": 3, "text": 4}
DEFAULT_ROWS = (("timeline", "pool"), ("usage", "latency", "counters", "text"))


# How the room left in a row is shared: the timeline takes three parts of it (its slots are its width).
WEIGHT = {"timeline": 3}


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

    def is_elided(self) -> bool:
        return super().text() != self._full

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


class ServeFrame(QFrame):
    """A panel with its title above; the panel's help is the tooltip of both."""

    def __init__(self, panel: ServePanel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.panel = panel
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setObjectName(f"serve_panel_{panel.key}")
        self.setMinimumSize(40, 40)  # the grid gives way (behind tabs) before a panel is squeezed
        panel.setMinimumSize(0, 0)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 4)
        layout.setSpacing(2)
        self.header = ElidedLabel(self)
        self.header.setStyleSheet("font-weight: bold;")
        layout.addWidget(self.header)
        layout.addWidget(panel, 1)

    def retranslate(self, title: str | None = None) -> None:
        self.panel.retranslate()
        self.header.setText(title or self.panel.title())
        self.header.set_help(self.panel.help_text())
        self.setToolTip(self.panel.help_text())

    def readable_size(self) -> tuple[int, int]:
        """The panel's readable size plus the title and the margins around it."""
        w, h = self.panel.readable_size()
        m = self.layout().contentsMargins()
        header = self.header.sizeHint().height() + self.layout().spacing()
        return (max(FRAME_MIN[0], w + m.left() + m.right() + 2),
                max(FRAME_MIN[1], h + header + m.top() + m.bottom() + 2))


class ServeGrid(QWidget):
    """`draw(run, step, request)` brings the laid-out panels to a step; `panels`, `frames` by key; `moved`:
    the panels behind tabs; `rows`: the splitters of panels laid out."""

    cell_picked = Signal(int, int)  # request, step
    layout_changed = Signal()  # panels came into the grid (or left it): draw them

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("serve_grid")
        self.panels: dict[str, ServePanel] = {}
        self.frames: dict[str, ServeFrame] = {}
        self.panel_actions: dict[str, QAction] = {}
        self.load_errors: list[str] = []
        self.moved: list[str] = []
        self._tab = ""  # the moved panel shown alone from its tab ("": the grid)
        self._laid_out: tuple | None = None  # (rows, moved, room) last laid out
        self._parking = QWidget()  # never shown: holds the frames not laid out
        self._parking.hide()
        self.scroll = QScrollArea()
        self.scroll.setObjectName("serve_grid_scroll")
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # never sideways
        body = QSplitter(Qt.Orientation.Vertical)
        body.setChildrenCollapsible(False)
        self.rows = [QSplitter(Qt.Orientation.Horizontal), QSplitter(Qt.Orientation.Horizontal)]
        for row in self.rows:
            row.setChildrenCollapsible(False)
            body.addWidget(row)
        self.body = body
        self.scroll.setWidget(body)
        self.strip = MovedStrip("serve_moved_tabs", "serve_moved_note")
        self.tabs, self.moved_note = self.strip.tabs, self.strip.note
        self.tabs.currentChanged.connect(self._on_tab_changed)
        self.strip.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.scroll, 1)
        layout.addWidget(self.strip)
        self._arrange_timer = QTimer(self)  # single shot: after a resize or a draw that changed a need
        self._arrange_timer.setSingleShot(True)
        self._arrange_timer.timeout.connect(self.arrange)
        self._needs: dict[str, tuple[int, int]] = {}
        self.panels = load_panels(SERVE_PANELS, self.load_errors.append)
        for key, panel in self.panels.items():
            panel.cell_picked.connect(self.cell_picked)
            self.frames[key] = frame = ServeFrame(panel)
            frame.setParent(self._parking)
            act = QAction(self, checkable=True, checked=True)
            act.toggled.connect(lambda _on: self.arrange())
            self.panel_actions[key] = act
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

    def laid_out(self) -> list[str]:
        """The panels in the grid now (the rest are hidden in View or behind tabs)."""
        return [row.widget(i).panel.key for row in self.rows if not row.isHidden() for i in range(row.count())]

    def shown_key(self) -> str:
        return "+".join(self.laid_out())

    def readable_size(self, key: str) -> tuple[int, int]:
        """The smallest frame in which the panel reads at the present type size."""
        return self.frames[key].readable_size()

    def room(self, strip: bool = False) -> tuple[int, int]:
        """The width and height the rows may take (less the tab strip's height where it is shown)."""
        height = self.height() - (self.strip.sizeHint().height() + self.layout().spacing() if strip else 0)
        return max(1, self.width()), max(1, height)

    def plan(self) -> tuple[list[list[str]], list[str]]:
        """give_way in the grid's room; before the grid has a size of its own, the usual two rows."""
        shown = self.shown_panels()
        if not self.isVisible() or self.width() < 50 or self.height() < 50:
            rows = [[k for k in row if k in shown] for row in DEFAULT_ROWS]
            return [row for row in rows if row], []
        needs = {k: self.readable_size(k) for k in shown}
        usual = [row for row in ([k for k in row if k in shown] for row in DEFAULT_ROWS) if row]
        if fits(usual, needs, self.room()):  # the rows the view always had, where they read
            return usual, []
        rows, moved = give_way(shown, needs, PRIORITY, self.room())
        if moved:  # the strip takes height: plan again in what it leaves
            rows, moved = give_way(shown, needs, PRIORITY, self.room(strip=True))
        width, height = self.room(strip=bool(moved))
        if len(rows) == 1 and len(rows[0]) == 1 and needs[rows[0][0]][1] > height:
            # One panel taller than the room (the grid scrolls down to it): those that fit beside it in
            # width keep their readable size there too, the most important first.
            width -= self.scroll.verticalScrollBar().sizeHint().width()
            row = rows[0]
            for k in sorted(moved, key=lambda k: (PRIORITY.get(k, 50), shown.index(k))):
                if sum(needs[m][0] for m in row) + needs[k][0] + HANDLE_PX * len(row) <= width:
                    row.append(k)
            rows = [[k for k in shown if k in row]]
            moved = [k for k in moved if k not in row]
        return rows, moved

    def arrange(self) -> None:
        """Lay the shown panels out in the rows give_way chose, each at least its readable size, the
        room left shared out; the rest behind tabs under the grid."""
        self._arrange_timer.stop()
        rows, self.moved = self.plan()
        if self._tab not in self.moved:
            self._tab = ""
        if self._tab:
            rows = [[self._tab]]
        self._needs = {k: self.readable_size(k) for k in self.frames}
        self._update_strip()
        laid = [k for row in rows for k in row]
        changed = laid != self.laid_out() or [len(r) for r in rows] != [
            row.count() for row in self.rows if not row.isHidden()]
        if changed:
            place_frames(self.rows, rows, self.frames, self._parking)
        self._fit_sizes(rows)
        if changed:
            self.layout_changed.emit()

    def _fit_sizes(self, rows: list[list[str]]) -> None:
        """Each row its tallest panel's need and each cell its need, the room left shared out equally;
        where the one panel kept needs more height than there is, the grid scrolls down to it."""
        if not rows or not self.isVisible() or self.width() < 50:
            self.body.setMinimumHeight(0)
            return
        width = self.scroll.viewport().width() if self.scroll.viewport().width() > 50 else self.width()
        height = self.room(strip=bool(self.moved))[1]
        heights = [max(self._needs[k][1] for k in row) for row in rows]
        need = sum(heights) + HANDLE_PX * (len(rows) - 1)
        if need > height:  # scrolling down: the vertical bar takes width
            width = self.width() - self.scroll.verticalScrollBar().sizeHint().width()
        self.body.setMinimumHeight(need if need > height else 0)
        self.body.setSizes([*share(max(height, need), heights), *[0] * (len(self.rows) - len(rows))])
        for r, members in enumerate(rows):
            self.rows[r].setSizes(weighted_share(width, [self._needs[k][0] for k in members],
                                                 [WEIGHT.get(k, 1) for k in members]))

    def _update_strip(self) -> None:
        self.strip.show_moved(self.tr("Grid"), [(k, self.panels[k].title()) for k in self.moved], self._tab)

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

    def draw(self, run: ServeHistory, step: int, request: int | None) -> None:
        for frame in self.frames.values():
            if frame.isHidden():
                continue
            try:
                frame.panel.show_step(run, step, request)
                title = frame.panel.title()
                if frame.header.full_text() != title:
                    frame.header.setText(title)
            except Exception as exc:  # one panel failing leaves the others drawn, and says why
                traceback.print_exc()
                frame.header.setText(f"{frame.panel.title()}  ⚠ {type(exc).__name__}: {exc}")
        self._check_needs()

    def _check_needs(self) -> None:
        """A draw that changed what a panel needs (more requests, more schedulers): give way again."""
        for k, frame in self.frames.items():
            if self._needs.get(k) != frame.readable_size():
                self._arrange_timer.start(0)
                return
