"""Every view's File > Export, once: an action per kind, the save dialog starting in the folder last saved to,
the view as PNG or SVG (its panel area as drawn now), an animation of frames the view shows one by one, the
saved path in the status bar and a bad one in the error strip. A view passes in its kinds (file filter, file
name, how to write one) and its texts; it knows no records.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSettings
from PySide6.QtGui import QAction, QImage
from PySide6.QtWidgets import QApplication, QFileDialog, QMenu, QWidget

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


@dataclass(frozen=True)
class ExportKind:
    """One entry of File > Export: its save dialog's filter and proposed file name, and what writes it (a
    path in, the path written out; ValueError, one line, where there is nothing to write). None: the view as
    an image, by the suffix of the kind (png, svg)."""

    file_filter: str
    name: str
    write: Callable[[str | Path], Path] | None = None


class ShellExports:
    """`actions` by kind (PNG's key Ctrl+E), `export(kind, path)`, `dialog(kind)`, `image()`, `animation(...)`.

    `kinds`: the view's entries in menu order; `texts()`: their menu texts by kind in the current language,
    and "title" (the dialog's title) and "saved" (the status bar's "saved {0}"); `draw()`: the view brought
    up to date before an image; `check()`: raises ValueError where the view has nothing to show yet."""

    def __init__(self, window, kinds: Mapping[str, ExportKind], texts: Callable[[], dict[str, str]],
                 draw: Callable[[], Any], check: Callable[[], None] | None = None) -> None:
        self.window = window
        self.kinds = dict(kinds)
        self.texts = texts
        self.draw = draw
        self.check = check
        self.actions: dict[str, QAction] = {}
        for kind in self.kinds:
            act = QAction(window)
            act.triggered.connect(lambda _checked=False, k=kind: self.dialog(k))
            self.actions[kind] = act
        if "png" in self.actions:
            self.actions["png"].setShortcut("Ctrl+E")
            window.addAction(self.actions["png"])

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

    def dialog(self, kind: str) -> None:
        entry, texts = self.kinds[kind], self.texts()
        path = ask_save_path(self.window, self.window.settings, texts["title"], entry.name, entry.file_filter)
        if not path:
            return
        try:
            saved = self.export(kind, path)
        except ValueError as exc:
            self.window.show_error(str(exc))
            return
        self.window.statusBar().showMessage(texts["saved"].format(saved), 10_000)

    def folder(self) -> str:
        """Where the save and open dialogs start (export_folder)."""
        return export_folder(self.window.settings)
