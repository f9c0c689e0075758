"""Pool use and batch size over the steps, one line per scheduler: blocks held by some request (above)
and requests computed in the step (below); a preemption is a cross on the pool line; the step shown
is a vertical line. vLLM beside them is one more line: the blocks in use and the requests running it reported.

Reads ServeHistory.series and vllm_series only (numpy per step). Plot items are made once per scheduler and fed.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QWidget

from kvviz.serving.history import VLLM, ServeHistory
from kvviz.serving.words import panel_words
from kvviz.ui import style
from kvviz.ui.qtutil import translator
from kvviz.ui.serve import colors
from kvviz.ui.serve.panels._plots import TwoPlotPanel


class UsagePanel(TwoPlotPanel):
    key = "usage"
    counts = (False, True)  # the batch: requests

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.pool_plot, self.batch_plot = self.plots
        self.curves: dict[str, tuple] = {}
        self.add_step_lines()
        self.retranslate()

    def help_text(self) -> str:
        return self.tr("Above: KV blocks held by some request after each step (of the pool's size); a cross is a "
                       "preemption. Below: requests computed in each step (the batch). One line per scheduler; "
                       "vLLM's: the blocks in use and the requests running it reported.")

    def retranslate(self) -> None:
        blocks, batch, step = panel_words(translator)["usage"]
        self.pool_plot.setLabel("left", blocks, **style.LABEL_STYLE)
        self.batch_plot.setLabel("left", batch, **style.LABEL_STYLE)
        self.batch_plot.setLabel("bottom", step, **style.LABEL_STYLE)

    def clear(self) -> None:
        for k in list(self.curves):
            self._drop(k)
        self.show_values(False)

    def _drop(self, k: str) -> None:
        for item in self.curves.pop(k):
            plot = self.pool_plot if item.getViewBox() is self.pool_plot.getViewBox() else self.batch_plot
            plot.removeItem(item)

    def _items(self, k: str) -> tuple:
        if k not in self.curves:
            pen = pg.mkPen(colors.scheduler_color(k), width=2)
            pool = self.pool_plot.plot([], [], pen=pen)
            crosses = pg.ScatterPlotItem(symbol="x", size=11, pen=pg.mkPen(colors.scheduler_color(k), width=2),
                                         brush=None)
            self.pool_plot.addItem(crosses)
            batch = self.batch_plot.plot([], [], pen=pen, stepMode=None)
            self.curves[k] = (pool, crosses, batch)
        return self.curves[k]

    def show_step(self, run: ServeHistory, step: int, request: int | None) -> None:
        shown = [k for k in run.schedulers if run.n_steps(k)] + ([VLLM] if run.n_steps(VLLM) else [])
        self.show_legend(shown)
        for k in list(self.curves):
            if k not in shown:
                self._drop(k)
        self.show_values(bool(shown))
        top = 1.0
        for k in shown:
            s = run.vllm_series() if k == VLLM else run.series(k)
            x = np.asarray(s["step"], dtype=float)  # each record at its first step (a stretch is one record)
            pool, crosses, batch = self._items(k)
            pool.setData(x, s["used"])
            hit = s["preemptions"] > 0
            crosses.setData(x[hit], s["used"][hit])
            batch.setData(x, s["batch"])
            top = max(top, float(run.vllm.run.settings.blocks if k == VLLM else run.settings[k].blocks))
        self.pool_plot.setYRange(0, top * 1.05, padding=0)
        self.set_step(step)
