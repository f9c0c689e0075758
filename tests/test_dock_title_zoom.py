"""The Inputs dock's title bar follows View > Zoom as the form under it does: at 150% its title's text and its float
and close buttons are drawn half as tall again as at 100% (the pixels of the bar, not widget sizes), and the
buttons still float, dock and close the dock."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QAbstractButton
from test_lesson_capture import app_zoom_back  # noqa: F401 (a fixture, used by name)
from test_serve_lecture import open_window as open_serve_window
from test_serve_lecture import zoomed  # noqa: F401 (a fixture, used by name)


def ink_rows(window) -> tuple[int, int]:
    """Rows holding ink (40 levels darker than the bar's background) in the dock's title bar: in its left half (the
    title) and its right eighth (the float and close buttons)."""
    dock = window.form_dock
    bar = dock.grab(QRect(0, 0, dock.width(), dock.widget().geometry().top()))
    image = bar.toImage().convertToFormat(QImage.Format.Format_Grayscale8)
    pixels = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
    pixels = pixels[:, : image.width()]
    dark = pixels < int(np.median(pixels)) - 40
    width = image.width()
    return int(dark[:, : width // 2].any(axis=1).sum()), int(dark[:, width - width // 8:].any(axis=1).sum())


def zoomed_window(window, qtbot, percent: int) -> None:
    window.presentation.set_zoom(percent, save=False)
    qtbot.wait(50)  # the widths and layouts follow the font after a turn of the event loop


@pytest.mark.usefixtures("app_zoom_back")
def test_the_inputs_docks_title_and_buttons_grow_with_the_zoom(open_window, qtbot):
    check_the_docks_title_bar(open_window(), qtbot)


def test_the_serve_views_workload_dock_title_grows_with_the_zoom(zoomed, qtbot, tmp_path):  # noqa: F811
    """The Serve view follows the app's font that View > Zoom sets (it has no zoom of its own)."""
    window = open_serve_window(qtbot, tmp_path, (1280, 720))

    def at(_window, _qtbot, percent: int) -> None:
        zoomed(percent)
        qtbot.wait(50)

    check_the_docks_title_bar(window, qtbot, at)
    at(window, qtbot, 100)  # the window's plots take the font back while they are whole


def check_the_docks_title_bar(window, qtbot, zoom=zoomed_window) -> None:
    """At 150% the title's and the buttons' ink is half as tall again as at 100%; the buttons float, dock and close
    the dock."""
    window.resize(1280, 720)
    zoom(window, qtbot, 100)
    title_100, buttons_100 = ink_rows(window)
    assert title_100 >= 6 and buttons_100 >= 6  # the title and the two icons are drawn
    zoom(window, qtbot, 150)
    title_150, buttons_150 = ink_rows(window)
    assert title_150 >= 1.3 * title_100, (title_100, title_150)
    assert buttons_150 >= 1.3 * buttons_100, (buttons_100, buttons_150)

    dock = window.form_dock
    buttons = {b.accessibleName(): b for b in dock.findChildren(QAbstractButton) if b.isVisibleTo(dock)}
    qtbot.mouseClick(buttons["Float"], Qt.MouseButton.LeftButton, pos=QPoint(3, 3))
    assert dock.isFloating()
    qtbot.mouseClick(buttons["Float"], Qt.MouseButton.LeftButton, pos=QPoint(3, 3))
    assert not dock.isFloating()
    qtbot.mouseClick(buttons["Close"], Qt.MouseButton.LeftButton, pos=QPoint(3, 3))
    assert dock.isHidden() and not window.form_dock.toggleViewAction().isChecked()
    window.form_dock.toggleViewAction().trigger()
    assert dock.isVisible()
