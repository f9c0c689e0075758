"""An exception nothing caught inside the running app (a slot, a menu action, a timer) is told in the window
in one line, with its traceback on stderr, and the app carries on (kvviz.ui.shell.exports.install_error_hook,
installed by `python main.py`): an export that fails is never silent."""
from __future__ import annotations

import sys

import pytest
from PySide6.QtCore import QTimer


@pytest.mark.qt_no_exception_capture
def test_an_uncaught_exception_is_told_in_the_window(open_window, qtbot, monkeypatch, capsys):
    from kvviz.ui.shell.exports import install_error_hook

    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # the test's own hook back afterwards
    window = open_window()
    install_error_hook(window)

    def broken_export() -> None:
        raise AttributeError("'RunInfo' object has no attribute 'decode_kernels'\nsecond line")

    QTimer.singleShot(0, broken_export)  # as a menu action's slot runs: from Qt's loop
    qtbot.waitUntil(lambda: "Something failed inside kvviz" in window.error_text())
    text = window.error_text()
    assert "AttributeError: 'RunInfo' object has no attribute 'decode_kernels' second line" in text
    assert "\n" not in text and "report them" in text
    assert "Traceback" in capsys.readouterr().err  # the details, for a report
    window.form.set_engines(("concat",))  # and the app carries on: a run still runs
    window.form.tokens_spin.setValue(3)
    window.toolbar.speed_spin.setValue(0)
    window.start_run()
    qtbot.waitUntil(lambda: window.history.n_steps() == 3, timeout=60_000)
