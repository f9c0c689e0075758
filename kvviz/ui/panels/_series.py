"""A panel of per-step line plots: one curve per engine per plot, a marker at the selected step.

Latency, bytes and cache memory panels are instances: each series is a StepTrace field, per step or
cumulative, drawn into one of the panel's plots.
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
    """One plot of the panel."""

    key: str
    title: str
    left: str  # y-axis label
    byte_units: bool = False  # y ticks in B / KiB / MiB
    left_units: str | None = None
    row: int = 0
    col: int = 0


@dataclass(frozen=True)
class SeriesSpec:
    """One StepTrace field, per step or cumulative, drawn as a curve per engine into plot `plot`."""

    key: str
    plot: str
    field: str
    cumulative: bool = False
    dashed: bool = False  # every engine's curve dashed: tells this series from a solid one


class SeriesPanel(Panel):
    """Subclasses provide `plot_specs()` and `series_specs()` and may override `legend_text()`."""

    log_option = True  # offer the log-scale checkbox

    def plot_specs(self) -> list[PlotSpec]:
        raise NotImplementedError

    def series_specs(self) -> list[SeriesSpec]:
        raise NotImplementedError

    def legend_text(self, engine: str, history: RunHistory, step: int) -> str:
        return engine

    def legend_entries(self, engines: list[str], history: RunHistory, step: int) -> list[tuple]:
        """(colour, text, mark) per legend entry: one per engine, with legend_text."""
        return [(style.engine_color(e, i), self.legend_text(e, history, engine_step(history, e, step)),
                 "dashed" if style.ENGINE_DASH.get(e) else "line") for i, e in enumerate(engines)]

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._plot_specs = self.plot_specs()
        self._specs = self.series_specs()
        self._canvas = canvas()
        self._log = QCheckBox(self.tr("log scale"))
        self._log.toggled.connect(self._on_log_toggled)
        self._legend = legend_row()
        top = QHBoxLayout()
        top.addWidget(self._legend, 1)
        top.addWidget(self._log, 0, Qt.AlignmentFlag.AlignTop)
        self._log.setVisible(self.log_option)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(top)
        layout.addWidget(self._canvas, 1)
        self._plots: dict[str, pg.PlotItem] = {}
        self._lines: dict[str, pg.InfiniteLine] = {}
        self._markers: dict[str, pg.ScatterPlotItem] = {}
        last_row = max((p.row for p in self._plot_specs), default=0)
        first: pg.PlotItem | None = None
        for spec in self._plot_specs:
            axis = {"left": BytesAxis("left")} if spec.byte_units else {}
            plot = self._canvas.addPlot(row=spec.row, col=spec.col, axisItems=axis)
            plot.hideButtons()
            plot.setDownsampling(auto=True, mode="peak")
            plot.setClipToView(True)
            style.style_plot(plot, title=spec.title, left=spec.left,
                             bottom=self.tr("step") if spec.row == last_row else "", left_units=spec.left_units)
            if first is None:
                first = plot
            else:
                plot.setXLink(first)
            self._plots[spec.key] = plot
            self._lines[spec.key] = step_line(plot)
        for series_spec in self._specs:
            marker = pg.ScatterPlotItem(size=8, pen=pg.mkPen("w", width=1))
            marker.setZValue(60)
            self._plots[series_spec.plot].addItem(marker)
            self._markers[series_spec.key] = marker
        self._curves: dict[tuple[str, str], pg.PlotDataItem] = {}
        self._engines: list[str] = []
        self._data: dict[tuple[str, str], np.ndarray] = {}
        self._data_key: tuple[int, int] | None = None
        self._shown: tuple[RunHistory, int] | None = None
        self.setToolTip(self.help_text())

    # -- data ---------------------------------------------------------------------------------
    def curve(self, series_key: str, engine: str) -> np.ndarray:
        """The y values drawn for `engine` in series `series_key` (one per recorded step)."""
        return self._data.get((series_key, engine), np.zeros(0)).copy()

    def series_keys(self) -> list[str]:
        return [s.key for s in self._specs]

    def set_log_scale(self, on: bool) -> None:
        self._log.setChecked(on)

    # -- drawing ------------------------------------------------------------------------------
    def clear(self) -> None:
        plot_of = {spec.key: spec.plot for spec in self._specs}
        for (series_key, _engine), curve in self._curves.items():
            self._plots[plot_of[series_key]].removeItem(curve)
        self._legend.clear()
        self._curves.clear()
        self._engines = []
        self._data.clear()
        self._data_key = None
        self._shown = None
        for line in self._lines.values():
            line.hide()
        for marker in self._markers.values():
            marker.clear()

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
            plot = self._plots[spec.plot]
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
        set_legend(self._legend, self.legend_entries(engines, history, step))
        log = self._log.isChecked()
        for line in self._lines.values():
            line.setPos(step)
            line.show()
        for spec in self._specs:
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
