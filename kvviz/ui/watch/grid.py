"""The Watch view's panel grid: each registered watch panel (WATCH_PANELS) in a Serve view frame (its title
above it), in two rows of splitters; where the window has no room to show them all readable, the shell's
give-way keeps the most important and puts the rest behind tabs under the grid. Panels and frames only.
"""
from __future__ import annotations

import traceback

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from kvviz.ui.serve.grid import ServeFrame
from kvviz.ui.shell.giveway import give_way, share
from kvviz.ui.shell.grid import MovedStrip, load_panels, place_frames
from kvviz.ui.watch.panels import WATCH_PANELS

PRIORITY = {"tree": 0, "usage": 1, "cache": 2, "latency": 3, "requests": 4, "counters": 5}
DEFAULT_ROWS = (("tree", "usage", "cache"), ("requests", "latency", "counters"))


class WatchGrid(QWidget):
    """`draw(frame, t)` brings the laid-out panels to a frame; `panels`, `frames` by key; `moved`: behind tabs."""

    layout_changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("watch_grid")
        self.load_errors: list[str] = []
        self.panels = load_panels(WATCH_PANELS, self.load_errors.append)
        self.frames = {k: ServeFrame(p) for k, p in self.panels.items()}
        self.panel_actions: dict[str, QAction] = {}
        self.moved: list[str] = []
        self._tab = ""
        self._parking = QWidget()
        self._parking.hide()
        self.body = QSplitter(Qt.Orientation.Vertical)
        self.body.setChildrenCollapsible(False)
        self.rows = [QSplitter(Qt.Orientation.Horizontal) for _ in DEFAULT_ROWS]
        for row in self.rows:
            row.setChildrenCollapsible(False)
            self.body.addWidget(row)
        self.strip = MovedStrip("watch_moved_tabs", "watch_moved_note")
        self.strip.tabs.currentChanged.connect(self._on_tab_changed)
        self.strip.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.body, 1)
        layout.addWidget(self.strip)
        for key, frame in self.frames.items():
            frame.setObjectName(f"watch_panel_{key}")
            frame.setParent(self._parking)
            act = QAction(self, checkable=True, checked=True)
            act.toggled.connect(lambda _on: self.arrange())
            self.panel_actions[key] = act
        self._arrange_timer = QTimer(self)
        self._arrange_timer.setSingleShot(True)
        self._arrange_timer.timeout.connect(self.arrange)
        self.arrange()

    def retranslate(self) -> None:
        for key, frame in self.frames.items():
            frame.retranslate()
            self.panel_actions[key].setText(frame.panel.title())
        self._update_strip()

    def shown_panels(self) -> list[str]:
        return [k for k, act in self.panel_actions.items() if act.isChecked()]

    def laid_out(self) -> list[str]:
        return [row.widget(i).panel.key for row in self.rows if not row.isHidden() for i in range(row.count())]

    def shown_key(self) -> str:
        return "+".join(self.laid_out())

    def plan(self) -> tuple[list[list[str]], list[str]]:
        shown = self.shown_panels()
        usual = [row for row in ([k for k in row if k in shown] for row in DEFAULT_ROWS) if row]
        if not self.isVisible() or self.width() < 50 or self.height() < 50:
            return usual, []
        needs = {k: self.frames[k].readable_size() for k in shown}
        room = (self.width(), self.height())
        rows, moved = give_way(shown, needs, PRIORITY, room)
        if moved:
            rows, moved = give_way(shown, needs, PRIORITY, (room[0], room[1] - self.strip.sizeHint().height()))
        return rows[:len(self.rows)], moved + [k for row in rows[len(self.rows):] for k in row]

    def arrange(self) -> None:
        self._arrange_timer.stop()
        rows, self.moved = self.plan()
        if self._tab not in self.moved:
            self._tab = ""
        if self._tab:
            rows = [[self._tab]]
        before = self.laid_out()
        place_frames(self.rows, rows, self.frames, self._parking)
        self._update_strip()
        if rows and self.isVisible():
            needs = [max(self.frames[k].readable_size()[1] for k in row) for row in rows]
            self.body.setSizes([*share(max(1, self.body.height()), needs), *[0] * (len(self.rows) - len(rows))])
            for r, members in enumerate(rows):
                self.rows[r].setSizes(share(max(1, self.width()), [self.frames[k].readable_size()[0]
                                                                   for k in members]))
        if self.laid_out() != before:
            self.layout_changed.emit()

    def _update_strip(self) -> None:
        self.strip.show_moved(self.tr("Grid"), [(k, self.panels[k].title()) for k in self.moved], self._tab)

    def _on_tab_changed(self, index: int) -> None:
        self._tab = self.strip.tabs.tabData(index) or ""
        self.arrange()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._arrange_timer.start(0)

    def showEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        self._arrange_timer.start(0)

    def changeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._arrange_timer.start(0)

    def clear(self) -> None:
        for panel in self.panels.values():
            panel.clear()

    def draw(self, frame, t: float) -> None:
        for frame_widget in self.frames.values():
            if frame_widget.isHidden():
                continue
            panel = frame_widget.panel
            try:
                panel.show_step(frame, t, None)
            except Exception as exc:  # one panel failing leaves the others drawn, and says why
                traceback.print_exc()
                frame_widget.header.setText(f"{panel.title()}  ⚠ {type(exc).__name__}: {exc}")
