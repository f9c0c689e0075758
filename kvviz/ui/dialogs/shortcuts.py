"""Help > Keyboard shortcuts: a table of every action's keys, read from the window's actions (menus,
the transport, exports) so it cannot drift, then the mouse's gestures. Not modal: it stays open
beside the window, and follows a language switch."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDialog, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from kvviz.ui.qtutil import translator

_tr = translator("ShortcutsDialog")


def shortcut_rows(window: QWidget) -> list[tuple[str, str]]:
    """(what, keys) for every action of the window with a shortcut, in the order they were made; then
    the mouse's gestures."""
    rows: list[tuple[str, str]] = []
    for act in window.findChildren(QAction):
        keys = list(dict.fromkeys(k.toString(QKeySequence.SequenceFormat.NativeText) for k in act.shortcuts()))
        text = act.property("shortcut_help") or act.text().replace("&&", "\0").replace("&", "").replace("\0", "&")
        text = text.strip()
        if keys and text and (text, ", ".join(keys)) not in rows:
            rows.append((text, ", ".join(keys)))
    rows.append((_tr("Show a step"), _tr("click a point, a row or a token in a panel")))
    rows.append((_tr("Give a panel the whole grid, or share it again"), _tr("double-click its title")))
    rows.append((_tr("Resize panels"), _tr("drag the gaps between them")))
    return rows


class ShortcutsDialog(QDialog):
    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self.window_ = window
        self.setWindowFlag(Qt.WindowType.WindowContextHelpButtonHint, False)
        self.setObjectName("shortcuts_dialog")
        self.table = QTableWidget(0, 2, self)
        self.table.setObjectName("shortcuts_table")
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QTableWidget.SelectionMode.NoSelection)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.table.horizontalHeader().setStretchLastSection(True)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        self.resize(460, 560)

    def fill(self) -> None:
        """The rows and titles in the current language (again after a switch)."""
        rows = shortcut_rows(self.window_)
        self.setWindowTitle(self.tr("Keyboard shortcuts"))
        self.table.setHorizontalHeaderLabels([self.tr("Action"), self.tr("Keys")])
        self.table.setRowCount(len(rows))
        for i, (text, keys) in enumerate(rows):
            self.table.setItem(i, 0, QTableWidgetItem(text))
            self.table.setItem(i, 1, QTableWidgetItem(keys))
        self.table.resizeColumnToContents(0)
        self.table.resizeRowsToContents()
