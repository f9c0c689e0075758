"""The Watch window's File > Export: the view as PNG or SVG, the recording as one offline HTML page
(kvviz.page.watch, as `kvviz watch --replay FILE --page OUT` writes it), and the recording replayed into the
window's panels as a GIF or MP4 (kvviz.ui.exporters' frame writer). Page and animation need a recording: the
one replayed, or the live watch's once it is stopped.
"""
from __future__ import annotations

import math
from pathlib import Path

from PySide6.QtCore import QCoreApplication
from PySide6.QtGui import QAction, QImage
from PySide6.QtWidgets import QApplication, QFileDialog, QMenu

from kvviz.ui import exporters

FOLDER_KEY = "export/folder"
MAX_FRAMES = 120  # an animation's frames, spread evenly over the recording's samples (as the page's moments)


def _tr(text: str) -> str:
    return QCoreApplication.translate("WatchExports", text)


class WatchExports:
    def __init__(self, window) -> None:
        self.window = window
        self.actions: dict[str, QAction] = {}
        for kind in ("png", "svg", "page", "gif"):
            act = QAction(window)
            act.triggered.connect(lambda _checked=False, k=kind: self.dialog(k))
            self.actions[kind] = act
        self.actions["png"].setShortcut("Ctrl+E")
        window.addAction(self.actions["png"])

    def fill_menu(self, menu: QMenu) -> None:
        for act in self.actions.values():
            menu.addAction(act)

    def retranslate(self) -> None:
        texts = {"png": _tr("View as PNG..."), "svg": _tr("View as SVG..."), "page": _tr("Recording as a page..."),
                 "gif": _tr("Recording as GIF or MP4...")}
        for kind, act in self.actions.items():
            act.setText(texts[kind])

    def image(self, scale: float = 1.0) -> QImage:
        """The window's panel area (servers, time, narration and panels) as drawn now."""
        self.window.redraw()
        QApplication.processEvents()
        return exporters.render_widget(self.window.panel_area, scale)

    def recording(self) -> Path:
        source = self.window.source
        path = source.recording() if source is not None else None
        if path is None:
            if source is not None and source.live and not source.done:
                raise ValueError(_tr("the page and the animation are made from a recording: Stop the watch first "
                                     "(its recording closes), or replay one"))
            raise ValueError(_tr("the page and the animation are made from a recording: watch with 'Record to', "
                                 "or open a recording"))
        return Path(path)

    def export(self, kind: str, path: str | Path) -> Path:
        if self.window.frame is None and kind in ("png", "svg"):
            raise ValueError(_tr("nothing to export: watch a server or open a recording first"))
        if kind == "png":
            return exporters.save_png(self.image(), path)
        if kind == "svg":
            self.window.redraw()
            return exporters.save_svg(self.window.panel_area, path)
        if kind == "page":
            from kvviz.page.watch import write_watch_page

            return write_watch_page(path, self.recording(), text_of=self.window.text_of)
        if kind == "gif":
            return self.animation(path)
        raise ValueError(f"unknown export {kind!r}")

    def frames(self, recording: Path):
        """The recording replayed into the window's panels, one image per moment (at most MAX_FRAMES, spread
        evenly over its samples); the window's own source is drawn again after."""
        from kvviz.ui.watch.source import ReplaySource

        window = self.window
        replay = ReplaySource(recording, text_of=window.text_of)
        every = max(1, math.ceil(replay.total / MAX_FRAMES))
        kept = window.frame, window._follow
        try:
            while replay.advance(every):
                window.frame, window._follow = replay.frame(), True
                window.redraw()
                QApplication.processEvents()
                yield exporters.image_array(exporters.render_widget(window.panel_area))
        finally:
            window.frame, window._follow = kept
            window._drawn = None
            window.redraw()

    def animation(self, path: str | Path, fps: float = 4.0) -> Path:
        exporters.write_animation(path, self.frames(self.recording()), fps)
        return Path(path)

    def dialog(self, kind: str) -> None:
        filters = {"png": "PNG (*.png)", "svg": "SVG (*.svg)", "page": "HTML (*.html)",
                   "gif": "GIF (*.gif);;MP4 (*.mp4)"}
        name = {"png": "kvviz-watch.png", "svg": "kvviz-watch.svg", "page": "kvviz-watch.html",
                "gif": "kvviz-watch.gif"}[kind]
        path, _ = QFileDialog.getSaveFileName(self.window, _tr("Export"), str(Path(self.folder()) / name),
                                              filters[kind])
        if not path:
            return
        self.window.settings.setValue(FOLDER_KEY, str(Path(path).parent))
        try:
            saved = self.export(kind, path)
        except ValueError as exc:
            self.window.show_error(str(exc))
            return
        self.window.statusBar().showMessage(_tr("saved {0}").format(saved), 10_000)

    def folder(self) -> str:
        return self.window.settings.value(FOLDER_KEY, str(Path.home()), type=str)
