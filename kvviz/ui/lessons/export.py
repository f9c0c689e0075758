"""A lesson handed out without a screen: one PNG per scene at slide size, a PDF handout (Qt's QPdfWriter, one
page per scene), both drawn by the presenter itself offscreen; and the timing of moving between scenes.
Files go through kvviz.fileio's output rule (a temporary name, renamed). No torch: the runs are loaded.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from kvviz.lessons.lesson import Lesson
from kvviz.lessons.runs import LessonRuns


def offscreen_presenter(lesson: Lesson, runs: LessonRuns, size: tuple[int, int], lang: str):
    """The presenter built offscreen (no display needed) at `size`, shown so its layout is real."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import qInstallMessageHandler

    from kvviz.ui import qtapp as app
    from kvviz.ui.headless import quiet_qt_messages
    from kvviz.ui.lessons.presenter import PresenterWindow

    qInstallMessageHandler(quiet_qt_messages)
    qapp = app.ensure_app()
    window = PresenterWindow(lesson, runs, lang)
    window.resize(*size)
    window.show()
    qapp.processEvents()
    return window


def drawn(window):
    """The presenter as it is on screen now (a QImage), after the events a draw left are handled."""
    from PySide6.QtWidgets import QApplication

    QApplication.processEvents()
    return window.grab().toImage()


def scene_images(lesson: Lesson, runs: LessonRuns, size: tuple[int, int], lang: str):
    """(scene, QImage) for each scene at its first stop."""
    window = offscreen_presenter(lesson, runs, size, lang)
    try:
        for i, scene in enumerate(lesson.scenes):
            window.go_to(i)
            window.draw()  # a second draw: the plots settled at their laid-out size
            yield scene, drawn(window)
    finally:
        window.close()
        window.deleteLater()


def write_pngs(lesson: Lesson, runs: LessonRuns, folder: Path, size: tuple[int, int], lang: str) -> list[Path]:
    """scene-01.png ... in `folder` (made if missing), each `size` pixels."""
    from kvviz.fileio import atomic_write

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for scene, image in scene_images(lesson, runs, size, lang):
        path = folder / f"scene-{scene.index:02d}.png"

        def save(tmp: Path, image=image, path=path) -> None:
            if not image.save(str(tmp), "PNG"):
                raise ValueError(f"cannot write {path}: Qt could not save the image")

        out.append(atomic_write(path, save))
    return out


def write_pdf(lesson: Lesson, runs: LessonRuns, path: Path, lang: str, size: tuple[int, int] = (1600, 900)) -> Path:
    """A handout: one landscape A4 page per scene, the presenter's picture of it scaled to the page."""
    from PySide6.QtCore import QMarginsF, QRect
    from PySide6.QtGui import QPageLayout, QPageSize, QPainter, QPdfWriter

    from kvviz.fileio import atomic_write

    images = [image for _scene, image in scene_images(lesson, runs, size, lang)]

    def write(tmp: Path) -> None:
        writer = QPdfWriter(str(tmp))
        writer.setPageLayout(QPageLayout(QPageSize(QPageSize.PageSizeId.A4), QPageLayout.Orientation.Landscape,
                                         QMarginsF(10, 10, 10, 10)))
        writer.setResolution(150)
        writer.setTitle(f"kvviz: {lesson.text(lang)}")
        writer.setCreator("kvviz lesson")
        painter = QPainter()
        if not painter.begin(writer):
            raise ValueError(f"cannot write {path}: Qt could not open a PDF there")
        try:
            for i, image in enumerate(images):
                if i:
                    writer.newPage()
                page = painter.viewport()
                scale = min(page.width() / image.width(), page.height() / image.height())
                w, h = round(image.width() * scale), round(image.height() * scale)
                painter.drawImage(QRect((page.width() - w) // 2, 0, w, h), image)
        finally:
            painter.end()

    return atomic_write(path, write)


def time_moves(lesson: Lesson, runs: LessonRuns, size: tuple[int, int], lang: str) -> list[tuple[str, float]]:
    """("scene" or "step", milliseconds) from PageDown (or PageUp) to the next stop painted (the window repainted
    whole), for every move of a walk through the lesson and back; between moves the presenter gets the idle time
    a lecture gives it (it builds the next scene then). Every run is loaded before: the lecture's case."""
    from PySide6.QtCore import QEvent, Qt
    from PySide6.QtGui import QKeyEvent
    from PySide6.QtWidgets import QApplication

    from kvviz.ui.lessons.presenter import WARM_AFTER_MS

    window = offscreen_presenter(lesson, runs, size, lang)
    times = []

    def idle() -> None:
        end = time.perf_counter() + 2 * WARM_AFTER_MS / 1000
        while time.perf_counter() < end:
            QApplication.processEvents()
            time.sleep(0.005)

    try:
        idle()
        n = len(window.stops())
        for key in (Qt.Key.Key_PageDown, Qt.Key.Key_PageUp):
            for _ in range(n - 1):
                before = window.scene_index
                t0 = time.perf_counter()
                QApplication.sendEvent(window, QKeyEvent(QEvent.Type.KeyPress, key, Qt.KeyboardModifier.NoModifier))
                window.repaint()
                kind = "scene" if window.scene_index != before else "step"
                times.append((kind, (time.perf_counter() - t0) * 1000))
                idle()
    finally:
        window.close()
        window.deleteLater()
    return times
