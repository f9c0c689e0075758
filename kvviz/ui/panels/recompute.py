"""Recompute count: how many times each position's K/V has been computed, steps 0..selected.

Summed from each step's [pos_start, pos_stop) only: naive's staircase and the caches' flat 1 come
out of the traces, not out of a formula per engine.
"""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout

from kvviz import catalog
from kvviz.page.said import Engine
from kvviz.page.said_compare import recompute_legend
from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._plots import (
    TraceColumns,
    canvas,
    engine_step,
    legend_row,
    on_left_click,
    set_legend,
    step_of_position,
    view_point,
)
from kvviz.ui.panels._series import WholeAxis
from kvviz.ui.panels._shown import shown_engines
from kvviz.ui.panels.base import Panel, said_text


def counts_from(starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """int64 [n]: times each position 0..n-1 was computed by steps computing [pos_start, pos_stop), n = the
    largest pos_stop: +1 at each start, -1 at each stop, summed along the positions."""
    n = int(stops.max(initial=0))
    starts, stops = starts.astype(np.int64), stops.astype(np.int64)
    diff = np.bincount(starts, minlength=n + 1)[: n + 1] - np.bincount(stops, minlength=n + 1)[: n + 1]
    return np.cumsum(diff[:-1])


def staircase(counts: np.ndarray, max_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """(edges, heights) of a stepMode="center" curve drawing `counts` with at most `max_bins` steps:
    runs of equal counts become one step (exact); beyond max_bins, each step is the highest count of
    its few positions, as peak downsampling would keep it (a step is then under a pixel wide)."""
    n = len(counts)
    starts = np.concatenate(([0], np.flatnonzero(np.diff(counts)) + 1))
    if len(starts) <= max_bins:
        return np.append(starts, n).astype(np.float64), counts[starts]
    per = -(-n // max_bins)
    m = -(-n // per)
    padded = np.zeros(m * per, dtype=counts.dtype)
    padded[:n] = counts
    edges = np.minimum(np.arange(m + 1) * per, n).astype(np.float64)
    return edges, padded.reshape(m, per).max(axis=1)


class RecomputePanel(Panel):
    key = "recompute"
    picks_steps = True  # a click on a token position shows the step that first computed its K/V

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._canvas = canvas()
        self._plot = self._canvas.addPlot(axisItems={"left": WholeAxis("left"), "bottom": WholeAxis("bottom")})
        self._plot.hideButtons()
        self._plot.disableAutoRange()  # show_step moves the ranges, only when the counts outgrow them
        self._legend = legend_row()
        self._prompt_line = pg.InfiniteLine(
            angle=90, pen=pg.mkPen("#606060", width=1, style=Qt.PenStyle.DotLine), label="",
            labelOpts={"position": 0.97, "color": style.MUTED_TEXT, "anchors": [(1, 0), (1, 0)]})
        self._plot.addItem(self._prompt_line, ignoreBounds=True)
        self._prompt_line.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self._legend)
        layout.addWidget(self._canvas, 1)
        self._curves: dict[str, pg.PlotDataItem] = {}
        self._counts: dict[str, np.ndarray] = {}
        self._columns = TraceColumns(("pos_start", "pos_stop", "kv_projections"))
        self._drawn: dict[str, tuple] = {}  # engine -> what its curve shows (steps read, step)
        self._range: tuple = ()
        self._shown: tuple[RunHistory, int] | None = None
        on_left_click(self._canvas.scene(), self._on_clicked)
        self.retranslate()

    def _on_clicked(self, scene_pos) -> None:
        point = view_point(self._plot, scene_pos)
        if point is None or self._shown is None:
            return
        history = self._shown[0]
        engine = next((e for e in history.engines if history.traces.get(e)), None)
        step = step_of_position(history, engine, math.floor(point.x())) if engine else None
        if step is not None:
            self.step_picked.emit(step)

    def retranslate(self) -> None:
        style.style_plot(self._plot, left=self.tr("times computed"), bottom=self.tr("token position"))
        self._prompt_line.label.setFormat(self.tr("end of prompt"))
        self.setToolTip(self.help_text())
        if self._shown is not None:
            self.show_step(*self._shown)  # the legend

    def title(self) -> str:
        return self.tr("Recompute count")

    def help_text(self) -> str:
        return self.tr(
            "K_i and V_i depend only on token i and the frozen weights, so they never change once "
            "computed. Naive decoding recomputes them at every step: the earliest positions have been "
            "computed once per step so far. A cache computes each position exactly once. The curve "
            "counts one layer (every layer computes the same); the legend counts K/V over all layers "
            "(token \u00d7 layer), as the summary does.")

    def kv_computed(self, history: RunHistory, engine: str, step: int) -> int:
        """K/V projections (token x layer) the engine made up to `step`, as the legend gives them: the
        summary's "K/V computed" figure. The curve counts one layer (each computes the same), so its
        area is this over the model's layers."""
        k = engine_step(history, engine, step)
        return int(self._columns.totals(history, engine, "kv_projections")[k]) if k >= 0 else 0

    def counts(self, engine: str) -> np.ndarray:
        """Times each position's K/V had been computed by the selected step, as drawn."""
        return self._counts.get(engine, np.zeros(0, dtype=np.int64)).copy()

    def clear(self) -> None:
        for curve in self._curves.values():
            self._plot.removeItem(curve)
        self._legend.clear()
        self._curves.clear()
        self._counts.clear()
        self._columns.clear()
        self._drawn.clear()
        self._range = ()
        self._shown = None
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
        engines = shown_engines(self, history, step, self._ensure_curves)
        if not engines:
            return
        n_max = 0
        for engine in engines:
            k = engine_step(history, engine, step)
            starts = self._columns.values(history, engine, "pos_start")
            drawn = (id(starts.base), k)
            if self._drawn.get(engine) != drawn or engine not in self._counts:
                self._drawn[engine] = drawn
                counts = counts_from(starts[: k + 1], self._columns.values(history, engine, "pos_stop")[: k + 1])
                self._counts[engine] = counts
                bins = max(64, int(self._plot.getViewBox().width()))
                self._curves[engine].setData(*staircase(counts, bins))
            n_max = max(n_max, len(self._counts[engine]))
        set_legend(self._legend, [
            (style.engine_color(e, i), said_text(recompute_legend(Engine(e, 0), self.kv_computed(history, e, step))),
             "dashed" if catalog.engine_dash(e) else "line")
            for i, e in enumerate(engines)])
        n_prompt = len(history.info.prompt_ids)
        self._prompt_line.setPos(n_prompt)
        self._prompt_line.setVisible(0 < n_prompt < n_max)
        top = max((int(c.max()) for c in self._counts.values() if len(c)), default=1)
        # The run's planned length holds the x axis still while it streams; y grows with headroom.
        x_top = max(n_max, n_prompt + history.info.max_new_tokens, 1)
        y_top = top + 0.5 if top < 4 else _headroom(top + 0.5)
        old = self._range
        if not old or old[0] != x_top or top + 0.5 > old[1] or y_top < old[1] / 2:
            self._range = (x_top, y_top)
            self._plot.setRange(xRange=(0, x_top), yRange=(0, y_top), padding=0.02)

    priority = 60

    def export_items(self) -> list:
        return [self._plot]


def _headroom(value: float) -> float:
    """A round range top above `value` (x1.25 or more), so the axis holds while counts grow."""
    target = value * 1.25
    power = 10.0 ** int(np.floor(np.log10(target)))
    return next(m * power for m in (1, 1.5, 2, 3, 4, 5, 6, 8, 10) if m * power >= target)
