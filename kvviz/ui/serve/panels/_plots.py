"""What the serve view's plot panels share: a legend row of the schedulers above two x-linked plots, no
numbers on their axes and no step line before a run (an empty plot's "-0.2 0 0.2" and a line at no step say
nothing), and the size at which they read: each plot as tall as its axis name is long (two names never drawn
over each other) and its tick labels apart."""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from kvviz.ui import style
from kvviz.ui.panels._plots import StepLine
from kvviz.ui.serve import colors
from kvviz.ui.serve.panels.base import ServePanel


class CountAxis(pg.AxisItem):
    """An axis of things counted whole (requests in a batch): its ticks at whole numbers only, 1 apart at the
    closest, so a plot whose values stay within 0..1 reads "0 1", never "0 0.5 1"."""

    def tickSpacing(self, minVal: float, maxVal: float, size: float):  # noqa: N802, N803 (pyqtgraph's override)
        levels = [(spacing, offset) for spacing, offset in super().tickSpacing(minVal, maxVal, size)
                  if spacing >= 1 and float(spacing).is_integer() and float(offset).is_integer()]
        return levels or ([(1.0, 0.0)] if maxVal != minVal else [])


class TwoPlotPanel(ServePanel):
    """`self.plots`: the upper and the lower plot (x linked); `show_legend(schedulers)` above them. `counts`: for
    each plot, whether its values are counted whole (its left axis a CountAxis)."""

    x_grid = True
    counts = (False, False)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        self.legend = QLabel()
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setWordWrap(True)
        layout.addWidget(self.legend)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground(style.PLOT_BACKGROUND)
        layout.addWidget(self.view)
        self.plots = tuple(self.view.addPlot(row=row, col=0, axisItems={"left": CountAxis("left")} if whole else None)
                           for row, whole in enumerate(self.counts))
        self.plots[1].setXLink(self.plots[0])
        for plot in self.plots:
            plot.showGrid(x=self.x_grid, y=True, alpha=style.GRID_ALPHA)
            plot.setMenuEnabled(False)
            plot.hideButtons()
            for name in ("left", "bottom"):
                plot.getAxis(name).enableAutoSIPrefix(False)  # "step", never "step (x0.001)"
        self.lines: list[pg.InfiniteLine] = []  # the selected step's (or time's) line in each plot, if any
        self.show_values(False)

    def add_step_lines(self) -> None:
        """A vertical line in each plot at the selected step (`set_step`), drawn only while the plots show data."""
        # StepLine: a move repaints the place the line leaves, also after an export rendered the plots offscreen
        self.lines = [StepLine(angle=90, pen=pg.mkPen(style.STEP_LINE, width=1)) for _ in self.plots]
        for plot, line in zip(self.plots, self.lines):
            line.setVisible(self.plots[0].getAxis("bottom").style["showValues"])
            plot.addItem(line)

    def set_step(self, x: float) -> None:
        for line in self.lines:
            line.setValue(x)

    def show_values(self, shown: bool) -> None:
        """The axes' numbers and the step lines: none on an empty plot."""
        for plot in self.plots:
            for name in ("left", "bottom"):
                axis = plot.getAxis(name)
                if axis.style["showValues"] != shown:
                    axis.setStyle(showValues=shown)
        for line in self.lines:
            line.setVisible(shown)

    def readable_size(self) -> tuple[int, int]:
        """Each plot at least a readable plot's height and its axis name's length (rotated beside it), the
        legend's lines, the bottom axis's numbers and name; the left axis's width and a readable plot's."""
        fm = self.fontMetrics()
        tick_h = fm.height()
        names = [plot.getAxis("left").label.boundingRect().width() if plot.getAxis("left").label.toPlainText()
                 else 0 for plot in self.plots]
        name_h = max(plot.getAxis("left").label.boundingRect().height() for plot in self.plots)
        plot_w, plot_h = style.readable(style.READABLE_PLOT)
        width = round(name_h) + fm.horizontalAdvance("8888") + 12 + plot_w
        legend = self.legend.heightForWidth(width) if self.legend.text() else 0
        heights = [max(plot_h, round(name) + tick_h) for name in names]
        bottom = tick_h + round(self.plots[1].getAxis("bottom").label.boundingRect().height()) + 8
        return width, legend + sum(heights) + tick_h // 2 * len(self.plots) + bottom + 8

    def show_legend(self, schedulers) -> None:
        legend = colors.legend_html(schedulers)
        if self.legend.text() != legend:
            self.legend.setText(legend)

    def export_items(self) -> list:
        return [self.view.scene()]
