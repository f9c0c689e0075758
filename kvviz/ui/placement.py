"""Where the main window opens and how large: the size and place saved at the last close, kept on the
screen it opens on (a window saved on a 1920x1080 monitor, opened on a 1280x720 projector), else a
first launch's size. It knows the window's geometry and the settings; nothing of runs or panels."""
from __future__ import annotations

from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMainWindow, QWidget

from kvviz.ui.settings_file import SettingsReader

DEFAULT_SIZE = (1500, 920)  # a first launch on a screen with room for it
GEOMETRY_KEY = "window/geometry"


def restore_geometry(window: QMainWindow, settings: QSettings | SettingsReader) -> None:
    """The saved size and place (the same across launches: no zoom rescales them), kept on screen; a
    value that is not Qt's saved geometry (text, a rectangle) is refused by the reader, and the window
    opens at a first launch's size."""
    saved = SettingsReader.of(settings).blob(GEOMETRY_KEY)
    if saved is None or not window.restoreGeometry(saved):
        first_size(window)
    fit_to_screen(window)


def fit_to_screen(window: QWidget) -> None:
    """No larger than the screen the window (or a dialog) opens on, and on it."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    if screen is None or QGuiApplication.platformName() == "offscreen" or window.isMaximized():
        return  # offscreen: no display to fit, the caller sizes it
    room, frame = screen.availableGeometry(), window.frameGeometry()
    extra_w, extra_h = frame.width() - window.width(), frame.height() - window.height()
    width = min(window.width(), room.width() - extra_w)
    height = min(window.height(), room.height() - extra_h)
    if (width, height) != (window.width(), window.height()):
        window.resize(width, height)
    x = min(max(frame.x(), room.x()), room.right() + 1 - width - extra_w)
    y = min(max(frame.y(), room.y()), room.bottom() + 1 - height - extra_h)
    if (x, y) != (frame.x(), frame.y()):
        window.move(x, y)


def first_size(window: QMainWindow) -> None:
    """A first launch: 1500x920, or the whole screen where that is smaller (under Xvfb at 1280x720 the
    window had opened 220 px wider than the screen, the summary and attention panels cut off)."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    room = screen.availableGeometry() if screen is not None else None
    offscreen = QGuiApplication.platformName() == "offscreen"
    if offscreen or room is None or (room.width() >= DEFAULT_SIZE[0] and room.height() >= DEFAULT_SIZE[1]):
        window.resize(*DEFAULT_SIZE)
        return
    window.setGeometry(room)
    window.setWindowState(window.windowState() | Qt.WindowState.WindowMaximized)
