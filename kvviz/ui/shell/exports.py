"""Every view's File > Export, once: an action per kind, the save and open dialogs starting in the folder last
saved to, the check that there is something to write before a dialog opens, the view as PNG or SVG (its panel
area as drawn now), an animation of frames the view shows one by one, the saved path in the status bar and a
refusal in the error strip, and the hook that tells an exception nothing caught there. A view passes in its
kinds (file filter, file name, how to write one) and its words; it knows no records.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, QSettings
from PySide6.QtGui import QAction, QImage, QKeySequence
from PySide6.QtWidgets import QApplication, QFileDialog, QMenu, QWidget

from kvviz.errors import one_line
from kvviz.ui import exporters

FOLDER_KEY = "export/folder"  # every window's save and open dialogs keep their folder under this key


def export_folder(settings: QSettings) -> str:
    """Where the save and open dialogs start: the folder last saved to (by any window), else the home folder;
    never the process's working folder."""
    return settings.value(FOLDER_KEY, str(Path.home()), type=str)


def ask_save_path(parent: QWidget, settings: QSettings, title: str, name: str, file_filter: str) -> str:
    """The save dialog at export_folder with `name` proposed; the folder chosen is kept ("": cancelled)."""
    path, _ = QFileDialog.getSaveFileName(parent, title, str(Path(export_folder(settings)) / name), file_filter)
    if path:
        settings.setValue(FOLDER_KEY, str(Path(path).parent))
    return path


def ask_open_path(parent: QWidget, settings: QSettings, title: str, file_filter: str) -> str:
    """The open dialog at export_folder; the folder chosen is kept ("": cancelled)."""
    path, _ = QFileDialog.getOpenFileName(parent, title, export_folder(settings), file_filter)
    if path:
        settings.setValue(FOLDER_KEY, str(Path(path).parent))
    return path


def report_error(window, text: str) -> None:
    """Shown in the window's error strip and status bar; nothing modal, the app carries on."""
    window.show_error(text)
    window.statusBar().showMessage(text, 15_000)


def install_error_hook(window) -> None:
    """An exception no handler caught (a slot, a menu action, a timer) is told in the window's error strip in
    one line, its traceback on stderr for a report: a terminal is a place a user may never look, and an export
    that fails must not look as if nothing had been asked. The app carries on, as Qt does after one."""

    def hook(kind, exc, tb) -> None:
        sys.__excepthook__(kind, exc, tb)
        try:
            # (the words sit in the translations under the compare window's export context)
            report_error(window, QCoreApplication.translate(
                "ExportActions", "Something failed inside kvviz: {0}: {1} (the details are on the terminal; "
                "please report them)").format(kind.__name__, one_line(str(exc), 200)))
        except Exception:  # a window already closing: stderr has it
            pass

    sys.excepthook = hook


@dataclass(frozen=True)
class ExportKind:
    """One entry of File > Export: its save dialog's filter and proposed file name, and what writes it (a
    path in, the path written out; ValueError, one line, where there is nothing to write). None: the view as
    an image, by the suffix of the kind (png, svg). `needs`: raises ValueError where there is nothing to write,
    said before the save dialog opens."""

    file_filter: str
    name: str
    write: Callable[[str | Path], Path] | None = None
    needs: Callable[[], None] | None = None


