"""A click on a per-step panel's "log scale" box toggles it in the window, however the press and the release
are spaced: the window gives the keys back to the transport after a press in the panel area
(kvviz.ui.shell.window), and a box that took the focus on the press lost it, with its pressed state, before
the release came (Qt's QAbstractButton::focusOutEvent), so the click did nothing."""
from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QCheckBox


def test_a_click_on_log_scale_toggles_it_when_the_window_takes_the_keys_between_press_and_release(
        qtbot, open_window):
    window = open_window()
    qtbot.waitExposed(window)
    window.activateWindow()
    boxes = [b for b in window.findChildren(QCheckBox) if b.text() == "log scale" and b.isVisible()]
    assert boxes, "no log scale box shown"
    box = boxes[0]
    at = QPoint(box.height() // 2, box.height() // 2)  # on the indicator
    for want in (True, False, True):
        QTest.mousePress(box, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at)
        for _ in range(3):
            QApplication.processEvents()  # the window's zero timer after the press runs before the release
        QTest.mouseRelease(box, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, at)
        assert box.isChecked() is want
        qtbot.wait(500)  # apart: not a double click
    assert window.panel_area.hasFocus()  # the keys went to the transport still
