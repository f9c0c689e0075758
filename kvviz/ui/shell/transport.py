"""The transport every view shares: the toolbar (Run, Pause, Step, Stop, the speed control and the run's
state) and the step narration under the timeline (a fixed number of lines; the longest form of the step's
text that fits, never cut, the whole text its tooltip). It knows a view's texts, not its records."""
from __future__ import annotations

import math
from collections.abc import Iterable

from PySide6.QtCore import QRect, Qt, Signal
from PySide6.QtGui import QAction, QTextDocument
from PySide6.QtWidgets import QLabel, QSizePolicy, QSpinBox, QToolBar, QWidget

from kvviz.ui.shell.state import NARRATION_LINES, RunState

SPEED_LADDER = (1, 2, 5, 10, 20, 50, 100, 200, 500, 0)  # steps per second; 0 = as fast as possible


class TransportToolbar(QToolBar):
    """Run, Pause, Step and Stop (the view's actions), the speed control and the run's state."""

    speed_changed = Signal(int)  # steps per second; 0 = as fast as possible

    def __init__(self, actions: tuple[QAction, ...], parent: QWidget | None = None, *, name: str = "transport",
                 speed_name: str = "speed", speed: int = 20) -> None:
        super().__init__(parent)
        self.setObjectName(name)
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        for act in actions:
            self.addAction(act)
        self.addSeparator()
        self.speed_label = QLabel()
        self.speed_spin = QSpinBox()
        self.speed_spin.setObjectName(speed_name)
        self.speed_spin.setRange(0, 1000)
        self.speed_spin.setValue(speed)
        self.speed_spin.valueChanged.connect(self.speed_changed)
        self.addWidget(self.speed_label)
        self.addWidget(self.speed_spin)
        self.addSeparator()
        self.state_label = QLabel()
        self.state_label.setObjectName("run_state")
        self.addWidget(self.state_label)

    def retranslate(self) -> None:
        self.speed_label.setText(self.tr(" Speed "))
        self.speed_spin.setSuffix(self.tr(" steps/s"))
        self.speed_spin.setSpecialValueText(self.tr("as fast as possible"))
        self.speed_spin.setToolTip(self.tr("Lockstep rounds per second ([ slower, ] faster)"))
        self.toggleViewAction().setText(self.tr("Transport"))
        self.setWindowTitle(self.tr("Transport"))

    def show_state(self, state: RunState) -> None:
        self.state_label.setText({
            RunState.IDLE: self.tr("idle"), RunState.LOADING: self.tr("loading the model..."),
            RunState.RUNNING: self.tr("running"), RunState.PAUSED: self.tr("paused"),
        }[RunState(state)])

    def change_speed(self, direction: int) -> None:
        """One rung of SPEED_LADDER faster (+1) or slower (-1)."""
        ordered = [v if v else math.inf for v in SPEED_LADDER]
        value = self.speed_spin.value()
        current = value if value else math.inf
        if direction > 0:
            nxt = next((v for v in ordered if v > current), ordered[-1])
        else:
            nxt = next((v for v in reversed(ordered) if v < current), ordered[0])
        self.speed_spin.setValue(0 if nxt == math.inf else int(nxt))


class NarrationLabel(QLabel):
    """The selected step in words: NARRATION_LINES lines of the current font, so a new step's text never
    changes the grid's height (which would lay every panel out again); its text sets no width."""

    def __init__(self, name: str, *, rich: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(name)
        self.rich = rich  # rich text (measured as a document) or plain (measured by the font)
        if rich:
            self.setTextFormat(Qt.TextFormat.RichText)
        self.setWordWrap(True)
        self.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)  # for notes
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)

    def lines_px(self) -> int:
        return NARRATION_LINES * self.fontMetrics().lineSpacing()  # the font's size (View > Zoom) sets it

    def text_height(self, text: str) -> int:
        """The height the text takes wrapped at the label's width."""
        width = max(1, self.contentsRect().width())
        if not self.rich:
            return self.fontMetrics().boundingRect(
                QRect(0, 0, width, 100_000), Qt.TextFlag.TextWordWrap | Qt.AlignmentFlag.AlignLeft, text).height()
        document = QTextDocument()
        document.setDocumentMargin(0)
        document.setDefaultFont(self.font())
        document.setHtml(text)
        document.setTextWidth(width)
        return math.ceil(document.size().height())

    def fit(self, forms: Iterable[str]) -> str:
        """The first of `forms` (longest first, made as asked) that fits the lines, else the last; a box too
        narrow for even that grows, the text whole. Returns the first form (the caller's tooltip)."""
        lines = self.lines_px()
        first = text = ""
        for i, text in enumerate(forms):
            if i == 0:
                first = text
            if self.text_height(text) <= lines:
                break
        self.setFixedHeight(max(lines, self.text_height(text) if text else 0) + 4)
        if text != self.text():
            self.setText(text)
        return first

    def empty(self) -> None:
        self.setFixedHeight(self.lines_px() + 4)
        self.clear()
