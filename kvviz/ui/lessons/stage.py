"""One scene drawn: its panels (the compare view's and the serve view's own panel classes, built once and kept),
the large one on the left and the others in a column beside it, at the scene's zoom and step, with its
highlights (a work-matrix region outlined, a request selected, a pool block framed); a memory scene's tables
(kvviz.lessons.memory_view) in rich-text labels. Sees the lesson's records only: no torch, no worker.
"""
from __future__ import annotations

import importlib

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPen
from PySide6.QtWidgets import QFrame, QGraphicsRectItem, QGridLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from kvviz.lessons import memory_view
from kvviz.lessons.lesson import Scene
from kvviz.lessons.runs import SceneRun
from kvviz.ui.history import RunHistory

MARK = QColor("#d81b60")  # the highlights: a magenta that neither the cells' nor the engines' colours use


class BlockMark(QWidget):
    """A frame drawn over the pool panel around one block (the panel's `cells`, as it last painted them)."""

    def __init__(self, panel: QWidget) -> None:
        super().__init__(panel)
        self.panel = panel
        self.target: tuple[str, int] | None = None
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt override)
        if self.target is None:
            return
        scheduler, block = self.target
        cells = self.panel.cells.get(scheduler) or []
        if block >= len(cells):
            return
        painter = QPainter(self)
        painter.setPen(QPen(MARK, 4))
        painter.drawRect(cells[block].adjusted(-3, -3, 3, 3))
        painter.end()


class Box(QFrame):
    """A panel under its title, as the window's grid frames it."""

    def __init__(self, key: str, panel: QWidget) -> None:
        super().__init__()
        self.key, self.panel = key, panel
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setObjectName(f"lesson_panel_{key}")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 4)
        self.header = QLabel()
        self.header.setStyleSheet("font-weight: bold;")
        layout.addWidget(self.header)
        layout.addWidget(panel, 1)
        # The stage shares its room by stretch alone (a plot's size hint would starve a table beside it).
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)

    def hasHeightForWidth(self) -> bool:  # noqa: N802 (Qt override)
        return False  # a plot that asks a height for its width would take the whole column

