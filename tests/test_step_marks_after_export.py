"""The step marks of the per-step plots on screen after an animation export: the export draws each step and
renders the window offscreen (kvviz.ui.export_actions.animation_frames), the screen paints between frames, and
once the selected step is back the screen shows its line and markers only, as a full redraw does.

Pixels are read from the window's backing store (QScreen.grabWindow), what the screen shows; QWidget.grab
would paint the window again and never see a stale mark.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QApplication, QMainWindow
from test_work_matrix_render import near, synthetic_history, to_array

from kvviz.ui import style

STEPS = 40


class _Window(QMainWindow):
    """What animation_frames reads of the main window, holding one panel: the history, the selected step
    and the grid's panels; selecting a step draws it, as the window's repaint tick does."""

    def __init__(self, panel, history) -> None:
        super().__init__()
        self.history = history
        self.selected_step = 0
        self.grid = SimpleNamespace(panels={panel.key: panel}, frames={})
        self.setCentralWidget(panel)

    def select_step(self, step: int) -> None:
        self.selected_step = step
        for panel in self.grid.panels.values():
            panel.show_step(self.history, step)


def _screen(window: QMainWindow) -> np.ndarray:
    for _ in range(3):
        QApplication.processEvents()
    return to_array(window.screen().grabWindow(window.winId()).toImage())


def _column(plot: pg.PlotItem, window: QMainWindow, step: float) -> tuple[int, slice]:
    """The window pixel column of `step` in the plot, and the rows of its data area."""
    vb = plot.getViewBox()
    view = next(v for v in window.findChildren(pg.GraphicsView) if v.scene() is vb.scene())
    x = view.mapFromScene(vb.mapViewToScene(pg.Point(step, 0))).x()
    rect = view.mapFromScene(vb.sceneBoundingRect()).boundingRect()
    origin = view.mapTo(window, view.rect().topLeft())
    return round(origin.x() + x), slice(origin.y() + rect.top() + 2, origin.y() + rect.bottom() - 2)


def test_an_animation_export_leaves_only_the_selected_steps_marks_on_screen(qtbot):
    from kvviz.ui.export_actions import WINDOW, animation_frames
    from kvviz.ui.panels.latency import LatencyPanel

    panel = LatencyPanel()
    window = _Window(panel, synthetic_history(10, STEPS, ("naive", "concat")))
    qtbot.addWidget(window)
    window.resize(500, 600)
    window.show()
    qtbot.waitExposed(window)
    window.select_step(STEPS - 1)
    _screen(window)  # the screen has painted the last step's line

    def progress(done: int, n: int) -> bool:
        QApplication.processEvents()  # the screen paints between frames, as under the export's progress dialog
        return True

    frames = list(animation_frames(window, [WINDOW], range(0, 9), 1.0, progress))
    assert len(frames) == 9
    window.select_step(STEPS - 1)
    screen = _screen(window)
    redrawn = to_array(window.grab().toImage())

    for key, plot in panel._plots.items():
        x, rows = _column(plot, window, STEPS - 1)
        assert near(screen[rows, x - 1: x + 2], style.STEP_LINE, 60).any(axis=1).mean() > 0.3, \
            f"{key}: no step line at the selected step"
        for step in range(9):
            x, rows = _column(plot, window, step)
            dashes = near(screen[rows, x - 1: x + 2], style.STEP_LINE, 60).any(axis=1).mean()
            assert dashes < 0.1, f"{key}: {dashes:.0%} of the column at exported step {step} holds the step line"
    differ = (np.abs(screen.astype(int) - redrawn).sum(axis=-1) > 30).sum()
    assert differ <= 4, f"{differ} pixels on screen differ from the window drawn afresh (stale markers)"
