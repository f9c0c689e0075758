"""A panel of per-step line plots: one curve per engine per plot, a marker at the selected step.

Latency and bytes panels are instances: each plot is a StepTrace field, per step or cumulative.
Curves are created once per engine set and fed with setData; long runs are peak-downsampled.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QVBoxLayout

from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._plots import BytesAxis, canvas, engine_step, legend_row, series, set_legend, step_line
from kvviz.ui.panels.base import Panel


@dataclass(frozen=True)
class PlotSpec:
    key: str
    title: str
    left: str  # y-axis label
    field: str  # StepTrace field plotted
    cumulative: bool = False
    byte_units: bool = False  # y ticks in B / KiB / MiB
    left_units: str | None = None
    dashed: bool = False
    row: int = 0
    col: int = 0


class SeriesPanel(Panel):
    """Subclasses provide `plot_specs()` and may override `legend_text()`."""

    log_option = True  # offer the log-scale checkbox

    def plot_specs(self) -> list[PlotSpec]:
        raise NotImplementedError

    def legend_text(self, engine: str, history: RunHistory, step: int) -> str:
        return engine

    def log_label(self) -> str:
        return self.tr("log scale")

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._specs = self.plot_specs()
        self._canvas = canvas()
        self._log = QCheckBox(self.log_label())
        self._log.toggled.connect(self._on_log_toggled)
        self._legend = legend_row()
        top = QHBoxLayout()
        top.addWidget(self._legend, 1)
        top.addWidget(self._log)
        self._log.setVisible(self.log_option)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(top)
        layout.addWidget(self._canvas, 1)
        self._plots: dict[str, pg.PlotItem] = {}
        self._lines: dict[str, pg.InfiniteLine] = {}
        self._markers: dict[str, pg.ScatterPlotItem] = {}
        first: pg.PlotItem | None = None
        for spec in self._specs:
            axis = {"left": BytesAxis("left")} if spec.byte_units else {}
            plot = self._canvas.addPlot(row=spec.row, col=spec.col, axisItems=axis)
            plot.hideButtons()
            plot.setDownsampling(auto=True, mode="peak")
            plot.setClipToView(True)
            style.style_plot(plot, title=spec.title, left=spec.left, bottom=self.tr("step"),
                             left_units=spec.left_units)
            if first is None:
                first = plot
            else:
                plot.setXLink(first)
            self._plots[spec.key] = plot
            self._lines[spec.key] = step_line(plot)
            marker = pg.ScatterPlotItem(size=8, pen=pg.mkPen("w", width=1))
            marker.setZValue(60)
            plot.addItem(marker)
            self._markers[spec.key] = marker
        self._curves: dict[tuple[str, str], pg.PlotDataItem] = {}
        self._engines: list[str] = []
        self._data: dict[tuple[str, str], np.ndarray] = {}
        self._data_key: tuple[int, int] | None = None
        self._shown: tuple[RunHistory, int] | None = None
        self.setToolTip(self.help_text())

    # -- data ---------------------------------------------------------------------------------
    def curve(self, plot_key: str, engine: str) -> np.ndarray:
        """The y values drawn for `engine` in plot `plot_key` (one per recorded step)."""
        return self._data.get((plot_key, engine), np.zeros(0)).copy()

    def plot_keys(self) -> list[str]:
        return [s.key for s in self._specs]

    def set_log_scale(self, on: bool) -> None:
        self._log.setChecked(on)

    # -- drawing ------------------------------------------------------------------------------
    def clear(self) -> None:
        for (plot_key, _engine), curve in self._curves.items():
            self._plots[plot_key].removeItem(curve)
        self._legend.clear()
        self._curves.clear()
        self._engines = []
        self._data.clear()
        self._data_key = None
        self._shown = None
        for key in self._plots:
            self._lines[key].hide()
            self._markers[key].clear()

    def _on_log_toggled(self, on: bool) -> None:
        for plot in self._plots.values():
            plot.setLogMode(y=on)
        if self._shown is not None:
            self.show_step(*self._shown)  # the step markers are placed in the axis' own units

    def _ensure_curves(self, engines: list[str]) -> None:
        if self._engines == engines:
            return
        self.clear()
        self._engines = list(engines)
        for spec in self._specs:
            plot = self._plots[spec.key]
            for order, engine in enumerate(engines):
                pen = style.engine_pen(engine, order, width=2.0)
                if spec.dashed:
                    pen.setWidthF(1.0)  # see style.engine_pen: wide dashed pens are slow
                    pen.setDashPattern([5, 3])
                curve = pg.PlotDataItem(pen=pen)
                curve.setZValue(2 if pen.style() != Qt.PenStyle.SolidLine else 1)
                plot.addItem(curve)
                self._curves[(spec.key, engine)] = curve

    def show_step(self, history: RunHistory, step: int) -> None:
        engines = [e for e in history.engines if history.traces.get(e)]
        if not engines:
            self.clear()
            return
        self._ensure_curves(engines)
        self._shown = (history, step)
        data_key = (id(history), history.version)
        if data_key != self._data_key:  # new steps recorded: re-read the series
            self._data_key = data_key
            for spec in self._specs:
                for engine in engines:
                    y = series(history, engine, spec.field)
                    if spec.cumulative:
                        y = np.cumsum(y)
                    self._data[(spec.key, engine)] = y
                    self._curves[(spec.key, engine)].setData(np.arange(len(y)), y)
        set_legend(self._legend, [
            (style.engine_color(e, i), self.legend_text(e, history, engine_step(history, e, step)),
             "dashed" if style.ENGINE_DASH.get(e) else "line")
            for i, e in enumerate(engines)])
        log = self._log.isChecked()
        for spec in self._specs:
            self._lines[spec.key].setPos(step)
            self._lines[spec.key].show()
            spots = []
            for order, engine in enumerate(engines):
                k = engine_step(history, engine, step)
                y = self._data[(spec.key, engine)]
                if 0 <= k < len(y) and (not log or y[k] > 0):
                    value = np.log10(y[k]) if log else y[k]
                    spots.append({"pos": (k, value), "brush": pg.mkBrush(style.engine_color(engine, order))})
            self._markers[spec.key].setData(spots)

    def export_items(self) -> list:
        return list(self._plots.values())
