"""Lesson > Open (kvviz.ui.lessons.opener): a lesson whose runs are missing has them made by a child `kvviz
lesson --check` behind a progress dialog, then is presented; a broken lesson is said in a message box, one line
naming the scene and the field, and nothing is presented."""
from __future__ import annotations

from PySide6.QtWidgets import QApplication, QMessageBox

from kvviz.lessons.runs import missing_runs
from kvviz.ui.lessons.opener import open_lesson

LESSON = """title = "Opened"
[[scene]]
title = "A run"
caption = "{run.new_tokens} tokens"
source = { kind = "compare", prompt = "ab", engines = ["naive", "concat"], tokens = 3 }
panels = ["work_matrix", "recompute"]
[[scene]]
title = "A model"
caption = "{model.kv_per_token_bytes} a token"
source = { kind = "memory", model = "qwen3-0.6b" }
panels = ["kv_per_token"]
"""


def test_open_makes_the_missing_runs_then_presents(qapp, tmp_path):
    path = tmp_path / "opened.toml"
    path.write_text(LESSON, encoding="utf-8")
    window = open_lesson(None, path)
    try:
        assert window is not None and window.isVisible()
        assert missing_runs(window.lesson, tmp_path / "opened.runs") == []
        assert window.caption.text() == "3 tokens"
        window.move(1)
        assert window.caption.text() == "114,688 B a token"
    finally:
        if window is not None:
            window.close()
            window.deleteLater()
        QApplication.processEvents()


def test_open_says_a_broken_lesson_in_one_line(qapp, tmp_path, monkeypatch):
    said = []
    monkeypatch.setattr(QMessageBox, "warning", lambda _parent, _title, text: said.append(text))
    path = tmp_path / "broken.toml"
    path.write_text(LESSON.replace('panels = ["kv_per_token"]', 'panels = ["timeline"]'), encoding="utf-8")
    assert open_lesson(None, path) is None
    assert len(said) == 1 and "\n" not in said[0]
    assert said[0].startswith("broken.toml: scene 2 ('A model'): field 'panels'")
