"""The serve view's timeline row (slider, step label, selected request) and the step's narration (the
shell's NarrationLabel: two lines, the whole text where it fits, else its short form, never cut; the whole
text is the tooltip).

It reads a ServeHistory and the selection; what a scrub does is the window's.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from kvviz.serving.history import ServeHistory
from kvviz.ui.qtutil import set_timeline, timeline_slider
from kvviz.ui.serve.narration import narrate
from kvviz.ui.shell.transport import NarrationLabel

NARRATION_FORMS = ("full", "short")  # narrate's forms, longest first


class ServeTransport(QWidget):
    step_chosen = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        row = QHBoxLayout()
        self.timeline_label = QLabel()
        self.timeline = timeline_slider("serve_timeline", self.step_chosen)
        self.step_label = QLabel()
        self.step_label.setObjectName("serve_step_label")
        self.step_label.setMinimumWidth(260)
        for widget, stretch in ((self.timeline_label, 0), (self.timeline, 1), (self.step_label, 0)):
            row.addWidget(widget, stretch)
        layout.addLayout(row)
        self.narration = NarrationLabel("serve_narration", rich=False)
        self.narration.empty()  # a fixed height: a longer sentence never lays the grid out again
        layout.addWidget(self.narration)
        self._shown: tuple | None = None
        self._stories: list[str] = []  # the step's narration in each form, longest first

    def retranslate(self) -> None:
        self.timeline_label.setText(self.tr("Step"))
        self.timeline.setToolTip(self.tr("Scrub through the recorded steps (Left/Right, Home/End)"))
        self._shown = None

    def show_step(self, run: ServeHistory, step: int, request: int | None) -> None:
        n = run.n_steps()
        set_timeline(self.timeline, n, step)
        key = (id(run), run.version, step, request)
        if key == self._shown:
            return
        self._shown = key
        if not n:
            self.step_label.setText(self.tr("no steps yet: Run (Ctrl+R)") if not run.schedulers else "")
            self._stories = []
            self.narration.clear()
            self.narration.setToolTip("")
            self.fit_narration()
            return
        text = self.tr("step {0} / {1}").format(step, n - 1)
        if request is not None:
            text += "  " + self.tr("request {0}").format(request)
        self.step_label.setText(text)
        self._stories = [narrate(run, step, form) for form in NARRATION_FORMS]
        self.narration.setToolTip(self._stories[0])
        self.fit_narration()

    def fit_narration(self) -> None:
        """The longest form that fits two lines (NarrationLabel.fit)."""
        self.narration.fit(self._stories)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self.fit_narration()

    def changeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self.fit_narration()
