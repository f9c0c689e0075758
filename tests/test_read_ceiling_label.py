"""The read ceiling's label in the Latency panel's bandwidth plot lies wholly inside the plot's data area
(its ViewBox clips what lies outside), in linear and log scale, at the sizes the window gives the panel,
and after the panel is resized with the same range (geometry of the label's text against the view box)."""
from __future__ import annotations

import pytest

from tests.test_read_ceiling_ui import _with_read
from tests.test_wall_ui import long_wide_history

SIZES = [(240, 440), (300, 330), (500, 380), (900, 700)]


def _label_inside(panel) -> tuple[bool, str]:
    from PySide6.QtWidgets import QApplication

    for _ in range(3):
        QApplication.processEvents()
    label = panel._copy_line.label
    text = label.textItem.mapRectToScene(label.textItem.boundingRect())
    view = panel._plots["bandwidth"].getViewBox().sceneBoundingRect()
    return view.contains(text), f"the label's text {text.getRect()} in the view {view.getRect()}"


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("ceiling", [9.5, 27.7])
def test_the_read_ceiling_label_lies_inside_the_bandwidth_plot(qtbot, log, ceiling):
    from kvviz.ui.panels.latency import LatencyPanel

    panel = LatencyPanel()
    qtbot.addWidget(panel)
    panel.resize(*SIZES[0])
    panel.show()
    qtbot.waitExposed(panel)
    panel.set_log_scale(log)
    history = _with_read(long_wide_history(copy_gbps=16.0), ceiling)
    panel.show_step(history, 59)
    assert panel._copy_line.isVisible() and panel._copy_line.label.toPlainText().startswith("read ceiling")
    for size in SIZES:  # resized: the step drawn is the same, the range may not be
        panel.resize(*size)
        qtbot.waitUntil(lambda s=size: panel.size().toTuple() == s)
        inside, where = _label_inside(panel)
        assert inside, f"{size}, log={log}: {where}"
        low, high = panel._plots["bandwidth"].getViewBox().viewRange()[1]
        value = panel._copy_line.value()
        assert low <= value <= high
    panel.show_step(history, 30)  # another step, the range kept
    assert _label_inside(panel)[0]
