"""The lesson deck's line saying where the lesson is comes from Python (kvviz.page.lesson.where_text) in both
languages, at every scene and stop, and reads as the presenter's (which puts the lesson's title in the middle:
the deck shows it apart: where_text with the title is the presenter's line); lesson.js builds no sentence."""
from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication
from test_lesson_present import presenter  # noqa: F401 - the presenter windows, closed after the test

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_decks_where_line_is_the_presenters_at_every_stop(presenter, tmp_path_factory, lang):  # noqa: F811
    from kvviz.page.lesson import deck_data, where_text

    window = presenter("08-serving", tmp_path_factory, (1280, 720), lang=lang)
    data = deck_data(window.lesson, window.runs, lang)
    title = window.lesson.text(lang)
    seen = 0
    for i, scene in enumerate(data["scenes"]):
        for stop in range(len(scene["stops"])):
            window.go_to(i, stop)
            QApplication.processEvents()
            memory = scene["kind"] == "memory"
            assert window.where.text() == where_text(i, len(data["scenes"]), scene["stops"][stop], stop,
                                                     len(scene["stops"]), memory, lang, title), (i, stop)
            assert scene["where"][lang][stop] == where_text(i, len(data["scenes"]), scene["stops"][stop], stop,
                                                            len(scene["stops"]), memory, lang), (i, stop)
            seen += 1
    assert seen > len(data["scenes"]) and "words" not in data


def test_lesson_js_builds_no_sentence():
    script = (ROOT / "kvviz" / "page" / "lesson.js").read_text(encoding="utf-8")
    assert "DATA.words" not in script and "SCENES.length}" not in script and "stops.length})" not in script
