"""The scenes drawn, one page each: the compare and serve views' own panel classes built for the scene and kept
(the large one left, the others beside it) at its zoom and step, with its highlights (a work-matrix region, a
request, a pool block); a memory scene's tables (kvviz.lessons.memory_view) as rich text. Sees the lesson's
records only: no torch, no worker."""
from __future__ import annotations

import importlib

from PySide6.QtCore import QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QFont, QPainter, QPen
from PySide6.QtWidgets import (
    QFrame,
    QGraphicsRectItem,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QStackedWidget,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from kvviz.lessons import memory_view
from kvviz.lessons.lesson import MARK_COLOR, Scene
from kvviz.lessons.runs import SceneRun
from kvviz.ui.history import RunHistory

MARK = QColor(MARK_COLOR)  # the highlights (the deck draws the same)


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

def make_panel(view: str, key: str) -> QWidget:
    """A fresh panel of the compare view's or the serve view's registry, or a memory scene's rich-text label."""
    registry: list = []
    if view == "compare":
        from kvviz.ui.panels import PANELS as registry
    elif view == "serve":
        from kvviz.ui.serve.panels import SERVE_PANELS as registry
    spec = dict(registry).get(key)
    if spec is None:
        panel = QLabel()
        panel.setObjectName(f"memory_{key}")
        panel.setTextFormat(Qt.TextFormat.RichText)
        panel.setWordWrap(True)
        panel.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        panel.setStyleSheet("QLabel { background: white; padding: 8px; }")
        return panel
    module, _, name = spec.partition(":")
    panel = getattr(importlib.import_module(module), name)()
    if not panel.key:
        panel.key = key
    if key == "pool":
        panel.block_mark = BlockMark(panel)
    if hasattr(panel, "narration_shown"):
        panel.narration_shown = False  # a slide has no narration to point to (the summary's rows set aside)
    return panel


def box_need(box: Box, width: int) -> int:
    """The height at which a box's panel reads at the present zoom, its title and margins with it: the panel's
    readable size where it has one (a table, the serve panels), else its plots' readable height, the axes and the
    legends at `width` (as the window's grid estimates it), else a label's height for its text at `width`."""
    panel, layout = box.panel, box.layout()
    m = layout.contentsMargins()
    frame = box.header.sizeHint().height() + layout.spacing() + m.top() + m.bottom() + 2 * box.frameWidth()
    fixed = panel.readable_size() if hasattr(panel, "readable_size") else None
    if fixed is not None:
        return frame + fixed[1]
    if hasattr(panel, "readable_plot"):
        from kvviz.ui import style
        from kvviz.ui.panels._plots import LegendLabel

        _across, down = panel.plot_grid()
        legends = sum(max(0, label.heightForWidth(max(40, width - 12))) for label in panel.findChildren(LegendLabel)
                      if label.text() and not label.isHidden())
        return frame + style.px(24) * down + style.px(30) + legends + down * panel.readable_plot()[1]
    return frame + (panel.heightForWidth(width) if panel.hasHeightForWidth() else panel.sizeHint().height())


class ScenePage(QWidget):
    """One scene's panels, built for it at its zoom and kept: the large one on the left over the page's height, the
    others in a column beside it, each at least its readable height (or half the column); those the column has no
    height for are behind tabs at the column's foot (`tabbed`), never squeezed. It draws again only when its step
    or language changes."""

    def __init__(self, scene: Scene, run: SceneRun, base_font: QFont) -> None:
        super().__init__()
        from kvviz.ui.presentation import zoomed_font

        self.scene, self.run = scene, run
        self.setFont(zoomed_font(base_font, scene.zoom))  # the serve panels and tables measure their text from it
        row = QHBoxLayout(self)
        row.setContentsMargins(6, 6, 6, 6)
        row.setSpacing(6)
        keys = (scene.large, *[p for p in scene.panels if p != scene.large])
        self.boxes = [Box(k, make_panel(run.kind, k)) for k in keys]
        row.addWidget(self.boxes[0], 2)
        self.side = QWidget()
        self.column = QVBoxLayout(self.side)
        self.column.setContentsMargins(0, 0, 0, 0)
        self.column.setSpacing(6)
        self.tabs = QTabWidget()
        self.tabs.setObjectName("lesson_tabs")
        self.tabs.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)
        self.tabs.hide()
        if len(self.boxes) > 1:
            row.addWidget(self.side, 1)
        self.tabbed: list[Box] = []  # the side panels behind tabs
        self._arranged_for: tuple | None = None  # (width, height, needs) the column was last laid out for
        self._placed: tuple | None = None  # (how many stacked, their needs) as placed
        self._place(self.boxes[1:], [], [1] * (len(self.boxes) - 1))
        self._marked = False  # the work-matrix region outlined (once: its items stay)
        self.drawn: tuple | None = None  # (step, language) last drawn
        self.drawn_sizes: list[tuple[int, int]] = []  # the panels' sizes then
        self._zoomed = False

    def arrange(self) -> bool:
        """The side panels stacked in the column, as many as it has the height for at their readable heights, the
        rest behind tabs at its foot; True where the arrangement changed."""
        side = self.boxes[1:]
        if not side:
            return False
        m = self.layout().contentsMargins()
        height = self.height() - m.top() - m.bottom()
        width = (self.width() - m.left() - m.right() - self.layout().spacing()) // 3
        gap, bar = self.column.spacing(), self.tabs.tabBar().sizeHint().height()
        # No panel asks for more than half the column: two beside the large one always share it.
        needs = [min(box_need(box, width), (height - gap) // 2) for box in side]
        key = (width, height, tuple(needs))
        if key == self._arranged_for:
            return False
        self._arranged_for = key
        stacked = len(side)
        while stacked > 0:
            rest = needs[stacked:]
            used = sum(needs[:stacked]) + gap * (stacked - 1) + (gap + bar + max(rest) if rest else 0)
            if used <= height:
                break
            stacked -= 1
        placed = (stacked, tuple(needs))
        if placed == self._placed:
            return False
        self._placed = placed
        self._place(side[:stacked], side[stacked:], needs)
        return True

    def _place(self, stacked: list[Box], tabbed: list[Box], needs: list[int]) -> None:
        """`stacked` in the column, each a share of its height as its need; `tabbed` behind tabs under them."""
        while self.column.count():
            self.column.takeAt(0)
        while self.tabs.count():
            self.tabs.removeTab(0)
        for box, need in zip(stacked, needs):
            self.column.addWidget(box, need)
            box.show()
        for box in tabbed:
            self.tabs.addTab(box, box.header.text() or box.key)
        if tabbed:
            self.column.addWidget(self.tabs, max(needs[len(stacked):]))
        self.tabs.setVisible(bool(tabbed))
        self.tabbed = list(tabbed)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        """A page resized after it drew (the window went full screen) lays its column out again and draws again at
        its new sizes, once the resizes of this turn of the event loop are done."""
        super().resizeEvent(event)
        self.arrange()
        if self.drawn is not None and self.isVisible():
            QTimer.singleShot(0, self._redraw_if_resized)

    def _redraw_if_resized(self) -> None:
        if self.drawn is not None and self.sizes() != self.drawn_sizes:
            step, lang = self.drawn
            self.drawn = None
            self.draw(step, lang)

    def sizes(self) -> list[tuple[int, int]]:
        """Each panel's size: a panel that fits its type to its room (the summary's table) drew for these."""
        return [(b.panel.width(), b.panel.height()) for b in self.boxes]

    def box(self, key: str) -> Box | None:
        return next((b for b in self.boxes if b.key == key), None)

    def draw(self, step: int, lang: str) -> None:
        if self.drawn == (step, lang):
            return
        self.arrange()
        self._draw_boxes(step, lang)
        if self.arrange():  # the legends drawn took more lines than measured: drawn again where they are now
            self.layout().activate()
            self._draw_boxes(step, lang)
        self.drawn = (step, lang)
        self.drawn_sizes = self.sizes()

    def _draw_boxes(self, step: int, lang: str) -> None:
        run, scene = self.run, self.scene
        for box in self.boxes:
            box.header.setText(memory_view.title(box.key, lang) if run.kind == "memory" else box.panel.title())
            if box in self.tabbed:
                self.tabs.setTabText(self.tabs.indexOf(box), box.header.text())
            if run.kind == "memory":
                font = QFont(self.font())
                font.setPointSizeF(font.pointSizeF() * (1.5 if box is self.boxes[0] else 1.15))
                box.panel.setFont(font)
                box.panel.setText(memory_view.panel_html(box.key, run.memory, lang))
            elif run.kind == "compare":
                from kvviz.ui.panels._plots import scenes_in, settle, zoom_items

                box.panel.show_step(SceneStage.history(run), step)
                if not self._zoomed:  # the items the first draw made, at the scene's zoom
                    zoom_items(scenes_in(box))
                settle(scenes_in(box))
            else:
                box.panel.show_step(SceneStage.history(run), step, scene.highlight.request)
                if box.key == "pool":
                    mark, h = box.panel.block_mark, scene.highlight
                    mark.target = None if h.block is None else (h.scheduler or run.serve[0].scheduler, h.block)
                    mark.setGeometry(box.panel.rect())
                    mark.raise_()
                    mark.update()
        self._zoomed = True
        if not self.drawn and not self._marked:
            self._mark_region()
            self._marked = True

    def retranslate(self) -> None:
        for box in self.boxes:
            if hasattr(box.panel, "retranslate"):
                box.panel.retranslate()
        self.drawn = None

    def _mark_region(self) -> None:
        """The scene's work-matrix region outlined in every engine's matrix (positions: keys across, queries
        down, as the panel's image is laid)."""
        h, box = self.scene.highlight, self.box("work_matrix")
        if h.queries is None or self.run.kind != "compare" or box is None:
            return
        (q0, q1), (k0, k1) = h.queries, h.keys
        for plot in box.panel.export_items():
            item = QGraphicsRectItem(QRectF(k0, q0, k1 - k0 + 1, q1 - q0 + 1))
            pen = QPen(MARK, 3)
            pen.setCosmetic(True)
            item.setPen(pen)
            item.setZValue(50)
            plot.addItem(item, ignoreBounds=True)


class SceneStage(QStackedWidget):
    """The scenes' pages, one shown; a page is built the first time its scene is shown (or warmed up ahead)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("lesson_stage")
        self.pages: dict[int, ScenePage] = {}  # scene index -> its page

    @property
    def page(self) -> ScenePage | None:
        return self.currentWidget()

    @property
    def shown(self) -> list[Box]:
        return self.page.boxes if self.page is not None else []

    def page_of(self, scene: Scene, run: SceneRun) -> ScenePage:
        """The scene's page, built now (at its zoom) if it has none yet."""
        if scene.index not in self.pages:
            self._set_style_zoom(scene.zoom)  # the panels are built at the zoom in effect
            page = ScenePage(scene, run, self.font())
            self.pages[scene.index] = page
            self.addWidget(page)
        return self.pages[scene.index]

    def draw(self, scene: Scene, run: SceneRun, step: int, lang: str) -> None:
        """The scene at `step` (a step of its run), in `lang` for a memory scene's tables."""
        page = self.page_of(scene, run)
        self._set_style_zoom(scene.zoom)  # what the panels read as they draw
        if self.currentWidget() is not page:
            self.setCurrentWidget(page)
            page.resize(self.size())  # laid out now: the panels draw at the size they are shown at
            page.layout().activate()
            if page.sizes() != page.drawn_sizes:  # drawn ahead at other sizes than it is shown at: again
                page.drawn = None
        page.draw(step, lang)

    def warm_up(self, scene: Scene, run: SceneRun, step: int, lang: str) -> None:
        """Build and draw a scene's page ahead (the next scene, while this one is presented): made current for
        the draw, so it is laid out as it will be shown, and the shown page put back before anything paints."""
        page = self.page_of(scene, run)
        shown = self.currentWidget()
        if page.drawn is not None or shown is None or shown is page:
            return
        self.setCurrentWidget(page)
        page.resize(self.size())
        page.layout().activate()
        page.draw(step, lang)
        page.grab()  # painted once offscreen: the plots' cached pictures (axes, ticks) are made now
        self.setCurrentWidget(shown)
        self._set_style_zoom(shown.scene.zoom)

    def _set_style_zoom(self, percent: int) -> None:
        """The panels' zoom (kvviz.ui.style) at the scene's; the presenter gives the app's back when it closes."""
        from kvviz.ui import style

        if round(style.ZOOM * 100) != percent:
            style.set_zoom(percent)

    def retranslate(self) -> None:
        """The panels' fixed texts again, after a language switch."""
        for page in self.pages.values():
            page.retranslate()

    @staticmethod
    def history(run: SceneRun):
        """The run as the panels read it (RunHistory, ServeHistory), made once per run."""
        if "history" not in run.histories:
            if run.kind == "compare":
                history = RunHistory(info=run.saved.info, traces={k: list(v) for k, v in run.saved.traces.items()})
                history.version = 1
                run.histories["history"] = history
            else:
                from kvviz.serving.history import ServeHistory

                run.histories["history"] = ServeHistory.from_runs(tuple(run.serve))
        return run.histories["history"]
