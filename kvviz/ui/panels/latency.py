"""Latency: each engine's step time and its running total, and the memory wall: the bandwidth each
step achieved (the bytes it must read over its time) against the machine's read ceiling.

Reads StepTrace.latency_ms and positions (measured by the engine with the device synchronised) and
the run's wall figures in RunInfo (weights read per forward, K/V bytes per position, the read ceiling;
a trace saved before it was measured: the copy bandwidth, labelled so).
"""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg

from kvviz.costs.wall import WallShape
from kvviz.page.said import Engine
from kvviz.page.said_compare import ceiling_said, latency_legend
from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._series import PlotSpec, SeriesPanel, SeriesSpec
from kvviz.ui.panels.base import said_text

COPY_LINE = "#c62828"  # the machine's read ceiling (an older trace's copy bandwidth): the wall


class LatencyPanel(SeriesPanel):
    key = "latency"
    extra_fields = (("decode_ms", lambda t: t.latency_ms if t.phase == "decode" else 0.0),
                    ("decode_steps", lambda t: t.phase == "decode"))

    _copy_gbps: float | None = None  # the wall's figure: RunInfo.bandwidth_gbps(), of kind _ceiling_kind
    _ceiling_kind: str | None = None

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        # A computed series: it needs the run's figures besides the trace, so its getter is set here,
        # holding them (not the panel: a panel its own columns refer to outlives its widget).
        self._reader = _BandwidthReader()
        self.columns.getters["read_gbps"] = self._reader
        pen = pg.mkPen(COPY_LINE, width=1.5)
        pen.setDashPattern([6, 4])
        self._copy_line = pg.InfiniteLine(angle=0, movable=False, pen=pen, label="",
                                          labelOpts=dict(position=0.02, color=COPY_LINE, anchors=[(0, 1), (0, 1)]))
        self._copy_line.setZValue(5)
        self._copy_line.hide()
        self._plots["bandwidth"].addItem(self._copy_line)

    priority = 20

    def plot_specs(self) -> list[PlotSpec]:
        return [
            PlotSpec("step", self.tr("per step"), self.tr("latency"), left_units="ms"),
            PlotSpec("total", self.tr("total so far"), self.tr("time"), left_units="ms", row=1),
            PlotSpec("bandwidth", self.tr("weights + K/V read / step time"), self.tr("read"), left_units="GB/s",
                     row=2),
        ]

    def series_specs(self) -> list[SeriesSpec]:
        return [
            SeriesSpec("step", "step", "latency_ms"),
            SeriesSpec("total", "total", "latency_ms", cumulative=True),
            SeriesSpec("read_gbps", "bandwidth", "read_gbps"),
        ]

    def title(self) -> str:
        return self.tr("Latency")

    def help_text(self) -> str:
        return self.tr(
            "The legend gives each engine's mean decode step. Step 0 is the prefill: one forward over "
            "the whole prompt. After it, naive's step time grows with the sequence because it re-runs "
            "everything, while a cached step feeds one token. On a tiny model Python overhead dominates "
            "the clock, so also look at the work saved (recompute count, bytes): the time gap widens as "
            "sequences and models grow. Bottom: every step reads every weight once and the K/V of every "
            "position it attends over; those bytes over the step's time are the bandwidth it achieved, "
            "drawn against this machine's measured read ceiling (dashed: a matrix-vector product's read rate "
            "at the run's threads): decode is bound by memory, "
            "not arithmetic.")

    def show_step(self, history: RunHistory, step: int) -> None:
        wall = history.info.wall()
        if wall != self._reader.wall:
            self._reader.wall = wall
            self.columns.clear()  # read the bandwidth again with the run's figures
            self._data_key = None
        self._copy_gbps = history.info.bandwidth_gbps()  # before the ranges are set: they hold it
        self._ceiling_kind = history.info.ceiling_kind()
        super().show_step(history, step)
        self._show_copy_line()

    def clear(self) -> None:
        super().clear()
        if hasattr(self, "_copy_line"):
            self._copy_line.hide()

    def _show_copy_line(self) -> None:
        copy = self._copy_gbps
        if copy is None:
            self._copy_line.hide()
            return
        self._copy_line.setPos(math.log10(copy) if self._log.isChecked() else copy)
        self._copy_line.label.setText(said_text(ceiling_said(copy, self._ceiling_kind)))
        self._copy_line.show()

    def y_values(self, plot_key: str) -> list[np.ndarray]:
        values = [np.nan_to_num(y, nan=0.0) for y in super().y_values(plot_key)]
        if plot_key == "bandwidth" and self._copy_gbps is not None:
            values.append(np.array([self._copy_gbps]))
        return values

    def kept_room(self, plot_key: str) -> tuple[float, float] | None:
        """Room above the read ceiling's line for its label (drawn above the line), and the line's pen."""
        if plot_key != "bandwidth" or self._copy_gbps is None:
            return None
        value = math.log10(self._copy_gbps) if self._log.isChecked() else self._copy_gbps
        return value, self._copy_line.label.textItem.boundingRect().height() + self._copy_line.pen.widthF()

    def legend_text(self, engine: str, history: RunHistory, step: int) -> str:
        name = style.engine_label(engine)
        n_decode = self.columns.totals(history, engine, "decode_steps")[step]
        decode_ms = self.columns.totals(history, engine, "decode_ms")[step]
        return said_text(latency_legend(Engine(name, 0), decode_ms, n_decode))


class _BandwidthReader:
    """A step's achieved bandwidth from the run's wall figures: NaN where they were not recorded."""

    wall: WallShape | None = None

    def __call__(self, trace) -> float:
        if self.wall is None:
            return math.nan
        try:
            return self.wall.read(trace).gbps(trace.latency_ms)
        except ValueError:
            return math.nan
