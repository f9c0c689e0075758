"""Lesson > Edit scenes...: the dialog lists a lesson file's scenes, moves them with Up / Down (Ctrl+Up /
Ctrl+Down), retitles them in both languages (F2), removes them (Delete) and saves once: the file read back has the
new order and titles; nothing is written before Save; a refusal is one line under the list; a built-in lesson is
not edited in place; the window's Lesson menu opens it."""
from __future__ import annotations

import shutil

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from kvviz.lessons import find_lesson, load_lesson
from kvviz.ui.dialogs.scenes import ScenesDialog, TitleDialog, edit_scenes_dialog


@pytest.fixture
def lesson_file(tmp_path):
    path = tmp_path / "chapter.toml"
    shutil.copy(find_lesson("07-kv-cache"), path)
    return path


@pytest.fixture
def dialog(qtbot, lesson_file):
    """The dialog on a copy of a built-in lesson, closed after the test without the unsaved-changes question."""
    made = ScenesDialog(None, lesson_file)
    made.show()
    qtbot.waitExposed(made)
    yield made
    made.saved_plan = list(made.plan)
    made.close()
    made.deleteLater()
    QApplication.processEvents()


def titles(path) -> list[str]:
    return [s.title["en"] for s in load_lesson(path).scenes]


def test_moved_retitled_and_removed_scenes_are_written_on_save_only(dialog, lesson_file, qtbot):
    before = titles(lesson_file)
    text = lesson_file.read_bytes()
    assert dialog.list.count() == len(before) and dialog.titles() == before
    assert not dialog.save_button.isEnabled() and not dialog.up.isEnabled()
    dialog.list.setCurrentRow(2)
    qtbot.mouseClick(dialog.up, Qt.MouseButton.LeftButton)
    assert dialog.titles()[:3] == [before[0], before[2], before[1]] and dialog.list.currentRow() == 1
    assert dialog.rename_selected("Prefill first", "先 Prefill")
    dialog.list.setCurrentRow(len(before) - 1)
    qtbot.mouseClick(dialog.remove, Qt.MouseButton.LeftButton)
    assert lesson_file.read_bytes() == text  # nothing written before Save
    assert dialog.save_button.isEnabled()
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    lesson = load_lesson(lesson_file)
    assert [s.title["en"] for s in lesson.scenes] == [before[0], "Prefill first", before[1], *before[3:-1]]
    assert lesson.scenes[1].title["zh"] == "先 Prefill"
    assert "# Chapter 07" in lesson_file.read_text(encoding="utf-8")  # the file's comments kept
    assert not dialog.changed and not dialog.error.isVisible()


def test_the_keys_move_rename_and_remove(dialog, lesson_file, qtbot):
    before = titles(lesson_file)
    dialog.list.setCurrentRow(0)
    dialog.list.setFocus()
    qtbot.keyClick(dialog.list, Qt.Key.Key_Down, Qt.KeyboardModifier.ControlModifier)
    assert dialog.titles()[:2] == [before[1], before[0]]
    qtbot.keyClick(dialog.list, Qt.Key.Key_Up, Qt.KeyboardModifier.ControlModifier)
    assert dialog.titles()[:2] == before[:2]
    qtbot.keyClick(dialog.list, Qt.Key.Key_Delete)
    assert dialog.titles() == before[1:]

    def answer() -> None:
        box = QApplication.activeModalWidget()
        assert isinstance(box, TitleDialog)
        box.english.setText("Renamed by F2")
        box.chinese.setText("")
        box.accept()

    QTimer.singleShot(0, answer)
    qtbot.keyClick(dialog.list, Qt.Key.Key_F2)
    assert dialog.titles()[0] == "Renamed by F2" and dialog.plan[0][1] == {"en": "Renamed by F2"}


def test_an_empty_english_title_and_a_refused_save_are_said_in_one_line(dialog, lesson_file):
    dialog.list.setCurrentRow(0)
    assert not dialog.rename_selected("  ", "中文")
    assert dialog.error.isVisible() and "English" in dialog.error.text()
    dialog.list.setCurrentRow(1)
    dialog.move_selected(-1)
    lesson_file.write_text("title = 'broken'\n", encoding="utf-8")  # the file changed under the dialog
    assert not dialog.save()
    assert dialog.error.isVisible() and "\n" not in dialog.error.text() and "chapter.toml" in dialog.error.text()
    assert lesson_file.read_text(encoding="utf-8") == "title = 'broken'\n"


def test_a_built_in_lesson_is_not_edited_in_place(qtbot, monkeypatch):
    said = []
    monkeypatch.setattr(QMessageBox, "warning", lambda _parent, _title, text: said.append(text))
    assert edit_scenes_dialog(None, find_lesson("07-kv-cache")) is None
    assert len(said) == 1 and "built-in lesson" in said[0] and "\n" not in said[0]


def test_the_lesson_menu_opens_the_dialog_on_the_chosen_file(open_window, lesson_file, monkeypatch, qtbot):
    from PySide6.QtWidgets import QFileDialog

    window = open_window()
    assert window.act_lesson_edit in window.lesson_menu.actions()
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *_args, **_kw: (str(lesson_file), ""))
    window.act_lesson_edit.trigger()
    shown = window.scenes_dialog
    assert shown is not None and shown.isVisible() and shown.titles() == titles(lesson_file)
    shown.move_selected(+1)
    asked = []
    monkeypatch.setattr(QMessageBox, "question", lambda *args: asked.append(args) or QMessageBox.StandardButton.Discard)
    shown.close()  # unsaved changes: asked about (Discard answered), the file left as it was
    assert len(asked) == 1 and not shown.isVisible() and shown.saved_plan != shown.plan
