"""The window's dialogs: the KV memory calculator, the keyboard shortcuts table, About. Each is made
when first asked for (its module imported then) and raised when asked again; none is modal but About."""
from __future__ import annotations

from PySide6.QtWidgets import QDialog, QWidget


def show_memory_calculator(window: QWidget, dialog: QDialog | None) -> QDialog:
    """The KV memory calculator (non-modal; one instance, raised when asked again)."""
    from kvviz.ui.memory_dialog import MemoryDialog
    from kvviz.ui.placement import fit_to_screen

    if dialog is None:
        dialog = MemoryDialog(window)
        fit_to_screen(dialog)  # 800x760 is taller than a 1280x720 projector: it scrolls instead
    return _raised(dialog)


def shortcut_rows(window: QWidget) -> list[tuple[str, str]]:
    from kvviz.ui.dialogs.shortcuts import shortcut_rows as rows

    return rows(window)


def show_shortcuts(window: QWidget, dialog: QDialog | None) -> QDialog:
    """Help > Keyboard shortcuts (F1): a table to keep open beside the window."""
    from kvviz.ui.dialogs.shortcuts import ShortcutsDialog

    dialog = dialog or ShortcutsDialog(window)
    dialog.fill()
    return _raised(dialog)


def show_about(window: QWidget, env) -> None:
    from kvviz.ui.dialogs.about import show_about as about

    about(window, env)


def _raised(dialog: QDialog) -> QDialog:
    """Shown, above the window, with the keys."""
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog
