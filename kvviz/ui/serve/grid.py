"""The serve panels' grid: each registered serve panel in a frame with its title, two rows of splitters
(the timeline and the pool above, the plots, counters and text below), inside a scroll area that
gives way on a small screen: a panel never shrinks below its minimum, the grid scrolls instead.

It knows panels and frames; not the form, the transport or the worker.
"""
from __future__ import annotations

import importlib
import traceback

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFrame, QLabel, QScrollArea, QSplitter, QVBoxLayout, QWidget

from kvviz.serving.history import ServeHistory
from kvviz.ui.serve.panels import SERVE_PANELS
from kvviz.ui.serve.panels.base import ServePanel

FRAME_MIN = (230, 170)  # no panel is drawn smaller: the grid scrolls first
TOP_ROW = ("timeline", "pool")


class ServeFrame(QFrame):
    """A panel with its title above; the panel's help is the tooltip of both."""

    def __init__(self, panel: ServePanel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.panel = panel
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setObjectName(f"serve_panel_{panel.key}")
        self.setMinimumSize(*FRAME_MIN)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 4)
        layout.setSpacing(2)
        self.header = QLabel(self)
        self.header.setStyleSheet("font-weight: bold;")
        layout.addWidget(self.header)
        layout.addWidget(panel, 1)

    def retranslate(self, title: str | None = None) -> None:
        self.panel.retranslate()
        self.header.setText(title or self.panel.title())
        self.header.setToolTip(self.panel.help_text())
        self.setToolTip(self.panel.help_text())


class ServeGrid(QScrollArea):
    """`draw(run, step, request)` brings the shown panels to a step; `panels`, `frames` by key."""

    cell_picked = Signal(int, int)  # request, step

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("serve_grid")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.panels: dict[str, ServePanel] = {}
        self.frames: dict[str, ServeFrame] = {}
        self.panel_actions: dict[str, QAction] = {}
        self.load_errors: list[str] = []
        body = QSplitter(Qt.Orientation.Vertical)
        body.setChildrenCollapsible(False)
        self.rows = [QSplitter(Qt.Orientation.Horizontal), QSplitter(Qt.Orientation.Horizontal)]
        for row in self.rows:
            row.setChildrenCollapsible(False)
            body.addWidget(row)
        for key, spec in SERVE_PANELS:
            module_name, _, class_name = spec.partition(":")
            try:
                panel = getattr(importlib.import_module(module_name), class_name)()
            except Exception as exc:  # a broken panel is reported, the others still shown
                traceback.print_exc()
                self.load_errors.append(f"{key}: {type(exc).__name__}: {exc}")
                continue
            panel.key = panel.key or key
            panel.cell_picked.connect(self.cell_picked)
            frame = ServeFrame(panel)
            self.panels[key], self.frames[key] = panel, frame
            self.rows[0 if key in TOP_ROW else 1].addWidget(frame)
            act = QAction(self, checkable=True, checked=True)
            act.toggled.connect(frame.setVisible)
            self.panel_actions[key] = act
        self.rows[0].setSizes([2000, 1000])
        self.rows[1].setSizes([1000, 1000, 1000, 800])
        body.setSizes([1100, 900])
        self.setWidget(body)
        self.body = body

    def retranslate(self) -> None:
        for key, frame in self.frames.items():
            frame.retranslate()
            self.panel_actions[key].setText(frame.panel.title())

    def shown_key(self) -> str:
        return "+".join(k for k, f in self.frames.items() if not f.isHidden())

    def clear(self) -> None:
        for panel in self.panels.values():
            panel.clear()

    def draw(self, run: ServeHistory, step: int, request: int | None) -> None:
        for frame in self.frames.values():
            if frame.isHidden():
                continue
            try:
                frame.panel.show_step(run, step, request)
                title = frame.panel.title()
                if frame.header.text() != title:
                    frame.header.setText(title)
            except Exception as exc:  # one panel failing leaves the others drawn, and says why
                traceback.print_exc()
                frame.header.setText(f"{frame.panel.title()}  ⚠ {type(exc).__name__}: {exc}")
