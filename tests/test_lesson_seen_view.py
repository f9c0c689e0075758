"""A scene captured from the compare window keeps what the user saw: the panels laid out in the grid (not those
behind tabs), the largest of them large, or the one shown alone. The presenter gives a scene's side panels their
readable height or puts them behind tabs, never slivers; a slide's Summary does not point at a narration."""
from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication

from kvviz.lessons import LessonRuns, load_lesson, make_missing
from kvviz.ui.lessons.capture import capture_view

EVERY_PANEL = ["token_stream", "work_matrix", "recompute", "attention", "latency", "bytes", "cache_memory", "summary"]


@pytest.fixture
def app_zoom_back(qapp):
    """Presenters and zoom changes leave the app's font and zoom as they found them, for the tests after."""
    from kvviz.ui import i18n, style

    font, zoom, language = QApplication.font(), round(style.ZOOM * 100), i18n.current_language()
    yield
    QApplication.setFont(font)
    style.set_zoom(zoom)
    if i18n.current_language() != language:
        i18n.set_language(language)


def test_a_captured_view_keeps_the_panels_laid_out_and_the_one_shown_alone(open_window, qtbot, app_zoom_back):
    window = open_window()
    window.resize(1280, 720)
    form = window.form
    form.prompt_edit.setPlainText("The cache holds")
    form.set_engines(("naive", "concat", "static", "paged"))
    form.tokens_spin.setValue(6)
    for key, act in window.grid.panel_actions.items():
        act.setChecked(key in EVERY_PANEL)
    with qtbot.waitSignal(window.run_finished, timeout=120_000):
        assert window.start_run()
    grid = window.grid
    qtbot.waitUntil(lambda: bool(grid.moved), timeout=10_000)  # 1280x720 has no room for all eight
    laid = grid.laid_out()
    doc = capture_view(window, "Seen")
    assert doc["panels"] == [k for k in grid.shown_panels() if k in laid]
    assert not set(doc["panels"]) & set(grid.moved)
    largest = max(laid, key=lambda k: grid.frames[k].width() * grid.frames[k].height())
    assert doc["large"] == largest

    grid.toggle_focus("latency")  # a double-click on its title: the panel alone
    qtbot.waitUntil(lambda: grid.laid_out() == ["latency"], timeout=10_000)
    doc = capture_view(window, "Alone")
    assert (doc["panels"], doc["large"]) == (["latency"], "latency")


LESSON = """
title = "Every panel"
[[scene]]
title = "All eight"
caption = "The cache"
source = { kind = "compare", prompt = "The key", engines = ["naive", "concat", "static", "paged"], tokens = 12 }
panels = ["token_stream", "work_matrix", "recompute", "attention", "latency", "bytes", "cache_memory", "summary"]
large = "token_stream"
step = -1
"""


def presented(tmp_path: Path, size):
    from kvviz.ui.lessons.presenter import PresenterWindow

    path = tmp_path / "every.toml"
    path.write_text(LESSON, encoding="utf-8")
    lesson = load_lesson(path)
    make_missing(lesson, tmp_path / "runs", say=lambda _text: None)
    runs = LessonRuns(lesson, tmp_path / "runs")
    runs.load_all()
    window = PresenterWindow(lesson, runs, "en")
    window.resize(*size)
    window.show()
    window.go_to(0)
    QApplication.processEvents()
    return window


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_a_scene_of_many_panels_puts_those_without_room_behind_tabs(qapp, tmp_path, app_zoom_back, size):
    from kvviz.ui.lessons.stage import box_need

    window = presented(tmp_path, size)
    try:
        page = window.stage.page
        half = (page.side.height() - page.column.spacing()) // 2
        assert page.tabbed and page.tabs.isVisible()  # seven beside the token stream: not all have room
        stacked = [b for b in page.boxes[1:] if b not in page.tabbed]
        for box in stacked:  # each its readable height, or half the column
            assert box.isVisible() and box.height() >= min(box_need(box, box.width()), half) - 2, box.key
        assert sorted(b.key for b in page.boxes) == sorted(EVERY_PANEL)
        for box in page.tabbed:  # every one there, shown at the tab's whole height when its tab is picked
            page.tabs.setCurrentWidget(box)
            QApplication.processEvents()
            assert box.isVisible() and box.height() >= min(box_need(box, box.width()), half) - 2, box.key
            assert page.tabs.tabText(page.tabs.indexOf(box)) == box.panel.title()
    finally:
        window.close()
        window.deleteLater()
        QApplication.processEvents()


def test_a_slides_summary_says_its_rows_set_aside_without_a_narration(qapp, tmp_path, app_zoom_back):
    from kvviz.ui.lessons.stage import SceneStage, make_panel

    window = presented(tmp_path, (1280, 720))
    try:
        run = window.runs.of(window.lesson.scenes[0])
        history, last = SceneStage.history(run), run.n_steps - 1
        for on_slide in (False, True):
            panel = make_panel("compare", "summary") if on_slide else None
            if panel is None:
                from kvviz.ui.panels.summary import SummaryPanel

                panel = SummaryPanel()
            panel.resize(420, 170)  # too short for the memory wall's rows
            panel.show()
            panel.show_step(history, last)
            QApplication.processEvents()
            heading = panel._heading.text()
            assert panel.set_aside(), heading
            assert ("narration" in heading) is not on_slide, heading
            panel.close()
            panel.deleteLater()
    finally:
        window.close()
        window.deleteLater()
        QApplication.processEvents()
