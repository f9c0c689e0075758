"""The Watch view's panels, drawn from a WatchFrame (kvviz.ui.watch.source) at a selected time: the prefix cache
as vLLM holds it (the hash chains as a tree, a trunk per shared prefix, a branch per request), and series over
time, a line per server. Where a panel means what a Serve view panel means (pool use and running requests, the
counters) it is that panel, fed through ServerLanes (kvviz.ui.watch.lanes). WATCH_PANELS is the registry.

Panels see frames (copies and numpy) only: no session, no socket, no lock.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QWidget

from kvviz.page.watch import MAX_SEGMENTS, tree_layout
from kvviz.ui import style
from kvviz.ui.serve import colors
from kvviz.ui.serve.panels._plots import TwoPlotPanel
from kvviz.ui.serve.panels.base import ServePanel
from kvviz.ui.serve.panels.counters import CountersPanel
from kvviz.ui.serve.panels.usage import UsagePanel
from kvviz.ui.shell.grid import GridSpec
from kvviz.ui.watch.lanes import ServerLanes, register_colors
from kvviz.ui.watch.source import WatchFrame

WATCH_PANELS: list[tuple[str, str]] = [
    # (key, "module:Class"), in the order the grid lays them out (the first row: the first two)
    ("tree", "kvviz.ui.watch.panels:TreePanel"),
    ("usage", "kvviz.ui.watch.panels:WatchUsagePanel"),
    ("cache", "kvviz.ui.watch.panels:PrefixPanel"),
    ("requests", "kvviz.ui.watch.panels:RequestsPanel"),
    ("latency", "kvviz.ui.watch.panels:TimingPanel"),
    ("counters", "kvviz.ui.watch.panels:WatchCountersPanel"),
]
# The grid (the shell's): the prefix cache (its tree, use and hits) above the series over time where they read;
# where they do not, the tree keeps its room first and the counters go behind a tab first.
WATCH_GRID = GridSpec("watch", WATCH_PANELS, (("tree", "usage", "cache"), ("requests", "latency", "counters")),
                      {"tree": 0, "usage": 1, "cache": 2, "latency": 3, "requests": 4, "counters": 5})
BAND_GAP = 6  # px between two servers' (or ranks') trees


class TreePanel(ServePanel):
    """Per server and rank, the mirror's tree as an icicle: a segment (a run of blocks with one child each) is a
    box from its first block's depth, as long as its blocks, as tall as the leaves under it; a trunk (a block
    several chains share) in the server's colour, the branches lighter; each block's tokens as text inside
    where the tokenizer was given and there is room."""

    key = "tree"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAutoFillBackground(True)
        self.bands: list[tuple[str, QColor, dict]] = []  # (heading, colour, tree_layout's dict) per server rank
        self._version: tuple | None = None

    def title(self) -> str:
        return self.tr("Prefix cache (vLLM's blocks, as a tree of hash chains)")

    def help_text(self) -> str:
        return self.tr("The blocks the server holds in its prefix cache, mirrored from its KV events (stored minus "
                       "removed). A block's hash chains its parent's, so requests sharing a prompt share its blocks: "
                       "one trunk (dark) with a branch (light) per request. Left to right: block depth in the chain. "
                       "With a tokenizer (--model) each box shows its blocks' tokens.")

    def readable_size(self) -> tuple[int, int]:
        fm = self.fontMetrics()
        return fm.averageCharWidth() * 44, fm.lineSpacing() * 9

    def clear(self) -> None:
        self.bands = []
        self._version = None
        self.update()

    def show_step(self, frame: WatchFrame, t: float, _selection=None) -> None:
        key = (frame.started, frame.version)
        if key == self._version:
            return
        self._version = key
        def words(text: str) -> str:  # the tree's shape in words (kvviz.peers.watch.mirror), as the narration's
            return QCoreApplication.translate("Narration", text)

        bands = []
        for v in frame.servers:
            for rank, tree in enumerate(v.trees):
                where = v.label + (self.tr(" rank {0}").format(rank) if len(v.trees) > 1 else "")
                laid = tree_layout(tree, MAX_SEGMENTS, words)
                hidden = self.tr(" ({0} short branches not drawn)").format(laid["hidden"]) if laid["hidden"] else ""
                bands.append((f"{where}: {laid['shape']}{hidden}", QColor(v.color), laid))
        self.bands = bands
        self.update()

    def retranslate(self) -> None:
        self._version = None  # the headings again, in the language now set, at the next frame

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt override)
        p = QPainter(self)
        p.fillRect(self.rect(), QColor(style.PLOT_BACKGROUND))
        if not self.bands:
            p.end()
            return
        fm = self.fontMetrics()
        line = fm.lineSpacing()
        weights = [max(2, laid["rows"]) for _h, _c, laid in self.bands]
        free = max(0, self.height() - len(self.bands) * (line + BAND_GAP))
        y = 0.0
        for (heading, color, laid), weight in zip(self.bands, weights):
            p.setPen(QColor(style.PLOT_FOREGROUND))
            p.drawText(QRectF(2, y, self.width() - 4, line), Qt.AlignmentFlag.AlignLeft,
                       fm.elidedText(heading, Qt.TextElideMode.ElideRight, self.width() - 4))
            y += line
            height = free * weight / sum(weights)
            self._paint_tree(p, laid, color, QRectF(2, y, self.width() - 4, height))
            y += height + BAND_GAP
        p.end()

    def _paint_tree(self, p: QPainter, laid: dict, color: QColor, box: QRectF) -> None:
        if not laid["segs"]:
            return
        fm = self.fontMetrics()
        bx = box.width() / max(1, laid["depth"])  # px per block
        by = box.height() / max(1, laid["rows"])  # px per leaf row
        trunk, branch, lone = color, color.lighter(165), color.lighter(130)
        edge = QPen(QColor(style.PLOT_BACKGROUND), 1)
        for x0, length, r0, r1, branches, parent, text in laid["segs"]:
            rect = QRectF(box.left() + x0 * bx, box.top() + r0 * by, length * bx, (r1 - r0) * by)
            fill = trunk if branches > 1 else branch if parent >= 0 else lone
            p.fillRect(rect, fill)
            p.setPen(edge)
            p.drawRect(rect)
            if bx >= 5:  # block boundaries inside the segment
                for i in range(1, length):
                    xb = rect.left() + i * bx
                    p.drawLine(xb, rect.top() + 1, xb, rect.bottom() - 1)
            if text and rect.width() > fm.averageCharWidth() * 4 and rect.height() >= fm.height():
                p.setPen(QColor("#ffffff") if branches > 1 else QColor(style.PLOT_FOREGROUND))
                shown = fm.elidedText(text.replace("\n", " "), Qt.TextElideMode.ElideLeft, int(rect.width()) - 4)
                p.drawText(rect.adjusted(2, 0, -2, 0), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                           shown)


class WatchUsagePanel(UsagePanel):
    """The Serve view's pool-use panel, a line per server: blocks in use (vLLM's usage of its pool), a cross
    where requests were preempted, and the requests running, over the seconds watched."""

    def title(self) -> str:
        return self.tr("Pool use and running requests")

    def help_text(self) -> str:
        return self.tr("Above: KV blocks in use on each server (vLLM's kv_cache_usage_perc times its pool); a cross "
                       "marks a sample in which requests were preempted. Below: requests running. Over the seconds "
                       "since the watch began, a line per server.")

    def retranslate(self) -> None:
        super().retranslate()
        self.batch_plot.setLabel("left", self.tr("running"), **style.LABEL_STYLE)
        self.batch_plot.setLabel("bottom", self.tr("seconds"), **style.LABEL_STYLE)

    def show_step(self, frame: WatchFrame, t: float, _selection=None) -> None:
        lanes = ServerLanes(frame)
        super().show_step(lanes, t, None)
        self.pool_plot.setXRange(*time_range(frame), padding=0)
        running = [v.series["running"] for v in frame.servers]
        self.batch_plot.setYRange(*value_range(running, whole=True), padding=0)


class WatchCountersPanel(CountersPanel):
    """The Serve view's counters, a column per server, from its metrics over the samples kept (a dash where
    vLLM reports nothing alike: padding and idle slots are a static batcher's)."""

    def help_text(self) -> str:
        return self.tr("Per server, over the samples kept: prefix hits (prompt tokens found in the prefix cache over "
                       "those looked up), tokens saved (found cached) and prefilled (computed), preemptions, tokens "
                       "generated (one TTFT or ITL observation each) and per second, the most pool blocks in use.")

    def show_step(self, frame: WatchFrame, t: float, _selection=None) -> None:
        super().show_step(ServerLanes(frame), t, None)


