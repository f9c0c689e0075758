"""Latency per request: time to first token (above) and time per output token (below), a bar per
request and scheduler, as of the step shown (a request without its first token yet has no bar).

Reads ServeHistory.latency only (numpy per request, from the steps' latency_ms).
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QWidget

from kvviz.serving.history import ServeHistory
from kvviz.serving.words import panel_words
from kvviz.ui import style
from kvviz.ui.qtutil import translator
from kvviz.ui.serve import colors
from kvviz.ui.serve.panels._plots import TwoPlotPanel

BAR_SHARE = 0.8  # of a request's width, split among the schedulers


class LatencyPanel(TwoPlotPanel):
    key = "latency"
    x_grid = False

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ttft_plot, self.tpot_plot = self.plots
        self.bars: dict[str, tuple[pg.BarGraphItem, pg.BarGraphItem]] = {}
        self.values: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # what the bars show (tests read it)
        self._n = 0  # requests on the x axis
        self.retranslate()

    def help_text(self) -> str:
        return self.tr("Time to first token (from the request's arrival step to the step that emitted its first "
                       "token) and time per output token after it, per request and scheduler, as of this step.")

    def retranslate(self) -> None:
        ttft, tpot, request = panel_words(translator)["latency_axes"]
        self.ttft_plot.setLabel("left", ttft, units="ms", **style.LABEL_STYLE)
        self.tpot_plot.setLabel("left", tpot, units="ms", **style.LABEL_STYLE)
        self.tpot_plot.setLabel("bottom", request, **style.LABEL_STYLE)
        for plot in (self.ttft_plot, self.tpot_plot):
            plot.getAxis("left").enableAutoSIPrefix(False)

    def clear(self) -> None:
        for k in list(self.bars):
            self._drop(k)
        self.show_values(False)

    def _drop(self, k: str) -> None:
        ttft, tpot = self.bars.pop(k)
        self.ttft_plot.removeItem(ttft)
        self.tpot_plot.removeItem(tpot)
        self.values.pop(k, None)

    def show_step(self, run: ServeHistory, step: int, request: int | None) -> None:
        shown = [k for k in run.schedulers if run.n_steps(k)]
        self.show_legend(shown)
        for k in list(self.bars):
            if k not in shown:
                self._drop(k)
        n = run.n_requests()
        width = BAR_SHARE / max(1, len(shown))
        for i, k in enumerate(shown):
            ttft, tpot = run.latency(k, step)
            self.values[k] = (ttft, tpot)
            x = np.arange(n) - BAR_SHARE / 2 + width * (i + 0.5)
            if k not in self.bars:
                brush = pg.mkBrush(colors.scheduler_color(k))
                self.bars[k] = (pg.BarGraphItem(x=[], height=[], width=width, brush=brush),
                                pg.BarGraphItem(x=[], height=[], width=width, brush=brush))
                self.ttft_plot.addItem(self.bars[k][0])
                self.tpot_plot.addItem(self.bars[k][1])
            for bar, values in zip(self.bars[k], (ttft, tpot)):
                known = ~np.isnan(values)
                bar.setOpts(x=x[known], height=values[known], width=width)
        self.show_values(bool(shown))
        self.ttft_plot.setXRange(-0.6, max(0, n - 1) + 0.6, padding=0)
        self._n = n
        self._set_ticks()

    def _set_ticks(self) -> None:
        n = self._n
        ticks = [[(r, str(r)) for r in range(0, n, self.request_spacing(n))]]  # from the first request on
        for plot in (self.ttft_plot, self.tpot_plot):
            plot.getAxis("bottom").setTicks(ticks)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        if self._n:
            QTimer.singleShot(0, self._set_ticks)  # once the plots have their new width

    def request_spacing(self, n: int) -> int:
        """Requests between two numbered ones: the least of 1, 2, 5, 10, ... at which the numbers stand
        apart in the plot's width."""
        width = max(1.0, self.tpot_plot.getViewBox().width())
        label = self.fontMetrics().horizontalAdvance(str(max(0, n - 1))) + self.fontMetrics().averageCharWidth()
        spacing, scale = 1, 1
        while n / spacing * label > width and spacing < n:
            for m in (1, 2, 5):
                spacing = m * scale
                if n / spacing * label <= width:
                    break
            scale *= 10
        return spacing
