"""The compare window's hooks into the other views and features: File > Watch a server... and Open a watch
recording... open the Watch window (one per main window, closed with it)."""
from __future__ import annotations

from PySide6.QtCore import QSettings

from tests.test_shell import IdleWorker


def main_window(qtbot, tmp_path):
    from kvviz.ui.window import MainWindow

    window = MainWindow(IdleWorker(), QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(window)
    return window


def menu_texts(menu) -> list[str]:
    return [a.menu().title() if a.menu() else a.text() for a in menu.actions() if not a.isSeparator()]


def test_file_menu_opens_the_watch_window_asking_for_servers_or_a_recording(qtbot, tmp_path, monkeypatch):
    from kvviz.ui.watch.window import WatchWindow

    asked: list[str] = []
    monkeypatch.setattr(WatchWindow, "open_watch_dialog", lambda self: asked.append("servers"))
    monkeypatch.setattr(WatchWindow, "open_recording_dialog", lambda self: asked.append("recording"))
    window = main_window(qtbot, tmp_path)
    texts = menu_texts(window.file_menu)
    assert texts[:3] == ["Watch a server...", "Open a watch recording...", "&Export"]
    assert [k.toString() for k in window.act_watch.shortcuts()] == ["Ctrl+Shift+W"]
    window.act_watch.trigger()
    watch = window.watch_window
    assert isinstance(watch, WatchWindow) and watch.isVisible() and asked == ["servers"]
    window.act_watch_open.trigger()
    assert window.watch_window is watch and asked == ["servers", "recording"]  # one Watch window, raised again
    window.close()
    assert not watch.isVisible()  # closed with the main window, so the app quits with it
    # The Watch window's Pause reads the shell's text (the one key map's), in every language.
    assert "_update_pause_text" not in vars(WatchWindow)
