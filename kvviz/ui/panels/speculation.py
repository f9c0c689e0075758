"""Speculative decoding at a glance: how often the target kept the draft at each position of a round, and the
tokens each target forward yielded so far against plain decoding's one.

Reads StepTrace's round fields only (spec_index, spec_proposed, spec_accepted, target_forwards: kvviz.engines.spec),
up to the selected step; engines without them are plain decoding, one token per forward.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout

from kvviz.format import share_text
from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._plots import canvas, engine_step, legend_row, set_legend, step_line
from kvviz.ui.panels.base import Panel


def acceptance(traces, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Per draft position j (1..k): rounds that drafted a j-th token, and of them those whose j-th draft the
    target kept, over the rounds begun at steps 0..stop."""
    firsts = [t for t in traces[:stop + 1] if t.spec_index == 0 and t.phase == "decode"]
    k = max((t.spec_k or 0 for t in traces[:1]), default=0)
    drafted, kept = np.zeros(k, dtype=np.int64), np.zeros(k, dtype=np.int64)
    for t in firsts:
        drafted[:t.spec_proposed] += 1
        kept[:t.spec_accepted] += 1
    return drafted, kept


def tokens_per_forward(traces, stop: int) -> np.ndarray:
    """Tokens so far / target forwards so far at each step 0..stop (1.0 throughout for plain decoding)."""
    steps = np.arange(1, min(stop, len(traces) - 1) + 2, dtype=np.float64)
    forwards = np.fromiter((t.target_forwards or t.step + 1 for t in traces[:len(steps)]), dtype=np.float64)
    return steps / forwards


class SpeculationPanel(Panel):
    key = "speculation"
    priority = 40

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._canvas = canvas()
        self._legend = legend_row()
        self._legend.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self._legend)
        layout.addWidget(self._canvas, 1)
        self._accept = self._canvas.addPlot(row=0, col=0)
        self._rate = self._canvas.addPlot(row=1, col=0)
        self._accept.setYRange(0, 1.05, padding=0)
        self._accept.setMouseEnabled(False, False)
        self._rate.setMouseEnabled(False, False)
        self._plain = pg.InfiniteLine(pos=1.0, angle=0, movable=False,
                                      pen=pg.mkPen(style.PLOT_FOREGROUND, width=1, style=Qt.PenStyle.DashLine))
        self._rate.addItem(self._plain, ignoreBounds=True)
        self._step = step_line(self._rate)
        self._bars: dict[str, pg.BarGraphItem] = {}
        self._lines: dict[str, pg.PlotDataItem] = {}
        self._shown: tuple[RunHistory, int] | None = None
        self.legend_entries: list[tuple] = []
        self.retranslate()

    def title(self) -> str:
        return self.tr("Speculation")

    def help_text(self) -> str:
        return self.tr(
            "A speculative engine lets a cheap draft propose k tokens and the target check them all in one "
            "forward, keeping the drafts up to the first it would not have picked, plus its own next token. "
            "Top: of the rounds that drafted a token at each position, the share the target kept (a later "
            "position is kept only if every one before it was). Bottom: tokens per target forward so far; "
            "plain decoding makes one token per forward (dashed line). The tokens are the same as plain "
            "decoding's: only the number of target forwards changes.")

    def retranslate(self) -> None:
        style.style_plot(self._accept, self.tr("drafts kept, by position in the round"), self.tr("kept"),
                         self.tr("draft position"))
        style.style_plot(self._rate, self.tr("tokens per target forward"), self.tr("tokens"), self.tr("step"))
        self.setToolTip(self.help_text())
        if self._shown is not None:
            self.show_step(*self._shown)

    def clear(self) -> None:
        for bars in self._bars.values():
            self._accept.removeItem(bars)
        for line in self._lines.values():
            self._rate.removeItem(line)
        self._bars.clear()
        self._lines.clear()
        self._step.hide()
        self._shown = None
        self.legend_entries = []
        set_legend(self._legend, [])

    def plot_grid(self) -> tuple[int, int]:
        return 1, 2

    def export_items(self) -> list:
        return [self._accept, self._rate]

    def show_step(self, history: RunHistory, step: int) -> None:
        self._shown = (history, step)
        engines = [e for e in history.engines if history.traces.get(e)]
        spec = [e for e in engines if history.traces[e][0].spec_k is not None]
        entries = []
        width = 0.8 / max(len(spec), 1)
        top = 1.0
        for order, engine in enumerate(engines):
            traces = history.traces[engine]
            k = engine_step(history, engine, step)
            color = style.engine_color(engine, order)
            rate = tokens_per_forward(traces, k)
            top = max(top, float(rate.max()))
            line = self._lines.get(engine)
            if line is None:
                line = self._lines[engine] = self._rate.plot(pen=style.engine_pen(engine, order))
            line.setData(np.arange(len(rate)), rate)
            if engine not in spec:
                continue
            drafted, kept = acceptance(traces, k)
            share = np.divide(kept, drafted, out=np.zeros(len(kept)), where=drafted > 0)
            x = np.arange(1, len(share) + 1) + (spec.index(engine) - (len(spec) - 1) / 2) * width
            bars = self._bars.get(engine)
            if bars is None:
                bars = self._bars[engine] = pg.BarGraphItem(x=x, height=share, width=width,
                                                            brush=pg.mkBrush(color), pen=pg.mkPen(color))
                self._accept.addItem(bars)
            else:
                bars.setOpts(x=x, height=share, width=width)
            proposed = int(drafted.sum()) if len(drafted) else 0
            entries.append((color, self.tr("{engine}: {rate} tokens per target forward, {kept} of drafts kept "
                                           "({n} drafted)").format(
                engine=style.engine_label(engine), rate=f"{rate[-1]:.2f}",
                kept=share_text(kept.sum() / proposed) if proposed else "-", n=proposed)))
        for gone in [e for e in self._bars if e not in spec]:
            self._accept.removeItem(self._bars.pop(gone))
        for gone in [e for e in self._lines if e not in engines]:
            self._rate.removeItem(self._lines.pop(gone))
        if not spec:
            entries.append((style.PLOT_FOREGROUND, self.tr("no speculative engine in this run: every engine makes "
                                                            "one token per forward")))
        else:
            entries.append((style.PLOT_FOREGROUND, self.tr("plain decoding: 1 token per forward"), "dashed"))
        self.legend_entries = entries  # (colour, text[, mark]) as the legend shows them
        set_legend(self._legend, entries)
        k_max = max((history.traces[e][0].spec_k or 0 for e in spec), default=1)
        self._accept.setXRange(0.4, k_max + 0.6, padding=0)
        self._accept.getAxis("bottom").setTicks([[(j, str(j)) for j in range(1, k_max + 1)]])
        n = max((len(history.traces[e]) for e in engines), default=1)
        self._rate.setXRange(0, max(n - 1, 1), padding=0.02)
        self._rate.setYRange(0, top * 1.1, padding=0)
        self._step.setPos(step)
        self._step.show()
