"""What the serve view's plot panels share: a legend row of the schedulers above two x-linked plots."""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from kvviz.ui import style
from kvviz.ui.serve import colors
from kvviz.ui.serve.panels.base import ServePanel


class TwoPlotPanel(ServePanel):
    """`self.plots`: the upper and the lower plot (x linked); `show_legend(schedulers)` above them."""

    x_grid = True

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
        self.plots = (self.view.addPlot(row=0, col=0), self.view.addPlot(row=1, col=0))
        self.plots[1].setXLink(self.plots[0])
        for plot in self.plots:
            plot.showGrid(x=self.x_grid, y=True, alpha=style.GRID_ALPHA)
            plot.setMenuEnabled(False)
            plot.hideButtons()
            for name in ("left", "bottom"):
                plot.getAxis(name).enableAutoSIPrefix(False)  # "step", never "step (x0.001)"

    def show_legend(self, schedulers) -> None:
        legend = colors.legend_html(schedulers)
        if self.legend.text() != legend:
            self.legend.setText(legend)

    def export_items(self) -> list:
        return [self.view.scene()]