class ShellExports(QObject):
    """`actions` by kind (PNG's key Ctrl+E), `export(kind, path)`, `dialog(kind)`, `save(kind, path)`,
    `image()`, `animation(...)`.

    `kinds`: the view's entries in menu order; `texts()`: their menu texts by kind in the current language,
    and "title" (the dialog's title) and "saved" (the status bar's "saved {0}"); `draw()`: the view brought
    up to date before an image; `check()`: raises ValueError where the view has nothing to show yet. A view
    with words of its own for a kind's dialog and reports overrides `words`, `report_saved` and
    `report_failed`."""

    SAVED_MS = 10_000  # how long the status bar says what was saved

    def __init__(self, window, kinds: Mapping[str, ExportKind], texts: Callable[[], dict[str, str]],
                 draw: Callable[[], Any], check: Callable[[], None] | None = None) -> None:
        super().__init__(window)
        self.window = window
        self.kinds = dict(kinds)
        self.texts = texts
        self.draw = draw
        self.check = check
        self.actions: dict[str, QAction] = {
            kind: self.action(lambda _checked=False, k=kind: self.dialog(k), *(("Ctrl+E",) if kind == "png" else ()))
            for kind in self.kinds}

    def action(self, slot: Callable, *keys: str) -> QAction:
        """An action of the window calling `slot`; with `keys`, added to the window so they work with the menu
        bar hidden."""
        act = QAction(self.window)
        act.triggered.connect(slot)
        if keys:
            act.setShortcuts([QKeySequence(k) for k in keys])
            self.window.addAction(act)
        return act

    def fill_menu(self, menu: QMenu) -> None:
        for act in self.actions.values():
            menu.addAction(act)

    def retranslate(self) -> None:
        texts = self.texts()
        for kind, act in self.actions.items():
            act.setText(texts[kind])

    # -- the functions ----------------------------------------------------------------------------
    def image(self, scale: float = 1.0) -> QImage:
        """The window's panel area (transport, narration and panels) as drawn now."""
        self.draw()
        QApplication.processEvents()
        return exporters.render_widget(self.window.panel_area, scale)

    def export(self, kind: str, path: str | Path) -> Path:
        entry = self.kinds.get(kind)
        if entry is None:
            raise ValueError(f"unknown export {kind!r}")
        if entry.write is not None:
            return entry.write(path)
        if self.check is not None:
            self.check()
        if kind == "png":
            return exporters.save_png(self.image(), path)
        if kind == "svg":
            self.draw()
            return exporters.save_svg(self.window.panel_area, path)
        raise ValueError(f"no writer for the export {kind!r}")

    def animation(self, path: str | Path, moments: Iterable, show: Callable[[Any], None],
                  restore: Callable[[], None], fps: float = 4.0) -> Path:
        """One frame per moment (`show(moment)` brings the view to it), as a GIF or an MP4 (by the suffix);
        `restore()` brings the view back after, written or not."""

        def frames():
            for moment in moments:
                show(moment)
                yield exporters.image_array(self.image())

        try:
            exporters.write_animation(path, frames(), fps)
        finally:
            restore()
        return Path(path)

    # -- the dialog and its reports ---------------------------------------------------------------
    def dialog(self, kind: str) -> None:
        """The kind's `needs` checked, the save dialog, then `save`."""
        entry = self.kinds[kind]
        if entry.needs is not None:
            try:
                entry.needs()
            except ValueError as exc:
                self.report_failed(kind, exc)
                return
        title, file_filter, _what = self.words(kind)
        path = self.ask_save_path(title, entry.name, file_filter)
        if path:
            self.save(kind, path)

    def save(self, kind: str, path: str | Path) -> Path | None:
        """`export(kind, path)`, its path said in the status bar, a refusal in the error strip (then None)."""
        try:
            saved = self.export(kind, path)
        except ValueError as exc:
            self.report_failed(kind, exc)
            return None
        self.report_saved(kind, saved)
        return saved

    def words(self, kind: str) -> tuple[str, str, str]:
        """A kind's save dialog title and file filter, and the name its failure is told by (the shell's
        report_failed says the refusal alone)."""
        return self.texts()["title"], self.kinds[kind].file_filter, kind

    def report_saved(self, kind: str, path: Path) -> None:
        self.window.statusBar().showMessage(self.texts()["saved"].format(path), self.SAVED_MS)

    def report_failed(self, kind: str, exc: ValueError) -> None:
        self.window.show_error(str(exc))

    def ask_save_path(self, title: str, name: str, file_filter: str) -> str:
        return ask_save_path(self.window, self.window.settings, title, name, file_filter)

    def ask_open_path(self, title: str, file_filter: str) -> str:
        return ask_open_path(self.window, self.window.settings, title, file_filter)

    def folder(self) -> str:
        """Where the save and open dialogs start (export_folder)."""
        return export_folder(self.window.settings)
