"""Lesson > Edit scenes...: the dialog's heading counts the lesson's scenes in the singular for one ("1 scene"),
in the plural for more."""
from __future__ import annotations

import shutil

from PySide6.QtWidgets import QApplication

from kvviz.lessons import find_lesson
from kvviz.ui.dialogs.scenes import ScenesDialog


def test_the_heading_says_one_scene_in_the_singular(qtbot, tmp_path):
    path = tmp_path / "chapter.toml"
    shutil.copy(find_lesson("07-kv-cache"), path)
    dialog = ScenesDialog(None, path)
    try:
        dialog.show()
        qtbot.waitExposed(dialog)
        n = len(dialog.plan)
        assert f": {n} scenes in " in dialog.heading.text()
        while len(dialog.plan) > 2:
            dialog.list.setCurrentRow(0)
            dialog.remove_selected()
        assert ": 2 scenes in " in dialog.heading.text()
        dialog.list.setCurrentRow(0)
        dialog.remove_selected()
        heading = dialog.heading.text()
        assert ": 1 scene in " in heading, heading
    finally:
        dialog.saved_plan = list(dialog.plan)
        dialog.close()
        dialog.deleteLater()
        QApplication.processEvents()
