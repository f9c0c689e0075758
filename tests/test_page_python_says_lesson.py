"""The lesson deck's line saying where the lesson is comes from Python (kvviz.page.lesson.where_text) in both
languages, at every scene and stop, and reads as the presenter's (which puts the lesson's title in the middle:
the deck shows it apart); lesson.js builds no sentence."""
from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication
from test_lesson_present import presenter  # noqa: F401 - the presenter windows, closed after the test

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_decks_where_line_is_the_presenters_at_every_stop(presenter, tmp_path_factory, lang):  # noqa: F811
    from kvviz.page.lesson import SEP, deck_data

    window = presenter("08-serving", tmp_path_factory, (1280, 720), lang=lang)
    data = deck_data(window.lesson, window.runs, lang)
    title = window.lesson.text(lang)
    seen = 0
    for i, scene in enumerate(data["scenes"]):
        for stop in range(len(scene["stops"])):
            window.go_to(i, stop)
            QApplication.processEvents()
            where = scene["where"][lang][stop]
            first, _sep, rest = where.partition(SEP)
            assert window.where.text() == first + SEP + title + (SEP + rest if rest else ""), (i, stop)
            seen += 1
    assert seen > len(data["scenes"]) and "words" not in data


def test_lesson_js_builds_no_sentence():
    script = (ROOT / "kvviz" / "page" / "lesson.js").read_text(encoding="utf-8")
    assert "DATA.words" not in script and "SCENES.length}" not in script and "stops.length})" not in script
