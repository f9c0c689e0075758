"""The QApplication every kvviz window shares: made once and named (so QSettings finds the user's settings),
the display check before Qt starts, and Quit. Imports no window, so any view, the presenter and the headless
exporters can make the app without importing the main window.
"""
from __future__ import annotations

import os
import sys

ORGANIZATION = "kvviz"
APPLICATION = "kvviz"
NO_DISPLAY_HINT = ("kvviz: no display (DISPLAY / WAYLAND_DISPLAY unset): use `kvviz shot --out FILE.png`, "
                   "or set QT_QPA_PLATFORM=offscreen")


def has_display(environ=None, platform: str | None = None) -> bool:
    """False on Linux with neither a display server nor an explicit Qt platform plugin."""
    environ = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux"):
        return True
    return any(environ.get(k) for k in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"))


def ensure_app(argv: list[str] | None = None):
    """The QApplication (made once), named so QSettings() finds the user's kvviz settings."""
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        app = QApplication(argv if argv is not None else [sys.argv[0]])
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationDisplayName("kvviz")
    return app


def quit_app() -> None:
    """File > Quit (Ctrl+Q) in any of the app's windows: every window closed, each stopping its worker's
    thread and ending its engine process as it closes, then the event loop left, so the process exits."""
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        return
    QApplication.closeAllWindows()
    if not any(w.isVisible() for w in QApplication.topLevelWidgets() if w.isWindow()):
        app.quit()


def display_problem() -> str | None:
    """Why no window can open here, in one line (no display; on X11, a missing xcb library or X server), checked
    before Qt starts; None where one can."""
    if not has_display():
        return NO_DISPLAY_HINT
    from kvviz.ui import xcb

    return xcb.problem() or None
