"""File > Open session leaves the transport's Speed as the user set it: a session file keeps no speed (its form
refuses a 'speed' field), so neither a session opened nor one whose form the window refuses (naive under the CUDA-graph
kernel) changes it."""
from __future__ import annotations

import json

import pytest
from test_lesson_capture import app_zoom_back  # noqa: F401 (a fixture, used by name)
from test_session_file import good_doc


@pytest.mark.usefixtures("app_zoom_back")
@pytest.mark.parametrize(("kernel", "refused"), [("torch", False), ("cuda-graph", True)])
def test_opening_a_session_keeps_the_speed_the_user_set(open_window, tmp_path, monkeypatch, kernel, refused):
    from PySide6.QtWidgets import QFileDialog

    window = open_window()
    window.toolbar.speed_spin.setValue(7)
    asked: list[float] = []
    window.speed_requested.connect(asked.append)
    doc = good_doc()
    doc["view"]["source"].update(device="cpu", kernel=kernel)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(path), "")))
    window.act_session_open.trigger()
    if refused:  # the form is filled, then refused in the error strip: naive has no CUDA-graph kernel
        assert "cuda-graph" in window.error_text() and "\n" not in window.error_text()
    else:
        assert window.error_text() == "" and window.form.prompt_edit.toPlainText() == "ab"
    assert window.toolbar.speed_spin.value() == 7
    assert not asked or asked[-1] == 7.0  # the worker is left pacing at the user's speed
