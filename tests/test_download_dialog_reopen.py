"""Model > Download model opens fresh each time: the last use's one-line error and progress are gone, the id typed
then stays, selected, so that typing replaces it."""
from __future__ import annotations

from PySide6.QtCore import Qt


def test_the_download_dialog_reopens_without_the_last_error(open_window, qtbot):
    window = open_window()
    action = next(a for a in window.model_menu.actions() if a.text() == "Download model...")
    action.trigger()
    dialog = window.download_dialog
    qtbot.keyClicks(dialog.id_edit, "bad id")
    qtbot.keyClick(dialog.id_edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not dialog.busy(), timeout=30_000)
    assert "is not a model id" in dialog.status_label.text()
    dialog.close()

    action.trigger()
    assert window.download_dialog is dialog and dialog.isVisible()
    assert dialog.status_label.text().strip() == ""
    assert dialog.bar.value() == 0 and dialog.bar.format() == ""
    assert dialog.id_edit.text() == "bad id" and dialog.id_edit.selectedText() == "bad id"
    qtbot.keyClicks(dialog.id_edit, "Qwen/Qwen3-0.6B")  # typing replaces the last id
    assert dialog.id_edit.text() == "Qwen/Qwen3-0.6B"
    dialog.close()
