"""The serve view's timeline row (slider, step label, selected request) and the step's narration.

It reads a ServeHistory and the selection; what a scrub does is the window's.
"""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QSlider, QVBoxLayout, QWidget

from kvviz.serving.history import ServeHistory
from kvviz.ui.qtutil import blocked
from kvviz.ui.serve.narration import narrate

NARRATION_LINES = 2


class ServeTransport(QWidget):
    step_chosen = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        row = QHBoxLayout()
        self.timeline_label = QLabel()
        self.timeline = QSlider(Qt.Orientation.Horizontal)
        self.timeline.setObjectName("serve_timeline")
        self.timeline.setRange(0, 0)
        self.timeline.setPageStep(10)
        self.timeline.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # Left/Right belong to the window's keys
        self.timeline.valueChanged.connect(self.step_chosen)
        self.step_label = QLabel()
        self.step_label.setObjectName("serve_step_label")
        self.step_label.setMinimumWidth(260)
        for widget, stretch in ((self.timeline_label, 0), (self.timeline, 1), (self.step_label, 0)):
            row.addWidget(widget, stretch)
        layout.addLayout(row)
        self.narration = QLabel()
        self.narration.setObjectName("serve_narration")
        self.narration.setWordWrap(True)
        self.narration.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.narration.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # A fixed height: a longer sentence never lays the grid out again.
        self.narration.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.narration.setFixedHeight(NARRATION_LINES * self.narration.fontMetrics().lineSpacing() + 4)
        layout.addWidget(self.narration)
        self._shown: tuple | None = None

    def retranslate(self) -> None:
        self.timeline_label.setText(self.tr("Step"))
        self.timeline.setToolTip(self.tr("Scrub through the recorded steps (Left/Right, Home/End)"))
        self._shown = None

    def show_step(self, run: ServeHistory, step: int, request: int | None) -> None:
        n = run.n_steps()
        with blocked(self.timeline):
            self.timeline.setMaximum(max(0, n - 1))
            self.timeline.setValue(step)
        key = (id(run), run.version, step, request)
        if key == self._shown:
            return
        self._shown = key
        if not n:
            self.step_label.setText(self.tr("no steps yet: Run (Ctrl+R)") if not run.schedulers else "")
            self.narration.clear()
            return
        text = self.tr("step {0} / {1}").format(step, n - 1)
        if request is not None:
            text += "  " + self.tr("request {0}").format(request)
        self.step_label.setText(text)
        story = narrate(run, step)
        self.narration.setToolTip(story)
        self.narration.setText(story)
