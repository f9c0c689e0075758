"""What the compare window's File > Watch a server... and File > Open a watch recording... do (kvviz/ui/actions.py
calls these, importing them only when asked, so the main window still loads without pyqtgraph): the main window's
Watch window, made on first use and raised, asked for its servers or its recording.
"""
from __future__ import annotations

from pathlib import Path

from kvviz.ui.qtutil import companion_window
from kvviz.ui.watch.window import WatchWindow


def watch_window(main) -> WatchWindow:
    """The main window's Watch window (one per main window; it ends its session as the app quits), shown."""
    return companion_window(main, "watch_window", lambda: WatchWindow(getattr(main, "settings", None)))


def open_watch_view(main) -> WatchWindow:
    """File > Watch a server...: the Watch window and its URL dialog."""
    window = watch_window(main)
    window.open_watch_dialog()
    return window


def open_watch_recording(main, path: str | Path | None = None) -> WatchWindow:
    """File > Open a watch recording...: the recording replayed in the Watch window (a file dialog unless given)."""
    window = watch_window(main)
    if path is None:
        window.open_recording_dialog()
    else:
        window.replay(path)
    return window