class SceneStage(QWidget):
    """Draws one scene at one step; the panels of each view are built the first time a scene needs them."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("lesson_stage")
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(6, 6, 6, 6)
        self.grid.setSpacing(6)
        self.boxes: dict[tuple[str, str], Box] = {}  # (view, key) -> its box
        self.shown: list[Box] = []
        self._drawn_run: dict[tuple[str, str], int] = {}  # box -> id of the run it last drew
        self._marks: list = []  # the region's rectangles in the work-matrix plots
        self.zoom = 0
        self._base_font: QFont | None = None  # the app's font at 100%
        self._base_zoom = 100  # the panels' zoom before the stage set its own

    # -- building ---------------------------------------------------------------------------------
    def _box(self, view: str, key: str) -> Box:
        if (view, key) not in self.boxes:
            if view == "compare":
                from kvviz.ui.panels import PANELS as registry
            elif view == "serve":
                from kvviz.ui.serve.panels import SERVE_PANELS as registry
            else:
                registry = []
            spec = dict(registry).get(key)
            if spec is None:
                panel = QLabel()
                panel.setObjectName(f"memory_{key}")
                panel.setTextFormat(Qt.TextFormat.RichText)
                panel.setWordWrap(True)
                panel.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
                panel.setStyleSheet("QLabel { background: white; padding: 8px; }")
            else:
                module, _, name = spec.partition(":")
                panel = getattr(importlib.import_module(module), name)()
                if not panel.key:
                    panel.key = key
                if key == "pool":
                    panel.block_mark = BlockMark(panel)
            self.boxes[(view, key)] = Box(key, panel)
        return self.boxes[(view, key)]

    def layout_scene(self, scene: Scene, run: SceneRun) -> None:
        """The scene's panels in the grid: the large one over every row on the left, the others beside it."""
        view = run.kind
        wanted = [self._box(view, k) for k in (scene.large, *[p for p in scene.panels if p != scene.large])]
        if wanted != self.shown:
            for box in self.shown:
                self.grid.removeWidget(box)
                box.hide()
            rows = max(len(wanted) - 1, 1)
            self.grid.addWidget(wanted[0], 0, 0, rows, 1)
            for i, box in enumerate(wanted[1:]):
                self.grid.addWidget(box, i, 1)
            self.grid.setColumnStretch(0, 2)
            self.grid.setColumnStretch(1, 1 if len(wanted) > 1 else 0)
            for r in range(self.grid.rowCount()):
                self.grid.setRowStretch(r, 1 if r < rows else 0)
            for box in wanted:
                box.show()
            self.shown = wanted
        self.set_zoom(scene.zoom)

    def set_zoom(self, percent: int) -> None:
        """The panels' plot text, lines and markers (kvviz.ui.style) and the stage's type at percent."""
        if percent == self.zoom:
            return
        self.zoom = percent
        from PySide6.QtWidgets import QApplication

        from kvviz.ui import style
        from kvviz.ui.panels._plots import scenes_in, zoom_items
        from kvviz.ui.presentation import repolish_styled, zoomed_font

        if self._base_font is None:
            self._base_font = QFont(QApplication.font())
            self._base_zoom = round(style.ZOOM * 100)
        style.set_zoom(percent)
        # The app's font, as View > Zoom sets it: the serve panels measure their text from it.
        QApplication.setFont(zoomed_font(self._base_font, percent))
        repolish_styled()
        for (view, _key), box in self.boxes.items():
            if view == "compare":
                box.panel.apply_zoom()
                zoom_items(scenes_in(box))
        self._drawn_run.clear()

    def restore_zoom(self) -> None:
        """The app's font and the panels' zoom as they were before the stage zoomed (the presenter closes)."""
        if self._base_font is None:
            return
        from PySide6.QtWidgets import QApplication

        from kvviz.ui import style
        from kvviz.ui.presentation import repolish_styled

        style.set_zoom(self._base_zoom)
        QApplication.setFont(self._base_font)
        repolish_styled()
        self._base_font, self.zoom = None, 0

    def retranslate(self) -> None:
        """The panels' fixed texts again, after a language switch."""
        for box in self.boxes.values():
            if hasattr(box.panel, "retranslate"):
                box.panel.retranslate()
        self._drawn_run.clear()

    # -- drawing ----------------------------------------------------------------------------------
    def draw(self, scene: Scene, run: SceneRun, step: int, lang: str) -> None:
        """The scene at `step` (a step of its run), its highlights, in `lang` for a memory scene's tables."""
        self.layout_scene(scene, run)
        for box in self.shown:
            box.header.setText(memory_view.title(box.key, lang) if run.kind == "memory" else box.panel.title())
            if run.kind == "memory":
                font = QFont(self.font())
                font.setPointSizeF(font.pointSizeF() * (1.5 if box is self.shown[0] else 1.15))
                box.panel.setFont(font)
                box.panel.setText(memory_view.panel_html(box.key, run.memory, lang))
                continue
            if self._drawn_run.get((run.kind, box.key)) != id(run):
                box.panel.clear()
                self._drawn_run[(run.kind, box.key)] = id(run)
            if run.kind == "compare":
                box.panel.show_step(self.history(run), step)
                from kvviz.ui.panels._plots import scenes_in, settle

                settle(scenes_in(box))
            else:
                box.panel.show_step(self.history(run), step, scene.highlight.request)
                if box.key == "pool":
                    mark = box.panel.block_mark
                    h = scene.highlight
                    mark.target = None if h.block is None else (h.scheduler or run.serve[0].scheduler, h.block)
                    mark.setGeometry(box.panel.rect())
                    mark.raise_()
                    mark.update()
        self._mark_region(scene, run)

    @staticmethod
    def history(run: SceneRun):
        """The run as the panels read it (RunHistory, ServeHistory), made once per run."""
        if "history" not in run.histories:
            if run.kind == "compare":
                run.histories["history"] = RunHistory(info=run.saved.info,
                                                      traces={k: list(v) for k, v in run.saved.traces.items()},
                                                      version=1)
            else:
                from kvviz.serving.history import ServeHistory

                run.histories["history"] = ServeHistory.from_runs(tuple(run.serve))
        return run.histories["history"]

    def _mark_region(self, scene: Scene, run: SceneRun) -> None:
        """The scene's work-matrix region outlined in every engine's matrix (positions: keys across, queries
        down, as the panel's image is laid)."""
        for plot, item in self._marks:
            plot.removeItem(item)
        self._marks = []
        h = scene.highlight
        box = self.boxes.get(("compare", "work_matrix"))
        if h.queries is None or run.kind != "compare" or box is None or box not in self.shown:
            return
        (q0, q1), (k0, k1) = h.queries, h.keys
        for plot in box.panel.export_items():
            item = QGraphicsRectItem(QRectF(k0, q0, k1 - k0 + 1, q1 - q0 + 1))
            pen = QPen(MARK, 3)
            pen.setCosmetic(True)
            item.setPen(pen)
            item.setZValue(50)
            plot.addItem(item, ignoreBounds=True)
            self._marks.append((plot, item))
