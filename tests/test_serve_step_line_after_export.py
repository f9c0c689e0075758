"""The Serve view's pool-use plots on screen after an export rendered them offscreen at other steps (as an
animation export does): once the step shown is back, the screen shows its step line only, as a full redraw does.
Pixels are read from the window's backing store (QScreen.grabWindow), what the screen shows."""
from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QApplication, QMainWindow
from test_serve_view_records import course_batch_static
from test_step_marks_after_export import _column
from test_work_matrix_render import near, to_array

from kvviz.serving.history import ServeHistory
from kvviz.ui import style
from kvviz.ui.exporters import render_widget


def _screen(window: QMainWindow) -> np.ndarray:
    for _ in range(3):
        QApplication.processEvents()
    return to_array(window.screen().grabWindow(window.winId()).toImage())


def test_an_offscreen_render_at_other_steps_leaves_no_step_line_on_screen(qtbot):
    from kvviz.ui.serve.panels.usage import UsagePanel

    history = ServeHistory.from_runs((course_batch_static(),))
    last = history.n_steps() - 1
    panel = UsagePanel()
    window = QMainWindow()
    window.setCentralWidget(panel)
    qtbot.addWidget(window)
    window.resize(600, 500)
    window.show()
    qtbot.waitExposed(window)
    panel.show_step(history, last, None)
    _screen(window)  # the screen has painted the last step's line
    exported = range(0, 8)
    for step in exported:  # what an animation export does: draw the step, render offscreen, let the screen paint
        panel.show_step(history, step, None)
        render_widget(window)
        QApplication.processEvents()
    panel.show_step(history, last, None)
    screen = _screen(window)
    for plot in panel.plots:
        x, rows = _column(plot, window, last)
        assert near(screen[rows, x - 1: x + 2], style.STEP_LINE, 60).any(axis=1).mean() > 0.3, "no line at the step"
        for step in exported:
            x, rows = _column(plot, window, step)
            stale = near(screen[rows, x - 1: x + 2], style.STEP_LINE, 60).any(axis=1).mean()
            assert stale < 0.1, f"{stale:.0%} of the column at rendered step {step} holds the step line"
