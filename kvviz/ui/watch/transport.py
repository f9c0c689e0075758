"""The Watch view's rows above its panels: per server a line saying its state (up, down and retrying, stalled),
which feeds it has (metrics, events, both) and its frame counters; the time slider over the samples; the
narration of what just happened (the shell's NarrationLabel: the newest sentences that fit two lines).
It reads WatchFrames; what a scrub does is the window's. Every line is in the window's language: the narration's
Said sentences and the states through the context "Narration", the rest through "WatchTransport".
"""
from __future__ import annotations

import html

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from kvviz.peers.watch.history import state_text
from kvviz.ui.qtutil import set_timeline, timeline_slider, translator
from kvviz.ui.shell.transport import NarrationLabel
from kvviz.ui.watch.source import ServerView, WatchFrame

STATE_COLORS = {"up": "#2ca02c", "down": "#d62728", "stalled": "#ff7f0e", "connecting": "#7f7f7f"}
NARRATION_SENTENCES = 4  # the longest form says this many of the newest sentences

_said_tr = translator("Narration")  # a narration template (kvviz.peers.watch.said) in the window's language
_tr = translator("WatchTransport")


def state_words(v: ServerView) -> str:
    return state_text(v.state, _said_tr)


def server_line(v: ServerView) -> str:
    """One server's status as rich text, in the window's language: its name in its colour, its state in the
    state's colour, its feeds."""
    c = v.counters
    problems = ""
    if c["malformed"] or c["gaps"] or c["lost"] or c["metrics_malformed"]:
        problems = _tr(" · {0} malformed frames, {1} gaps, {2} batches lost, {3} bad /metrics pages").format(
            c["malformed"], c["gaps"], c["lost"], c["metrics_malformed"])
    figures = _tr(" · {0} · {1:,} event frames, {2:,} samples, {3:,} blocks mirrored").format(
        _tr(v.sources), c["frames"], c["samples"], v.blocks)
    return (f'<span style="color:{v.color}">&#9632;</span> <b>{html.escape(v.label)}</b> '
            f'<b style="color:{STATE_COLORS.get(v.state, "#7f7f7f")}">{html.escape(state_words(v))}</b>'
            f"{html.escape(figures)}{html.escape(problems)}")


def narration_forms(frame: WatchFrame, t: float) -> list[str]:
    """What happened up to `t`, newest last, in the window's language: the last few sentences (several servers:
    each with its name), then the last one alone."""
    said = []
    for v in frame.servers:
        prefix = f"{v.label}: " if len(frame.servers) > 1 else ""
        said += [(when, prefix + text.text(_said_tr)) for when, text in v.narration if when <= t + 1e-9]
    said.sort(key=lambda x: x[0])
    if not said:
        return []
    sentence = _tr("[{0:.0f} s] {1}.")
    return ["  ".join(sentence.format(w, s) for w, s in said[-n:]) for n in (NARRATION_SENTENCES, 2, 1)]


class WatchTransport(QWidget):
    sample_chosen = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.status = QLabel()
        self.status.setObjectName("watch_status")
        self.status.setTextFormat(Qt.TextFormat.RichText)
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.status)
        row = QHBoxLayout()
        self.timeline_label = QLabel()
        self.timeline = timeline_slider("watch_timeline", self.sample_chosen)
        self.time_label = QLabel()
        self.time_label.setObjectName("watch_time_label")
        self.time_label.setMinimumWidth(220)
        for widget, stretch in ((self.timeline_label, 0), (self.timeline, 1), (self.time_label, 0)):
            row.addWidget(widget, stretch)
        layout.addLayout(row)
        self.narration = NarrationLabel("watch_narration", rich=False)
        self.narration.empty()
        layout.addWidget(self.narration)
        self._forms: list[str] = []
        self._shown: tuple | None = None

    def retranslate(self) -> None:
        self.timeline_label.setText(self.tr("Time"))
        self.timeline.setToolTip(self.tr("Scrub through the samples (Left/Right, Home/End: follow the newest)"))
        self._shown = None

    def clear(self) -> None:
        """Forget the drawn source (a new one starting)."""
        self.status.clear()
        self.time_label.clear()
        self._forms, self._shown = [], None
        self.narration.empty()
        self.narration.setToolTip("")

    def show_frame(self, frame: WatchFrame, sample: int, n: int, t: float, source: str) -> None:
        set_timeline(self.timeline, n, sample)
        key = (frame.started, frame.version, sample, n, source)
        if key == self._shown:
            return
        self._shown = key
        lines = "<br>".join(server_line(v) for v in frame.servers)
        if self.status.text() != lines:
            self.status.setText(lines)
        self.time_label.setText(self.tr("{0}: {1:.0f} s, sample {2} / {3}").format(source, t, sample + 1, n) if n
                                else self.tr("{0}: no sample yet").format(source))
        self._forms = narration_forms(frame, t)
        self.narration.setToolTip(self._forms[0] if self._forms else "")
        self.narration.fit(self._forms)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self.narration.fit(self._forms)

    def changeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self.narration.fit(self._forms)
