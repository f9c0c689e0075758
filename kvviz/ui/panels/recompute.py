"""Recompute count: how many times each position's K/V has been computed, steps 0..selected.

Summed from each step's [pos_start, pos_stop) only: naive's staircase and the caches' flat 1 come
out of the traces, not out of a formula per engine.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout

from kvviz.trace import StepTrace
from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._plots import canvas, engine_step, legend_row, set_legend
from kvviz.ui.panels.base import Panel


def compute_counts(traces: list[StepTrace]) -> np.ndarray:
    """int64 [n]: times each position 0..n-1 was computed over `traces`, n = the last pos_stop."""
    n = max((t.pos_stop for t in traces), default=0)
    diff = np.zeros(n + 1, dtype=np.int64)
    starts = np.fromiter((t.pos_start for t in traces), dtype=np.int64, count=len(traces))
    stops = np.fromiter((t.pos_stop for t in traces), dtype=np.int64, count=len(traces))
    np.add.at(diff, starts, 1)
    np.add.at(diff, stops, -1)
    return np.cumsum(diff[:-1])


class RecomputePanel(Panel):
    key = "recompute"

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._canvas = canvas()
        self._plot = self._canvas.addPlot()
        self._plot.hideButtons()
        style.style_plot(self._plot, left=self.tr("times computed (per layer)"), bottom=self.tr("token position"))
        self._legend = legend_row()
        self._prompt_line = pg.InfiniteLine(
            angle=90, pen=pg.mkPen("#606060", width=1, style=Qt.PenStyle.DotLine),
            label=self.tr("end of prompt"),
            labelOpts={"position": 0.97, "color": style.MUTED_TEXT, "anchors": [(1, 0), (1, 0)]})
        self._plot.addItem(self._prompt_line, ignoreBounds=True)
        self._prompt_line.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self._legend)
        layout.addWidget(self._canvas, 1)
        self._curves: dict[str, pg.PlotDataItem] = {}
        self._counts: dict[str, np.ndarray] = {}
        self.setToolTip(self.help_text())

    def title(self) -> str:
        return self.tr("Recompute count")

    def help_text(self) -> str:
        return self.tr(
            "K_i and V_i depend only on token i and the frozen weights, so they never change once "
            "computed. Naive decoding recomputes them at every step: the earliest positions have been "
            "computed once per step so far. A cache computes each position exactly once.")

    def counts(self, engine: str) -> np.ndarray:
        """Times each position's K/V had been computed by the selected step, as drawn."""
        return self._counts.get(engine, np.zeros(0, dtype=np.int64)).copy()

    def clear(self) -> None:
        for curve in self._curves.values():
            self._plot.removeItem(curve)
        self._legend.clear()
        self._curves.clear()
        self._counts.clear()
        self._prompt_line.hide()

    def _ensure_curves(self, engines: list[str]) -> None:
        if list(self._curves) == engines:
            return
        self.clear()
        for order, engine in enumerate(engines):
            color = style.engine_color(engine, order)
            fill = pg.mkBrush(*style.rgba(color, 45)) if order == 0 else None
            curve = pg.PlotDataItem(stepMode="center", pen=style.engine_pen(engine, order, width=2.5),
                                    fillLevel=0 if fill else None, fillBrush=fill)
            self._plot.addItem(curve)
            self._curves[engine] = curve

    def show_step(self, history: RunHistory, step: int) -> None:
        engines = [e for e in history.engines if history.traces.get(e)]
        if not engines:
            self.clear()
            return
        self._ensure_curves(engines)
        n_max = 0
        for engine in engines:
            counts = compute_counts(history.upto(engine, engine_step(history, engine, step)))
            self._counts[engine] = counts
            n_max = max(n_max, len(counts))
            self._curves[engine].setData(np.arange(len(counts) + 1), counts)
        set_legend(self._legend, [
            (style.engine_color(e, i), self.tr("{engine}: {total} K/V computed").format(
                engine=e, total=int(self._counts[e].sum())), "dashed" if style.ENGINE_DASH.get(e) else "line")
            for i, e in enumerate(engines)])
        n_prompt = len(history.info.prompt_ids)
        self._prompt_line.setPos(n_prompt)
        self._prompt_line.setVisible(0 < n_prompt < n_max)
        top = max((int(c.max()) for c in self._counts.values() if len(c)), default=1)
        self._plot.setXRange(0, max(n_max, 1), padding=0.02)
        self._plot.setYRange(0, top + 0.5, padding=0.05)

    def export_items(self) -> list:
        return [self._plot]
