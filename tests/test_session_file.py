"""A session file: the compare window's view (form, panels shown and the one alone, zoom, step, narration) saved
with its run as a trace beside it, and reopened in a second window, which then shows the same view and replays the
same run; a broken session file is refused in one line before the window changes."""
from __future__ import annotations

import json

import pytest
from conftest import settings_at
from test_lesson_capture import app_zoom_back, short_run_shown  # noqa: F401 (a fixture, used by name)

from kvviz.ui.lessons.capture import selected_step
from kvviz.ui.session_file import apply_session, read_session, save_session, trace_path


def prepared(open_window, qtbot):
    """A window that ran a short comparison and shows step 2 of it, three panels, work_matrix alone, at 125%."""
    window = short_run_shown(open_window(), qtbot)
    window.grid.show_alone("work_matrix")
    window.act_narration.setChecked(False)
    return window


def view_of(window) -> tuple:
    checked = [k for k, act in window.grid.panel_actions.items() if act.isChecked()]
    return (window.build_request().run, window.build_request().model, checked, window.grid.shown_panels(),
            window.presentation.zoom, selected_step(window), window.act_narration.isChecked())


@pytest.mark.usefixtures("app_zoom_back")
def test_a_session_saved_and_reopened_reproduces_the_view_and_replays_the_run(open_window, qtbot, tmp_path):
    first = prepared(open_window, qtbot)
    path = tmp_path / "lecture.json"
    save_session(first, path)
    assert trace_path(path).is_file() and json.loads(path.read_text())["run"] == "lecture.trace.json"
    expected = view_of(first)
    assert expected[3] == ["work_matrix"] and expected[4:] == (125, 2, False)
    tokens = [t.token_id for t in first.history.traces["concat"]]

    first.presentation.set_zoom(100, save=False)
    second = open_window(settings=settings_at(tmp_path / "second.ini"))
    assert second.history.n_steps() == 0
    apply_session(second, read_session(path))
    assert view_of(second) == expected
    assert [t.token_id for t in second.history.traces["concat"]] == tokens  # the run, replayed


@pytest.mark.usefixtures("app_zoom_back")
def test_a_session_without_a_run_keeps_the_form_and_layout(open_window, tmp_path):
    first = open_window()
    first.form.prompt_edit.setPlainText("Only the form")
    first.form.tokens_spin.setValue(9)
    path = tmp_path / "form-only.json"
    save_session(first, path)
    assert json.loads(path.read_text())["run"] is None and not trace_path(path).exists()
    second = open_window(settings=settings_at(tmp_path / "second.ini"))
    apply_session(second, read_session(path))
    assert second.build_request().run == first.build_request().run and second.history.n_steps() == 0


@pytest.mark.usefixtures("app_zoom_back")
def test_a_session_keeps_the_compared_kernel_the_repeats_and_the_speculative_settings(open_window, qtbot, tmp_path):
    first = prepared(open_window, qtbot)
    form = first.form
    form.set_engines(("static", "spec-lookup"))
    form.compare_combo.setCurrentIndex(form.compare_combo.findData("native"))
    form.repeat_spin.setValue(3)
    form.spec_k_spin.setValue(6)
    form.rollback_combo.setCurrentIndex(form.rollback_combo.findData("crop"))
    path = tmp_path / "spec.json"
    save_session(first, path)
    assert json.loads(path.read_text())["form"] == {"compare_kernel": "native", "repeat": 3, "spec_k": 6,
                                                    "rollback": "crop"}
    second = open_window(settings=settings_at(tmp_path / "second.ini"))
    apply_session(second, read_session(path))
    kept = second.form
    assert (kept.compare_combo.currentData(), kept.repeat_spin.value(), kept.spec_k_spin.value(),
            kept.rollback_combo.currentData()) == ("native", 3, 6, "crop")


def good_doc() -> dict:
    return {"kvviz": "session", "version": 1, "alone": None, "narration": True, "run": None,
            "view": {"source": {"kind": "compare", "prompt": "ab", "engines": ["naive"], "tokens": 4},
                     "panels": ["work_matrix"], "zoom": 100}}


@pytest.mark.parametrize(("change", "says"), [
    (lambda d: d.update(kvviz="lesson"), r"s\.json: not a kvviz session file"),
    (lambda d: d.update(extra=1), r"s\.json: unknown field 'extra'"),
    (lambda d: d.update(version=2), r"s\.json: field 'version' must be 1, got 2"),
    (lambda d: d["view"].update(zoom=900), r"s\.json: field 'view': field 'zoom' must be a whole number"),
    (lambda d: d["view"].update(panels=["nope"]), r"s\.json: field 'view': field 'panels': no panel 'nope'"),
    (lambda d: d["view"]["source"].update(engines=["warp"]), r"s\.json: field 'view': field 'source\.engines'"),
    (lambda d: d.update(alone="bytes"), r"s\.json: field 'alone': 'bytes' is not one of the view's panels"),
    (lambda d: d.update(narration="yes"), r"s\.json: field 'narration' must be true or false"),
    (lambda d: d.update(run="missing.trace.json"), r"s\.json: field 'run': .*missing\.trace\.json"),
    (lambda d: d.update(form={"repeat": 0}), r"s\.json: field 'form\.repeat' must be "),
    (lambda d: d.update(form={"spec_k": "4"}), r"s\.json: field 'form\.spec_k' must be a whole number"),
    (lambda d: d.update(form={"rollback": "undo"}), r"s\.json: field 'form\.rollback' must be one of "),
    (lambda d: d.update(form={"compare_kernel": "gpu"}), r"s\.json: field 'form\.compare_kernel' must be one of"),
    (lambda d: d.update(form={"speed": 1}), r"s\.json: unknown field 'form\.speed'"),
])
def test_a_broken_session_file_is_refused_in_one_line(tmp_path, change, says):
    doc = good_doc()
    change(doc)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match=says) as info:
        read_session(path)
    assert "\n" not in str(info.value)


def test_a_file_that_is_not_json_is_refused_in_one_line(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"kvviz": "session",', encoding="utf-8")
    with pytest.raises(ValueError, match=r"s\.json: not valid JSON") as info:
        read_session(path)
    assert "\n" not in str(info.value)
    assert read_session(_written(tmp_path / "ok.json", good_doc())).scene.panels == ("work_matrix",)


def _written(path, doc):
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_the_file_menu_refuses_a_broken_session_in_one_line_and_leaves_the_window_as_it_was(open_window, tmp_path):
    from kvviz.ui.session_file import open_session_dialog

    window = open_window()
    assert {window.act_session_open, window.act_session_save} <= set(window.file_menu.actions())
    doc = good_doc()
    doc["view"]["zoom"] = 900
    before = view_of(window)
    assert open_session_dialog(window, _written(tmp_path / "s.json", doc)) is None
    assert "s.json: field 'view': field 'zoom'" in window.error_text() and "\n" not in window.error_text()
    assert view_of(window) == before


@pytest.mark.usefixtures("app_zoom_back")
def test_main_py_session_opens_the_window_on_the_session_once_its_engines_and_panels_are_there(qapp, tmp_path,
                                                                                           monkeypatch):
    """`kvviz gui --session FILE` (python main.py --session FILE): the window opens, lists its engines and builds its
    panels after the first paint, and then shows the session's form, panels (one alone) and zoom."""
    import signal
    import sys
    import threading
    import time

    from PySide6.QtWidgets import QApplication

    from kvviz import cli
    from kvviz.ui import app as app_module

    doc = good_doc()
    doc["view"].update(panels=["work_matrix", "bytes"], zoom=150)
    doc["view"]["source"].update(prompt="From the session", tokens=7)
    doc["alone"] = "bytes"
    seen: dict = {}

    class LookThenClose:
        """Stands in for QApplication.exec: runs events until the session is applied, then closes the window."""

        def __init__(self, qt_app) -> None:
            self.qt_app = qt_app

        def exec(self) -> int:
            deadline = time.monotonic() + 90
            window = None
            while time.monotonic() < deadline:
                QApplication.processEvents()
                window = next((w for w in QApplication.topLevelWidgets() if hasattr(w, "history") and w.isVisible()),
                              None)
                if window is not None and window.presentation.zoom == 150:
                    break
                time.sleep(0.01)
            if window is not None:
                seen["view"] = (window.form.prompt_edit.toPlainText(), window.form.tokens_spin.value(),
                                window.grid.shown_panels(), window.presentation.zoom, window.error_text())
                window.close()
                window.deleteLater()
            QApplication.processEvents()
            return 0

    real = app_module.ensure_app
    monkeypatch.setattr(app_module, "ensure_app", lambda *argv: LookThenClose(real(*argv)))
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # the window's error hook given back after the test
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    monkeypatch.setattr(signal, "signal", lambda *_args: None)  # Ctrl+C stays pytest's
    assert cli.main(["gui", "--session", str(_written(tmp_path / "s.json", doc)),
                     "--settings", str(tmp_path / "kvviz.ini")]) == 0
    assert seen["view"] == ("From the session", 7, ["bytes"], 150, "")


def test_main_py_refuses_a_broken_session_in_one_line_with_exit_code_2(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    doc = good_doc()
    doc["view"]["panels"] = ["nope"]
    env = dict(os.environ, PYTHONPATH=str(root), QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run([sys.executable, str(root / "main.py"), "--session", str(_written(tmp_path / "s.json", doc))],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "s.json: field 'view': field 'panels'" in lines[0], proc.stderr
