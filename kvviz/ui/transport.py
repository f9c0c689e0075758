"""The compare view's transport: the timeline row (the slider, the step label, the progress bar, the shown
run's mark, the identical/differ badge) and the step narration under it; the toolbar and the run's state
are the shell's (kvviz.ui.shell.transport). What a run does with them (start, pause, scrub) is the window's.

It reads a RunHistory and the selected step; it knows no panels, no form and no worker.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QVBoxLayout, QWidget

from kvviz.format import fmt_ms
from kvviz.records.trace import RunInfo
from kvviz.ui.history import RunHistory
from kvviz.ui.qtutil import set_timeline, timeline_slider
from kvviz.ui.shell.state import RunState
from kvviz.ui.shell.transport import NarrationLabel

NARRATION_FORMS = ("full", "no_traffic", "short")  # kvviz.ui.narration.describe's forms, longest first


class TransportBar(QWidget):
    """The timeline row and the step narration. The window sets `selected` and `state` and calls the
    update methods when the history or the selection changed."""

    step_chosen = Signal(int)  # the user moved the slider

    def __init__(self, history: RunHistory, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.history = history
        self.selected = 0
        self.state = RunState.IDLE
        self.narrating = False  # the panels exist: there is a step to tell
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        timeline = QHBoxLayout()
        self.timeline_label = QLabel()
        self.timeline = timeline_slider("timeline", self.step_chosen)
        self.step_label = QLabel()
        self.step_label.setMinimumWidth(150)
        # Where the eye is while a run is asked for: the model loading (busy), then steps done and time left.
        self.progress = QProgressBar()
        self.progress.setObjectName("run_progress")
        self.progress.setTextVisible(True)
        # The text centred over a pale fill, dark on it and beside it alike: the style's own bar had
        # drawn white text on a dark fill, and half of "4 / 40 steps" vanished on the light part.
        self.progress.setStyleSheet(
            "QProgressBar { border: 1px solid #9a9a9a; border-radius: 3px; background: #f6f6f6; color: #1a1a1a;"
            " text-align: center; } QProgressBar::chunk { background: #bcd7f0; }")
        self.progress.hide()
        # The panels show a run the form no longer describes (another model, device or dtype, a replay).
        self.shown_run_label = QLabel()
        self.shown_run_label.setObjectName("shown_run")
        self.shown_run_label.setStyleSheet("background: #fff4ce; color: #5c4400; padding: 2px 6px; border-radius: 4px;")
        self.shown_run_label.hide()
        self.badge = QLabel()
        self.badge.setObjectName("badge")
        self.badge.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.badge.setMinimumWidth(120)
        for widget, stretch in ((self.timeline_label, 0), (self.timeline, 1), (self.step_label, 0),
                                (self.progress, 0), (self.shown_run_label, 0), (self.badge, 0)):
            timeline.addWidget(widget, stretch)
        layout.addLayout(timeline)
        # The selected step in words (View > Step narration): a fixed number of lines, so a new step's
        # text never changes the grid's height (which would lay every panel out again).
        self.narration = NarrationLabel("narration", rich=True)
        self.narration.installEventFilter(self)  # a new width may fit more or less of it
        layout.addWidget(self.narration)

    def retranslate(self) -> None:
        self.timeline_label.setText(self.tr("Step"))
        self.timeline.setToolTip(self.tr("Scrub through the recorded steps (Left/Right, Home/End)"))
        self.badge.setToolTip(self.tr("Whether the engines' tokens so far are the same"))
        # Wide enough for its longest text in this language: squeezed by the timeline's stretch it
        # had wrapped "125 / 300 steps, paused" into a 70-px box at 1920 px (seen under Xvfb).
        longest = self.tr("{0}, about {1} left").format(self.tr("{0} / {1} steps").format(99999, 99999), "59.9 min")
        self.progress.setFixedWidth(self.fontMetrics().horizontalAdvance(longest) + 24)  # (its style sheet keeps
        # the font it was polished with: the bar's own metrics lagged a zoom)
        self.update_badge()
        self.update_step_label()

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if obj is self.narration and event.type() == QEvent.Type.Resize:
            self.update_narration()
        return False

    def set_steps(self, n: int, selected: int) -> None:
        """The slider's range and position, silently (the window chose them)."""
        self.selected = selected
        set_timeline(self.timeline, n, selected)

    def update_badge(self) -> None:
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

    def update_step_label(self) -> None:
        n = self.history.n_steps()
        if not n:
            self.step_label.setText(self.tr("no steps yet: Run (Ctrl+R)"))
            return
        phase = ""
        for key in self.history.engines:
            trace = self.history.at(key, self.selected)
            if trace is not None:
                phase = self.tr("prefill") if trace.phase == "prefill" else self.tr("decode")
                break
        self.step_label.setText(self.tr("step {0} / {1}  {2}").format(self.selected, n - 1, phase))
        self.update_narration()

    def update_progress(self, model: str, left_ms: float | None) -> None:
        """The busy bar while the model loads; steps done and time left while the run goes on."""
        bar = self.progress
        if self.state is RunState.IDLE:
            bar.hide()
            return
        if self.state is RunState.LOADING:
            bar.setRange(0, 0)
            bar.setFormat(self.tr("loading {0}...").format(model))
            bar.setToolTip(self.tr("Loading the model (PyTorch reads its weights)"))
            bar.show()
            return
        total = max(1, self.history.info.max_new_tokens)
        n = min(self.history.n_steps(), total)
        bar.setRange(0, total)
        bar.setValue(n)
        text = self.tr("{0} / {1} steps").format(n, total)
        if self.state is RunState.PAUSED:
            text = self.tr("{0}, paused").format(text)
        elif left_ms is not None:
            text = self.tr("{0}, about {1} left").format(text, fmt_ms(left_ms))
        bar.setFormat(text.replace("%", "%%"))
        bar.setToolTip(self.tr("Time left from this run's measured step times (and the Speed control)"))
        bar.show()

    def mark_shown_run(self, info: RunInfo | None, *, replay: bool = False) -> None:
        """Beside the timeline: the panels show a replayed trace, or a run the form no longer
        describes (None: they show what the form describes, or nothing)."""
        if info is None:
            self.shown_run_label.hide()
            return
        if replay:
            text = self.tr("replay: {0}").format(info.model_name)
            tip = self.tr("The panels show a saved run of {0} ({1}, {2}); Run starts a new one from the form.")
        else:
            text = self.tr("last run: {0}").format(info.model_name)
            tip = self.tr("The panels show the last run, of {0} ({1}, {2}); the form now asks for another "
                          "model, device, dtype or decode kernel: Run to see it.")
        self.shown_run_label.setText(text)
        self.shown_run_label.setToolTip(tip.format(info.model_name, info.device, info.dtype))
        self.shown_run_label.show()

    # ------------------------------------------------------------------ narration
    def update_narration(self) -> None:
        """The selected step in words, told now: the window calls it as part of each frame, so the words
        and the panels show the same step (on a timer of their own they could read step 45 beside panels at 53)."""
        if not self.narration.isHidden():
            self.narrate()

    def narrate(self) -> None:
        """Two lines, wrapped: the whole text where it fits, else without the bytes sentence (the bytes
        panel has them), else its short form; never cut. The full text is the tooltip."""
        if not self.narrating or not self.history.n_steps():
            self.narration.empty()
            return
        from kvviz.ui.narration import describe

        forms = (describe(self.history, self.selected, form=form) if form != "full" else
                 describe(self.history, self.selected) for form in NARRATION_FORMS)
        self.narration.setToolTip(self.narration.fit(forms))

    def show_narration(self, shown: bool) -> None:
        self.narration.setVisible(shown)
        self.update_narration()
