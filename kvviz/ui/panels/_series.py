"""A panel of per-step line plots: one curve per engine per plot, a marker at the selected step.

Latency, bytes and cache memory panels are instances: each series is a StepTrace field, per step or
cumulative, drawn into one of the panel's plots.
Curves are created once per engine set and fed with setData; long runs are peak-downsampled. The
series grow step by step (TraceColumns), and the axes' ranges move only when the data outgrows them:
an axis that changes range lays out and draws its ticks again, the dearest part of a frame.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QCheckBox, QVBoxLayout

from kvviz import catalog
from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._plots import (
    BytesAxis,
    TraceColumns,
    align_left_axes,
    canvas,
    engine_step,
    legend_row,
    on_left_click,
    positions,
    repaint_area,
    set_legend,
    step_line,
    view_point,
)
from kvviz.ui.panels._shown import shown_engines
from kvviz.ui.panels.base import Panel


class WholeAxis(pg.AxisItem):
    """An axis of whole numbers (steps, positions, counts): ticks only on whole numbers (no 0.5
    between 0 and 1), spaced so their labels never run together ("50 100150" in a narrow plot), and
    no SI prefix (a step axis had read "20000 40000" for steps 20 and 40)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.enableAutoSIPrefix(False)

    def updateAutoSIPrefix(self) -> None:  # noqa: N802 (pyqtgraph override)
        # pyqtgraph works out a scale even with the prefix off, from the range of the moment (x1000
        # for a range within 0..1, as before a run), and keeps it: steps 20 and 40 read 20000 and 40000.
        if self.autoSIPrefix:
            super().updateAutoSIPrefix()
            return
        self.autoSIPrefixScale = 1.0
        self.labelUnitPrefix = ""
        self._updateLabel()

    def tickSpacing(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph override)
        span = maxVal - minVal
        if span <= 0 or size <= 0:
            return [(1.0, 0.0)]
        metrics = QFontMetrics(self.style["tickFont"] or style.tick_font())
        if self.orientation in ("bottom", "top"):
            widest = max(len(str(int(abs(v)))) + (v < 0) for v in (minVal, maxVal))
            pitch = metrics.horizontalAdvance("8" * widest) + 12  # a label and a gap
        else:
            pitch = metrics.height() + 6
        least = max(1.0, span * pitch / size)  # data units between two labels that fit
        power = 10.0 ** math.floor(math.log10(least))
        major = next(m * power for m in (1, 2, 5, 10) if m * power >= least)
        minor = next((major / d for d in (5, 2) if (major / d).is_integer()), None)
        return [(major, 0.0)] + ([(minor, 0.0)] if minor else [])


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
    """Subclasses provide `plot_specs()` and `series_specs()` and may override `legend_text()`.
    A click in a plot shows the step under it (the x axis counts steps)."""

    picks_steps = True

    log_option = True  # offer the log-scale checkbox
    extra_fields: tuple = ()  # further fields a subclass reads from self.columns (see TraceColumns)

    def header_widgets(self) -> list:
        return [self._log] if self.log_option else []

    def plot_specs(self) -> list[PlotSpec]:
        raise NotImplementedError

    def plot_grid(self) -> tuple[int, int]:
        shown = [s for s in self._plot_specs if self._plots[s.key].isVisible()] or self._plot_specs
        return len({s.col for s in shown}), len({s.row for s in shown})

    def series_specs(self) -> list[SeriesSpec]:
        raise NotImplementedError

    def legend_text(self, engine: str, history: RunHistory, step: int) -> str:
        """The engine's legend at its own `step`, 0 or more (legend_entries names one with no step by its label)."""
        return style.engine_label(engine)

    def legend_entries(self, engines: list[str], history: RunHistory, step: int) -> list[tuple]:
        """(colour, text, mark) per legend entry: one per engine, with legend_text from its first step on."""
        ks = [engine_step(history, e, step) for e in engines]
        return [(style.engine_color(e, i), self.legend_text(e, history, k) if k >= 0 else style.engine_label(e),
                 "dashed" if catalog.engine_dash(e) else "line") for i, (e, k) in enumerate(zip(engines, ks))]

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._plot_specs = self.plot_specs()
        self._specs = self.series_specs()
        self.columns = TraceColumns([s.field for s in self._specs] + list(self.extra_fields))
        self._plot_of = {s.key: s.plot for s in self._specs}
        self._canvas = canvas()
        self._log = QCheckBox()
        # Focus by Tab only: the window gives the keys back to the transport after a press in its panels,
        # and a box focused by the press lost its pressed state with the focus before the release came.
        self._log.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        self._log.toggled.connect(self._on_log_toggled)
        self._legend = legend_row()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self._legend)
        layout.addWidget(self._canvas, 1)
        self._plots: dict[str, pg.PlotItem] = {}
        self._lines: dict[str, pg.InfiniteLine] = {}
        self._markers: dict[str, pg.ScatterPlotItem] = {}
        first: pg.PlotItem | None = None
        for spec in self._plot_specs:
            axis = {"left": BytesAxis("left")} if spec.byte_units else {}
            axis["bottom"] = WholeAxis("bottom")  # steps
            plot = self._canvas.addPlot(row=spec.row, col=spec.col, axisItems=axis)
            plot.hideButtons()
            plot.setDownsampling(auto=True, mode="peak")
            plot.setClipToView(True)
            plot.disableAutoRange()  # set_ranges moves them, seldom
            if first is None:
                first = plot
            else:
                plot.setXLink(first)
            self._plots[spec.key] = plot
            self._lines[spec.key] = step_line(plot)
        for spec in self._plot_specs:
            if any(o.col == spec.col and o.row > spec.row for o in self._plot_specs):
                # The plot below numbers the same (linked) steps: no labels here, more room for the curves.
                self._plots[spec.key].getAxis("bottom").setStyle(showValues=False)
        for col in {spec.col for spec in self._plot_specs}:
            column = [self._plots[spec.key] for spec in self._plot_specs if spec.col == col]
            if len(column) > 1:
                align_left_axes(column)
        rows = {spec.row for spec in self._plot_specs}
        for row in rows if len(rows) > 1 else ():
            # Equal plot areas: a row's share does not follow its plots' own preferred heights (more
            # for the one with the axis numbers and name). Only between plots: a subclass's own
            # items in the canvas (the cache memory's block pool) keep their share.
            self._canvas.ci.layout.setRowPreferredHeight(row, 1000)
        on_left_click(self._canvas.scene(), self._on_clicked)
        self._left_names: dict[str, tuple[str, str | None, float]] = {}  # plot -> (name, units, full width)
        self._short_names: set[str] = set()  # plots whose y axis shows only its unit
        for key, plot in self._plots.items():
            plot.getViewBox().sigResized.connect(self._fit_left_names)
            plot.getViewBox().sigResized.connect(lambda *_a, k=key: self._keep_room(k))
        for series_spec in self._specs:
            marker = pg.ScatterPlotItem(size=8, pen=pg.mkPen("w", width=1))
            marker.setZValue(60)
            self._plots[series_spec.plot].addItem(marker)
            self._markers[series_spec.key] = marker
        self._curves: dict[tuple[str, str], pg.PlotDataItem] = {}  # (series, engine) of this run
        self._curve_pool: dict[tuple[str, str, str], pg.PlotDataItem] = {}  # (series, engine, colour): all made
        self._engines: list[str] = []
        self._data: dict[tuple[str, str], np.ndarray] = {}
        self._data_key: tuple[int, int] | None = None
        self._ranges: dict[str, tuple] = {}  # plot key -> (x range, y range) last set
        self._shown: tuple[RunHistory, int] | None = None
        self._marked: tuple | None = None  # what the step lines and markers show
        self.retranslate()

    def retranslate(self) -> None:
        self._log.setText(self.tr("log scale"))
        last_row = max((p.row for p in self._plot_specs), default=0)
        self._left_names.clear()
        self._short_names.clear()  # style_plot sets each full name again
        for spec in self.plot_specs():
            plot = self._plots[spec.key]
            style.style_plot(plot, title=spec.title, left=spec.left,
                             bottom=self.tr("step") if spec.row == last_row else "", left_units=spec.left_units)
            # The full name's length, to tell whether it fits beside its plot (see _fit_left_names).
            self._left_names[spec.key] = (spec.left, spec.left_units, plot.getAxis("left").label.boundingRect().width())
        self._fit_left_names()
        self.setToolTip(self.help_text())
        if self._shown is not None:
            self._marked = None
            self.show_step(*self._shown)  # legend texts

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
        # The curves stay (emptied) for a run with the same engines: made again, with their items
        # added to the plots, they cost a first draw ~5 ms more.
        for curve in self._curves.values():
            curve.setData([], [])
        self._legend.clear()
        self._data.clear()
        self._data_key = None
        self._ranges.clear()
        self.columns.clear()
        self._shown = None
        self._marked = None
        for line in self._lines.values():
            line.hide()
        for marker in self._markers.values():
            marker.clear()

    def _on_log_toggled(self, on: bool) -> None:
        for plot in self._plots.values():
            plot.setLogMode(y=on)
        self._ranges.clear()
        if self._shown is not None:
            self._marked = None
            self.set_ranges(*self._shown)
            self.show_step(*self._shown)  # the step markers are placed in the axis' own units

    def warm_up(self, engines: tuple[str, ...], positions: int = 0) -> bool:
        """Make every engine's curves ahead of the first run (~5 ms a panel)."""
        if not self._curve_pool:
            self._ensure_curves(list(engines))
        return False

    def _ensure_curves(self, engines: list[str]) -> None:
        """Show one curve per engine and series: made once per (series, engine, colour) and kept
        in its plot, hidden while a run leaves that engine out."""
        if self._engines == engines:
            return
        self.clear()
        for curve in self._curves.values():
            curve.hide()
        self._curves.clear()
        self._engines = list(engines)
        for spec in self._specs:
            plot = self._plots[spec.plot]
            for order, engine in enumerate(engines):
                pen = style.engine_pen(engine, order, width=2.0)
                if spec.dashed:
                    pen.setWidthF(1.0)  # see style.engine_pen: wide dashed pens are slow
                    pen.setDashPattern([5, 3])
                key = (spec.key, engine, pen.color().name())
                curve = self._curve_pool.get(key)
                if curve is None:
                    curve = self._curve_pool[key] = pg.PlotDataItem(pen=pen)
                    curve.opts["autoDownsampleFactor"] = style.SAMPLES_PER_PIXEL
                    curve.setZValue(2 if pen.style() != Qt.PenStyle.SolidLine else 1)
                    plot.addItem(curve)
                curve.show()
                self._curves[(spec.key, engine)] = curve

    def y_values(self, plot_key: str) -> list[np.ndarray]:
        """Every array drawn in the plot (for its y range); subclasses add the items they draw."""
        return [y for (key, _e), y in self._data.items() if self._plot_of[key] == plot_key]

    def kept_room(self, plot_key: str) -> tuple[float, float] | None:
        """(y, pixels): keep that many pixels of the plot free above the value y (in the axis's own units:
        log10 in log scale), for a label drawn above a line there; None: nothing to keep."""
        return None

    def _least_top(self, key: str, bottom: float) -> float | None:
        """The lowest range top (before setRange's padding) that keeps kept_room's pixels above its value."""
        room = self.kept_room(key)
        height = self._plots[key].getViewBox().height()
        if room is None or height <= 1:
            return None
        value, pixels = room
        # The value lies (top + pad - value) / (span + 2 pad) of the height below the top, pad = span x
        # _PADDING; at most _ROOM_SHARE of the height is given to the room (a plot too short keeps its curves).
        share = min(_ROOM_SHARE, pixels / height * (1 + 2 * _PADDING) - _PADDING)
        return (value - share * bottom) / (1 - share)

    def _keep_room(self, key: str) -> None:
        """A resized plot whose range leaves too little room above kept_room's value gets its y range again."""
        old = self._ranges.get(key)
        if old is None or self._shown is None or old[1] is None:
            return
        least = self._least_top(key, old[1][0])
        if least is not None and old[1][1] < least - 1e-9:
            self._ranges[key] = (old[0], None)
            self.set_ranges(*self._shown)

    def set_ranges(self, history: RunHistory, step: int) -> None:
        """x from 0 to the run's planned length (the curves race across a still axis), y from 0 to
        the highest value with headroom: each moves only when the data outgrows it."""
        n = history.n_steps()
        planned = history.info.max_new_tokens
        log = self._log.isChecked()
        for key, plot in self._plots.items():
            old_x, old_y = self._ranges.get(key, (None, None))
            x_top = old_x[1] if old_x else 0
            if n - 1 > x_top or old_x is None:
                x_top = planned - 1 if planned >= n else _headroom(max(n - 1, 1), 1.5)
                x_top = max(x_top, 1)
            values = [y for y in self.y_values(key) if len(y)]
            if log:
                positive = [y[y > 0] for y in values]
                positive = [y for y in positive if len(y)]
                lo = min((float(y.min()) for y in positive), default=1.0)
                hi = max((float(y.max()) for y in positive), default=10.0)
                lo, hi = math.log10(lo), math.log10(max(hi, lo * 1.0001))
                y_range = old_y
                if old_y is None or lo < old_y[0] or hi > old_y[1]:
                    y_range = (math.floor(lo * 2) / 2 - 0.1, hi + max(0.3, 0.15 * (hi - lo)))
                least = self._least_top(key, y_range[0])
                if least is not None and y_range[1] < least:
                    y_range = (y_range[0], least)
            else:
                top = max((float(y.max()) for y in values), default=0.0)
                bottom = min(0.0, min((float(y.min()) for y in values), default=0.0))
                y_range = old_y
                if old_y is None or top > old_y[1] or bottom < old_y[0] or (top > 0 and old_y[1] > 8 * top):
                    y_range = (bottom, _headroom(top, 1.25) if top > 0 else 1.0)
                least = self._least_top(key, y_range[0])
                if least is not None and y_range[1] < least:
                    y_range = (y_range[0], _headroom(least, 1.0))
            x_range = (0, x_top)
            if (x_range, y_range) != (old_x, old_y):
                self._ranges[key] = (x_range, y_range)
                plot.setRange(xRange=x_range, yRange=y_range, padding=_PADDING)

    def show_step(self, history: RunHistory, step: int) -> None:
        engines = shown_engines(self, history, step, self._ensure_curves)
        if not engines:
            return
        data_key = (id(history), history.version)
        if data_key != self._data_key:  # new steps recorded: read them, and only them
            self._data_key = data_key
            for spec in self._specs:
                for engine in engines:
                    read = self.columns.totals if spec.cumulative else self.columns.values
                    y = read(history, engine, spec.field)
                    old = self._data.get((spec.key, engine))
                    if old is not None and old.base is y.base and len(old) == len(y):
                        continue  # this engine recorded nothing new
                    self._data[(spec.key, engine)] = y
                    self._curves[(spec.key, engine)].setData(positions(len(y)), y)
            self.set_ranges(history, step)
        marked = (data_key, step, self._log.isChecked())
        if marked == self._marked:
            return
        self._marked = marked
        set_legend(self._legend, self.legend_entries(engines, history, step))
        log = self._log.isChecked()
        for line in self._lines.values():
            line.setPos(step)
            line.show()
        for spec in self._specs:
            xs, ys, brushes = [], [], []
            for order, engine in enumerate(engines):
                k = engine_step(history, engine, step)
                y = self._data[(spec.key, engine)]
                if 0 <= k < len(y) and math.isfinite(y[k]) and (not log or y[k] > 0):  # NaN: not recorded
                    xs.append(k)
                    ys.append(np.log10(y[k]) if log else y[k])
                    brushes.append(_brush(style.engine_color(engine, order)))
            repaint_area(self._markers[spec.key])  # as the step lines do (StepLine)
            self._markers[spec.key].setData(x=xs, y=ys, brush=brushes)

    def _fit_left_names(self, *_args) -> None:
        """A y-axis name longer than its plot is tall runs into the next plot's (two stacked plots in
        a short panel): there the axis gives only its unit ("ms"), or nothing; the full name again
        when the plot is tall enough."""
        for key, (name, units, width) in self._left_names.items():
            plot = self._plots[key]
            short = width > plot.getViewBox().height()
            if short == (key in self._short_names):
                continue
            axis = plot.getAxis("left")
            if short:
                self._short_names.add(key)
                if units:
                    plot.setLabel("left", units, **style.LABEL_STYLE)
                else:
                    axis.showLabel(False)
            else:
                self._short_names.discard(key)
                plot.setLabel("left", name, units=units, **style.LABEL_STYLE)

    def _on_clicked(self, scene_pos) -> None:
        if not self._engines:
            return  # nothing drawn yet
        for plot in self._plots.values():
            point = view_point(plot, scene_pos)
            if point is not None:
                self.step_picked.emit(max(0, round(point.x())))
                return

    def export_items(self) -> list:
        return list(self._plots.values())


_PADDING = 0.02  # setRange's padding, a share of each range on both sides
_ROOM_SHARE = 0.6  # the most of a plot's height kept_room may take


def _headroom(value: float, factor: float) -> float:
    """value x factor rounded up to a round number: a range top that holds a while as data grows."""
    target = value * factor
    power = 10.0 ** math.floor(math.log10(target))
    return next(m * power for m in (1, 1.5, 2, 3, 4, 5, 6, 8, 10) if m * power >= target)


_brushes: dict[str, object] = {}


def _brush(color: str):
    if color not in _brushes:
        _brushes[color] = pg.mkBrush(color)
    return _brushes[color]