def time_range(frame: WatchFrame) -> tuple[float, float]:
    """The plots' x: from the session's start to its newest sample (at least a second)."""
    last = max((float(v.series["t"][-1]) for v in frame.servers if len(v.series["t"])), default=0.0)
    return min(0.0, last), max(1.0, last * 1.02)


def value_range(arrays, whole: bool = False) -> tuple[float, float]:
    """A plot's y: zero and every finite value, with a twentieth to spare (at least 0..1); `whole` (a count, its
    ticks whole numbers) at least half a unit to spare below and above, so that its 0 and 1 are numbered inside."""
    values = np.concatenate([np.asarray(a, dtype=float) for a in arrays]) if arrays else np.zeros(0)
    values = values[np.isfinite(values)]
    lo = min(0.0, float(values.min())) if values.size else 0.0
    hi = max(lo + 1.0, float(values.max())) if values.size else 1.0
    spare = (hi - lo) * 0.05
    if whole:
        return lo - max(0.5, spare), hi + max(0.5, spare)
    return lo - (spare if lo < 0 else 0.0), hi + spare


# (series key, multiplier, dashed) per curve of a plot
Curve = tuple[str, float, bool]


class SeriesPanel(TwoPlotPanel):
    """Two x-linked plots of the servers' series over the seconds watched, a line per server and curve; the
    selected time a vertical line. Subclasses name the curves and the axes."""

    UPPER: tuple[Curve, ...] = ()
    LOWER: tuple[Curve, ...] = ()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        for plot in self.plots:
            plot.setDownsampling(auto=True, mode="peak")
            plot.setClipToView(True)
        self.curves: dict[tuple[str, int, int], pg.PlotDataItem] = {}
        self.add_step_lines()
        self.values: dict[tuple[str, int, int], tuple[np.ndarray, np.ndarray]] = {}  # what is drawn (tests)
        self.retranslate()

    def clear(self) -> None:
        for key, item in self.curves.items():
            self.plots[key[1]].removeItem(item)
        self.curves, self.values = {}, {}
        self.show_values(False)

    def show_step(self, frame: WatchFrame, t: float, _selection=None) -> None:
        register_colors(frame)
        shown = [v.label for v in frame.servers if len(v.series["t"])]
        self.show_legend(shown)
        wanted = set()
        for v in frame.servers:
            x = v.series["t"]
            for which, curves in enumerate((self.UPPER, self.LOWER)):
                for c, (name, times, dashed) in enumerate(curves):
                    key = (v.label, which, c)
                    wanted.add(key)
                    y = v.series[name] * times
                    finite = np.isfinite(y)
                    if key not in self.curves:
                        pen = pg.mkPen(colors.scheduler_color(v.label), width=2,
                                       style=Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine)
                        self.curves[key] = self.plots[which].plot([], [], pen=pen)
                    # A lone sample (one interval's TTFT when every request finished in it) is no line: a dot.
                    lone = int(finite.sum()) == 1
                    self.curves[key].setData(x[finite], y[finite], symbol="o" if lone else None,
                                             symbolSize=style.px(10), symbolPen=None,
                                             symbolBrush=colors.scheduler_color(v.label))
                    self.values[key] = (x[finite], y[finite])
        for key in [k for k in self.curves if k not in wanted]:
            self.plots[key[1]].removeItem(self.curves.pop(key))
            self.values.pop(key, None)
        self.show_values(bool(shown))
        self.set_step(t)
        # The ranges from the data alone, so a frame is the same picture whatever was drawn before it.
        self.plots[0].setXRange(*time_range(frame), padding=0)
        for plot, curves, whole in zip(self.plots, (self.UPPER, self.LOWER), self.counts):
            values = [v.series[name] * times for v in frame.servers for name, times, _d in curves]
            plot.setYRange(*value_range(values, whole), padding=0)


