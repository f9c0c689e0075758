"""The window's dialogs: the KV memory calculator, the keyboard shortcuts table, About. Each is made
when first asked for (its module imported then) and raised when asked again; none is modal but About.
The calculator, once open, follows the run the window shows (refresh_memory_calculator)."""
from __future__ import annotations

from PySide6.QtWidgets import QDialog, QWidget


def show_memory_calculator(window: QWidget, dialog: QDialog | None) -> QDialog:
    """The KV memory calculator (non-modal; one instance, raised when asked again), showing what the window
    shows (refresh_memory_calculator)."""
    from kvviz.ui.dialogs.memory import MemoryDialog
    from kvviz.ui.placement import fit_to_screen

    if dialog is None:
        dialog = MemoryDialog(window)
        fit_to_screen(dialog)  # 800x760 is taller than a 1280x720 projector: it scrolls instead
    _raised(dialog)
    refresh_memory_calculator(window, dialog)  # before its first paint
    return dialog


def follow_memory_calculator(window: QWidget, dialog: QDialog | None) -> None:
    """Each frame: an open calculator told of a run it has not shown (a run started, a trace opened); else
    a string comparison and nothing more."""
    if dialog is not None and dialog.run_id() != window.history.info.run_id:
        refresh_memory_calculator(window, dialog)


def refresh_memory_calculator(window: QWidget, dialog: QDialog | None) -> None:
    """An open calculator told what the window shows now (a run started or finished, a trace opened): the app's
    model presets, the run shown (its model's config where the form knows it, its engines' measured decode
    tokens/s, its read ceiling) and the form's CPU threads. Nothing while it is closed: opening it tells it."""
    if dialog is None or not dialog.isVisible():
        return
    from kvviz.ui.dialogs.memory import run_figures

    env, models = window.env, window.form.models
    if env is not None:
        presets = [m for m in env.models if m.config is not None]
        dialog.add_models({m.name: m.config for m in presets}, {m.name: m.description for m in presets})
    info = window.history.info
    choice = models.get(info.model_name) if info.model_name else None
    # a run the window asked for ran here; a replayed trace's ceiling is the machine's that recorded it
    run = run_figures(window.history, choice.config if choice is not None else None,
                      own=bool(info.run_id) and info.run_id == window.run_id)
    threads = window.torch_threads or (env.threads if env is not None else None)
    dialog.set_context(run, threads)


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
