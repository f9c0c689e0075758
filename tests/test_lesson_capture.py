"""The compare window's view as a lesson scene: captured (form, step, panels, zoom), added to a lesson file, read
back, and applied to a second window, which then shows the same view: the same run settings, panels, zoom and,
once it has run, the same step."""
from __future__ import annotations

import pytest
from conftest import settings_at

from kvviz.lessons import LessonError, load_lesson
from kvviz.ui.lessons.capture import add_scene, apply_scene, capture_view, selected_step, toml_value

SHOWN = ["token_stream", "work_matrix", "bytes"]


def run_to_end(qtbot, window) -> None:
    with qtbot.waitSignal(window.run_finished, timeout=120_000):
        assert window.start_run()


@pytest.fixture
def app_zoom_back(qapp):
    """View > Zoom sets the app's font: back to 100% after the test, for the tests after it."""
    from PySide6.QtWidgets import QApplication

    font = QApplication.font()
    yield
    QApplication.setFont(font)
    from kvviz.ui import style

    style.set_zoom(100)


def short_run_shown(window, qtbot):
    """The window after a six-token naive/concat run (seed 3), showing its step 2 in three panels at 125%."""
    form = window.form
    form.prompt_edit.setPlainText("The cache holds")
    form.set_engines(("naive", "concat"))
    form.tokens_spin.setValue(6)
    form.seed_spin.setValue(3)
    for key, act in window.grid.panel_actions.items():
        act.setChecked(key in SHOWN)
    window.presentation.set_zoom(125, save=False)
    run_to_end(qtbot, window)
    window.select_step(2)
    return window


def test_a_captured_view_saved_and_reopened_reproduces_the_view(open_window, qtbot, tmp_path, app_zoom_back):
    first = short_run_shown(open_window(), qtbot)

    lesson_path = tmp_path / "mine.toml"
    add_scene(lesson_path, capture_view(first, "My view", "What the class sees"))
    scene = load_lesson(lesson_path).scenes[0]
    s = scene.source.settings
    assert (s["prompt"], s["engines"], s["tokens"], s["seed"], s["model"]) == (
        "The cache holds", ["naive", "concat"], 6, 3, "tiny-random")
    assert (list(scene.panels), scene.zoom, scene.step) == (SHOWN, 125, 2)
    assert scene.caption["en"] == "What the class sees"

    second = open_window(settings=settings_at(tmp_path / "second.ini"))
    apply_scene(second, scene)
    assert second.build_request().run == first.build_request().run
    assert second.build_request().model == first.build_request().model
    assert second.grid.shown_panels() == SHOWN and second.presentation.zoom == 125
    run_to_end(qtbot, second)
    apply_scene(second, scene)
    assert selected_step(second) == 2
    assert [t.token_id for t in second.history.traces["concat"]] == [t.token_id for t in first.history.traces["concat"]]


def test_a_scene_the_lesson_would_refuse_is_not_added(tmp_path):
    path = tmp_path / "mine.toml"
    doc = {"title": {"en": "Bad"}, "caption": {"en": "c"}, "panels": ["work_matrix"], "zoom": 900,
           "source": {"kind": "compare", "prompt": "ab", "engines": ["naive"], "tokens": 4}}
    with pytest.raises(LessonError, match=r"scene 1 \('Bad'\): field 'zoom'"):
        add_scene(path, doc)
    assert not path.exists()


def test_toml_values_read_back_as_written():
    import tomllib

    value = {"a": "引号 \" and \\ and \n", "b": [1, 2.5, True], "c": {"d": -1}}
    assert tomllib.loads(f"x = {toml_value(value)}")["x"] == value