class PrefixPanel(SeriesPanel):
    UPPER = (("hit_rate", 100.0, False),)
    LOWER = (("stored", 1.0, False), ("removed", -1.0, True))
    counts = (False, True)  # blocks

    def title(self) -> str:
        return self.tr("Prefix hit rate and blocks stored/removed")

    def help_text(self) -> str:
        return self.tr("Above: the share of prompt tokens found in the prefix cache in each sample's interval "
                       "(vLLM's prefix_cache_hits over prefix_cache_queries). Below: blocks stored (solid, up) and "
                       "removed (dashed, down) in each interval, from the KV events.")

    def retranslate(self) -> None:
        self.plots[0].setLabel("left", self.tr("prefix hits"), units="%", **style.LABEL_STYLE)
        self.plots[1].setLabel("left", self.tr("blocks ±"), **style.LABEL_STYLE)
        self.plots[1].setLabel("bottom", self.tr("seconds"), **style.LABEL_STYLE)
        for plot in self.plots:
            plot.getAxis("left").enableAutoSIPrefix(False)


class RequestsPanel(SeriesPanel):
    UPPER = (("waiting", 1.0, False),)
    LOWER = (("preempted", 1.0, False),)
    counts = (True, True)  # requests

    def title(self) -> str:
        return self.tr("Waiting requests and preemptions")

    def help_text(self) -> str:
        return self.tr("Above: requests waiting for room (vLLM's num_requests_waiting). Below: requests preempted in "
                       "each sample's interval (the change of num_preemptions), a line per server.")

    def retranslate(self) -> None:
        self.plots[0].setLabel("left", self.tr("waiting"), **style.LABEL_STYLE)
        self.plots[1].setLabel("left", self.tr("preempted"), **style.LABEL_STYLE)
        self.plots[1].setLabel("bottom", self.tr("seconds"), **style.LABEL_STYLE)


class TimingPanel(SeriesPanel):
    UPPER = (("ttft_ms", 1.0, False),)
    LOWER = (("itl_ms", 1.0, False),)

    def title(self) -> str:
        return self.tr("Time to first token and inter-token latency")

    def help_text(self) -> str:
        return self.tr("The mean of the server's time_to_first_token_seconds (above) and inter_token_latency_seconds "
                       "(below) over each sample's interval (the histogram's sum over its count); no point where no "
                       "token came.")

    def retranslate(self) -> None:
        self.plots[0].setLabel("left", self.tr("TTFT"), units="ms", **style.LABEL_STYLE)
        self.plots[1].setLabel("left", self.tr("ITL"), units="ms", **style.LABEL_STYLE)
        self.plots[1].setLabel("bottom", self.tr("seconds"), **style.LABEL_STYLE)
        for plot in self.plots:
            plot.getAxis("left").enableAutoSIPrefix(False)
