"""The Watch window's File > Export: the view as PNG or SVG, the recording as one offline HTML page
(kvviz.page.watch, as `kvviz watch --replay FILE --page OUT` writes it), and the recording replayed into the
window's panels as a GIF or MP4 (kvviz.ui.exporters' frame writer). Page and animation need a recording: the
one replayed, or the live watch's once it is stopped. The actions, the dialog and the images are the shell's
(kvviz.ui.shell.exports).
"""
from __future__ import annotations

import math
from pathlib import Path

from PySide6.QtCore import QCoreApplication

from kvviz.ui.shell.exports import ExportKind, ShellExports

MAX_FRAMES = 120  # an animation's frames, spread evenly over the recording's samples (as the page's moments)


def _tr(text: str) -> str:
    return QCoreApplication.translate("WatchExports", text)


def texts() -> dict[str, str]:
    """File > Export's texts in the current language (ShellExports' texts)."""
    return {"png": _tr("View as PNG..."), "svg": _tr("View as SVG..."), "page": _tr("Recording as a page..."),
            "gif": _tr("Recording as GIF or MP4..."), "title": _tr("Export"), "saved": _tr("saved {0}")}


class WatchExports(ShellExports):
    """File > Export's actions for a Watch window: the shell's, with the recording as a page and replayed as an
    animation."""

    def __init__(self, window) -> None:
        super().__init__(window, {
            "png": ExportKind("PNG (*.png)", "kvviz-watch.png"),
            "svg": ExportKind("SVG (*.svg)", "kvviz-watch.svg"),
            "page": ExportKind("HTML (*.html)", "kvviz-watch.html", self.page),
            "gif": ExportKind("GIF (*.gif);;MP4 (*.mp4)", "kvviz-watch.gif", self.recording_animation),
        }, texts, window.redraw, self.check_frame)

    def check_frame(self) -> None:
        if self.window.frame is None:
            raise ValueError(_tr("nothing to export: watch a server or open a recording first"))

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

    def page(self, path: str | Path) -> Path:
        from kvviz.page.watch import write_watch_page
        from kvviz.ui import i18n

        return write_watch_page(path, self.recording(), text_of=self.window.text_of, lang=i18n.current_language())

    def moments(self, recording: Path):
        """The recording replayed, one frame per moment (at most MAX_FRAMES, spread evenly over its samples)."""
        from kvviz.ui.watch.source import ReplaySource

        replay = ReplaySource(recording, text_of=self.window.text_of)
        every = max(1, math.ceil(replay.total / MAX_FRAMES))
        while replay.advance(every):
            yield replay.frame()

    def recording_animation(self, path: str | Path, fps: float = 4.0) -> Path:
        """The recording replayed into the window's panels; the window's own source is drawn again after."""
        recording = self.recording()
        kept = self.window.frame, self.window._follow
        return self.animation(path, self.moments(recording), self._show_frame, lambda: self._restore(kept), fps)

    def _show_frame(self, frame) -> None:
        self.window.frame, self.window._follow = frame, True

    def _restore(self, kept: tuple) -> None:
        window = self.window
        window.frame, window._follow = kept
        window._drawn = None
        window.redraw()
