"""Small pieces the panels share: a white plot canvas, a byte-unit axis, a legend row, token labels.

Qt, pyqtgraph and numpy only; nothing here knows what a trace is beyond RunHistory's accessors.
"""
from __future__ import annotations

import html
import math
import operator

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, QEvent, QSize, Qt
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPicture
from PySide6.QtWidgets import QGraphicsRectItem, QLabel

from kvviz.format import share_text  # noqa: F401  (the panels' percent, read here by tests)
from kvviz.textshow import group_labels
from kvviz.ui import style
from kvviz.ui.history import RunHistory

__all__ = ["OUTLINE_PX", "BytesAxis", "TraceColumns", "align_left_axes", "canvas", "cell_px", "engine_step",
           "fit_matrix", "fit_title_row", "frame_gap", "legend_row", "matrix_plot", "on_left_click", "positions",
           "repaint_area", "sequence_labels", "series", "set_legend", "set_token_ticks", "step_line",
           "step_of_position", "title_row_fits", "token_label", "view_point"]

_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1))
_LABEL_PITCH_PX = 16  # a byte axis gives each tick label at least this many pixels of its length
OUTLINE_PX = 2  # a matrix's step frame's pen at 100% (zoom_items zooms it): centred on the rows' edge


def canvas() -> pg.GraphicsLayoutWidget:
    """A GraphicsLayoutWidget on the house background."""
    widget = pg.GraphicsLayoutWidget()
    widget.setBackground(style.PLOT_BACKGROUND)
    widget.ci.setContentsMargins(4, 4, 4, 4)
    return widget


class BytesAxis(pg.AxisItem):
    """Tick labels in B / KiB / MiB / GiB (binary units, as the cache figures are), linear or log.

    Linear ticks fall on round numbers of the unit (16 KiB, not 16,384 B rounded to 10,000 B)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.setWidth(72)  # room for "512 KiB" and the label, the same in every byte plot
        # The unit is in the tick labels: pyqtgraph's own SI scaling (from 1e9 up, for a label
        # without units) would divide the values first and print "3 B" for 3 GB, "(x1e+09)" beside.
        self.enableAutoSIPrefix(False)

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph override)
        if not self.logMode:
            return super().tickValues(minVal, maxVal, size)
        # Log mode: ticks on powers of two (1 KiB, 4 KiB, 16 KiB ...), not on decimal decades.
        log2 = math.log10(2)
        lo, hi = math.ceil(minVal / log2), math.floor(maxVal / log2)
        if hi < lo:
            return []
        stride = next((s for s in (1, 2, 5, 10) if (hi - lo) / s <= max(2.0, size / 40)), 10)
        values = [k * log2 for k in range(lo, hi + 1) if k % stride == 0]
        if len(values) < 3:  # a narrow range: add 1.5 x 2^k between the powers (24 KiB, 48 KiB)
            half = math.log10(1.5)
            values += [k * log2 + half for k in range(lo - 1, hi + 1) if minVal <= k * log2 + half <= maxVal]
        return [(None, sorted(values))]

    def tickSpacing(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph override)
        if self.logMode:
            return super().tickSpacing(minVal, maxVal, size)
        top = max(abs(minVal), abs(maxVal))
        unit = next((s for _u, s in _UNITS if top >= s), 1)
        levels = super().tickSpacing(minVal / unit, maxVal / unit, size)
        # A short axis: no more labels than fit one above the other ("8 MiB 6 MiB 4 MiB 2 MiB" had
        # overlapped in 50 px); the major spacing grows by 2, 5, 10 x until they fit.
        room = max(1, int(size // _LABEL_PITCH_PX))
        span = (maxVal - minVal) / unit
        if levels and span / levels[0][0] > room:
            # The widest spacing still inside the range: a tick (and its label) stays on the axis.
            wider = [levels[0][0] * f for f in (2, 2.5, 5, 10, 20, 50) if levels[0][0] * f <= span]
            if wider:
                levels = [(next((m for m in wider if span / m <= room), wider[-1]), 0.0)]
        return [(spacing * unit, offset * unit) for spacing, offset in levels if spacing * unit >= 1]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph override)
        if self.logMode:  # log10 values of the ticks chosen above
            return [_short_bytes(10.0 ** v) for v in values]
        top = max((abs(v * scale) for v in values), default=0.0)
        unit, size = next(((u, s) for u, s in _UNITS if top >= s), ("B", 1))
        step = spacing * scale / size
        places = 0 if step >= 1 else min(3, math.ceil(-math.log10(step)))
        return [f"{v * scale / size:.{places}f} {unit}" if v else "0" for v in values]


def _short_bytes(n: float) -> str:
    for unit, size in _UNITS:
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) else f"{value:.1f} {unit}"
    return f"{n:g} B"


def _unbreakable(text: str) -> str:
    """One legend entry kept on one line, as rich text: non-breaking spaces, and a word joiner
    between every two characters (Chinese text may otherwise break between any two, and a slash
    offers a break too)."""
    text = text.replace(" ", "\u00a0")
    text = text.replace("/", "/\u2060") if text.isascii() else "\u2060".join(text)  # joiners: dearer to lay out
    return html.escape(text)


class LegendLabel(QLabel):
    """A legend of coloured swatches above a plot (never covering data). Entries wrap between each
    other; an entry stays on one line while it fits the label's width, and only one wider than that
    may wrap at its own spaces, so the longest entry never sets (and clips) the panel's width."""

    def __init__(self) -> None:
        super().__init__()
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setWordWrap(True)
        self._entries: list[tuple] = []
        self._swatch_px: dict[str, int] = {}

    def set_entries(self, entries: list[tuple]) -> None:
        if entries != self._entries:
            self._entries = list(entries)
            self._render()

    def _swatch_width(self, mark: str) -> int:
        """Pixels of a swatch and the space after it, as swatch_html draws it."""
        if mark not in self._swatch_px:
            font = QFont(self.font())
            font.setPointSizeF(style.SWATCH_POINTS)
            font.setBold(True)
            glyphs = html.unescape(style.SWATCH_MARKS[mark]) + "\u00a0"
            self._swatch_px[mark] = QFontMetrics(font).horizontalAdvance(glyphs)
        return self._swatch_px[mark]

    def _render(self) -> None:
        room = self.contentsRect().width()
        metrics = self.fontMetrics()
        text = ""
        for entry in self._entries:
            mark = entry[2] if len(entry) > 2 else "square"
            fits = room <= 0 or self._swatch_width(mark) + metrics.horizontalAdvance(entry[1]) <= room
            if text:  # an entry that must wrap starts a line of its own, never mid-line after another
                text += "&nbsp;&nbsp;&nbsp; " if fits else "<br>"
            text += style.swatch_html(entry[0], _unbreakable(entry[1]) if fits else html.escape(entry[1]), mark=mark)
        if self.text() != text:  # an unchanged legend costs no relayout
            self.setText(text)

    def clear(self) -> None:
        """Empty, and forgotten: the same entries set again are shown again."""
        self._entries = []
        super().clear()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._render()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        """As narrow as the widest word (with its swatch), not the widest entry."""
        hint = super().minimumSizeHint()
        metrics = self.fontMetrics()
        words = [self._swatch_width(e[2] if len(e) > 2 else "square")
                 + max((metrics.horizontalAdvance(w) for w in e[1].split()), default=0) for e in self._entries]
        margins = self.contentsMargins()
        return QSize(min(hint.width(), max(words, default=0) + margins.left() + margins.right()), hint.height())


def legend_row(entries: list[tuple[str, str]] | None = None) -> LegendLabel:
    """A LegendLabel holding `entries`: (colour, label) pairs."""
    label = LegendLabel()
    label.set_entries(entries or [])
    return label


def set_legend(label: LegendLabel, entries: list[tuple[str, str]] | list[tuple[str, str, str]]) -> None:
    """Entries are (colour, text) squares or (colour, text, mark) with mark "line" / "dashed"."""
    label.set_entries(entries)


def fit_axes(scene) -> bool:
    """Draw, ahead of the paint, the tick labels of each axis whose labels changed, as its paint()
    would: the axis fits itself to them now (a resize that, made mid-paint, meant another paint of
    the whole plot), and the paint replays the picture kept here. True if an axis changed size."""
    resized = False
    for item in scene.items():
        if not isinstance(item, pg.AxisItem) or item.picture is not None or not item.isVisible():
            continue
        size = (item.textWidth, item.textHeight)
        picture = QPicture()
        painter = QPainter(picture)
        try:
            if item.style["tickFont"]:
                painter.setFont(item.style["tickFont"])
            specs = item.generateDrawSpecs(painter)
            if specs is not None:
                item.drawPicture(painter, *specs)
        finally:
            painter.end()
        item.picture = picture
        resized = resized or size != (item.textWidth, item.textHeight)
    return resized


def _at_zoom(item, name: str, value: float) -> float:
    """The 100% value of an item's length (kept on the item the first time it is zoomed) at the zoom."""
    attr = f"_kvviz_base_{name}"
    base = getattr(item, attr, None)
    if base is None:
        base = value
        setattr(item, attr, base)
    return base * style.ZOOM


def _zoomed_pen(item, pen, name: str = "pen"):
    pen = pg.mkPen(pen)
    # A dashed curve stays 1 px: Qt strokes a wider dashed line ~100x slower (see style.engine_pen).
    dashed_curve = isinstance(item, pg.PlotDataItem) and pen.style() != Qt.PenStyle.SolidLine
    if not pen.isCosmetic() and pen.widthF() == 0 or dashed_curve:
        return None
    width = _at_zoom(item, name, pen.widthF())
    if abs(width - pen.widthF()) < 1e-3:
        return None
    pen.setWidthF(width)
    return pen


def zoom_items(scenes: list) -> None:
    """Bring every item of these pyqtgraph scenes to style.ZOOM: axes' tick fonts and fixed widths,
    text items' fonts, the widths of lines and outlines and the sizes of markers. Each item's own
    100% value is kept on it, so zooming again (or back) scales from that, never compounding."""
    font = style.tick_font()
    for scene in scenes:
        for item in scene.items():
            if isinstance(item, pg.AxisItem):
                if item.style["tickFont"] is None or item.style["tickFont"].pointSizeF() != font.pointSizeF():
                    item.setTickFont(font)
                if item.fixedWidth is not None:
                    width = round(_at_zoom(item, "width", item.fixedWidth))
                    if width != item.fixedWidth:
                        item.setWidth(width)
            elif isinstance(item, pg.TextItem):
                if item.textItem.font().pointSizeF() != font.pointSizeF():
                    item.setFont(font)
            elif isinstance(item, pg.ScatterPlotItem):
                if isinstance(item.parentItem(), pg.PlotDataItem):
                    continue  # a curve's own symbols: none here
                size = _at_zoom(item, "size", item.opts["size"])
                if abs(size - item.opts["size"]) > 1e-3:
                    item.setSize(size)
            elif isinstance(item, pg.PlotDataItem):  # its curve takes the pen at every setData
                pen = _zoomed_pen(item, item.opts["pen"])
                if pen is not None:
                    item.setPen(pen)
            elif isinstance(item, pg.InfiniteLine):
                pen = _zoomed_pen(item, item.pen)
                if pen is not None:
                    item.setPen(pen)
            elif isinstance(item, QGraphicsRectItem):
                pen = _zoomed_pen(item, item.pen())
                if pen is not None:
                    item.setPen(pen)


def scenes_in(widget) -> list:
    """The pyqtgraph scenes of the views inside a widget (a panel's frame)."""
    return [view.scene() for view in widget.findChildren(pg.GraphicsView)]


def settle(scenes: list) -> None:
    """Settle now what pyqtgraph and Qt would settle while painting, so a panel just drawn is
    painted once (measured: two or three full paints per draw before): the layouts the draw invalidated,
    each view's range and transform, then each axis fitted to its new tick labels (an axis that
    grew or shrank mid-paint resized its plot and asked for another paint). An axis that resized
    changes its view, which may change the labels again: up to three rounds."""
    for _ in range(3):
        # Twice: a layout pass can post another (a title resized by it updates its minimum size,
        # which invalidates the layout again); left to the event loop, that one came after the
        # paint and asked for a second (measured in a four-engine work matrix).
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        resized = False
        for scene in scenes:
            scene.prepareForPaint()
            resized = fit_axes(scene) or resized
        if not resized:
            break


def align_left_axes(plots: list[pg.PlotItem]) -> None:
    """One width for the left axes of plots stacked in a column (the widest one's natural width), so
    their x-linked views line up: the selected step's marker falls at one x in all of them. Each
    axis keeps working out its own width as pyqtgraph does; the group then takes the widest."""
    axes = [plot.getAxis("left") for plot in plots]
    natural: dict[int, float] = {}

    def wrap(axis: pg.AxisItem, own):
        def update_width() -> None:
            own()  # the axis's own width from its tick labels (and its picture redrawn, as pyqtgraph does)
            natural[id(axis)] = axis.maximumWidth()
            width = max(natural.values())
            for other in axes:
                if (other.minimumWidth(), other.maximumWidth()) != (width, width):
                    other.setMinimumWidth(width)
                    other.setMaximumWidth(width)
        return update_width

    for axis in axes:
        axis._updateWidth = wrap(axis, axis._updateWidth)
    for axis in axes:
        axis._updateWidth()


def frame_gap(outline: QGraphicsRectItem) -> int:
    """Pixels kept clear between a plot's title text and its matrix, whose step frame may run along the
    matrix's top edge: the frame's pen width at the zoom (its outer half lies above that edge), so the
    frame never touches a descender."""
    return math.ceil(max(outline.pen().widthF(), OUTLINE_PX * style.ZOOM))


def fit_title_row(plot: pg.PlotItem, gap: int) -> None:
    """Size the plot's title row to its text, with `gap` pixels below it. pyqtgraph's setTitle fixes the
    row at 30 px, which a two-line title outgrows from 125% on: left there, the second line would run
    over the plot's top, under a frame drawn along it."""
    label = plot.titleLabel
    if not label.isVisibleTo(plot):
        return  # no title set yet: pyqtgraph keeps its row at 0
    text = math.ceil(label.itemRect().height())  # the text's lines, as style.fit_title scaled them
    # Set at each call, as setTitle's own fixed row is: the plot's layout is asked again when its title
    # moves, in the same pass as its parent's (left to a later pass, a shrunk axis's width would go to
    # its own plot first, and a grid of plots be unequal for a frame).
    label.setMaximumHeight(text)
    plot.layout.setRowFixedHeight(0, text)
    plot.layout.setRowSpacing(0, gap)  # the gap, below the title only


def title_row_fits(plot: pg.PlotItem, outline: QGraphicsRectItem) -> None:
    """Keep the plot's title row fitted to its text with frame_gap(outline) below it: the title's text box
    gets no blank margin, and the row is sized again when the title is (style.fit_title scales a title to a
    narrow plot). Call fit_title_row after each setTitle, which sets pyqtgraph's 30 px row again."""
    style.fit_title(plot)  # its scaling first, then the row fitted to the scaled text
    plot.titleLabel.item.document().setDocumentMargin(0)
    plot.titleLabel.geometryChanged.connect(lambda: fit_title_row(plot, frame_gap(outline)))


def matrix_plot(plot: pg.PlotItem) -> None:
    """A plot that shows one matrix image whole: its panel sets the range at every draw (fit_matrix),
    never pyqtgraph's auto-range, and the mouse neither pans nor zooms it. An auto-range state was
    the matrix's only hold on its view: once anything set a range (the idle warm-up laid the plots
    out for the model's longest run), every later run was drawn as a thumbnail in the top-left."""
    vb = plot.getViewBox()
    vb.disableAutoRange()
    vb.setMouseEnabled(x=False, y=False)


def fit_matrix(plot: pg.PlotItem, width: float, height: float) -> None:
    """The view shows data [0, width] x [0, height] (an aspect-locked view centres it), whatever
    range it held before; no range change, and no tick relayout, when it already does."""
    vb = plot.getViewBox()
    target = [[0.0, float(width)], [0.0, float(height)]]
    if vb.state["targetRange"] != target or any(vb.state["autoRange"]):
        vb.setRange(xRange=target[0], yRange=target[1], padding=0)


def on_left_click(scene, handler) -> None:
    """handler(scene position) on a single left click in a pyqtgraph scene (a double-click belongs to
    the panel's frame: it gives the panel the grid)."""
    def clicked(event) -> None:
        if event.button() == Qt.MouseButton.LeftButton and not event.double():
            handler(event.scenePos())

    scene.sigMouseClicked.connect(clicked)


def view_point(plot: pg.PlotItem, scene_pos):
    """The data coordinates of a scene position inside the plot's data area, else None."""
    vb = plot.getViewBox()
    if not vb.isVisible() or not vb.sceneBoundingRect().contains(scene_pos):
        return None
    return vb.mapSceneToView(scene_pos)


def step_of_position(history: RunHistory, engine: str, position: int) -> int | None:
    """The step that first computed `position`'s K/V for this engine: the first step whose computed
    positions reach past it (prefill for a prompt position). None past what the engine has recorded."""
    traces = history.traces.get(engine) or []
    stops = np.fromiter((t.pos_stop for t in traces), dtype=np.int64, count=len(traces))
    step = int(np.searchsorted(stops, position, side="right"))  # pos_stop never decreases
    return step if position >= 0 and step < len(traces) else None


def repaint_area(item) -> None:
    """Have every view repaint the scene area the item covers now: call it before moving the item.
    Qt repaints a moved item's old area from where each view last painted it, and a view rendered
    offscreen (QWidget.render, an export's frames) records the places it painted there too, so the
    screen would never repaint the places it had painted the item before the export."""
    scene = item.scene()
    if scene is not None and item.isVisible():
        scene.update(item.sceneBoundingRect())


class StepLine(pg.InfiniteLine):
    """A vertical marker whose move repaints the place it leaves on screen (see repaint_area)."""

    def setPos(self, pos) -> None:  # noqa: N802 (pyqtgraph override)
        repaint_area(self)
        super().setPos(pos)


def step_line(plot: pg.PlotItem) -> pg.InfiniteLine:
    """The vertical marker at the selected step."""
    line = StepLine(angle=90, movable=False, pen=pg.mkPen(style.STEP_LINE, width=1, style=Qt.PenStyle.DashLine))
    line.setZValue(50)
    line.hide()
    plot.addItem(line, ignoreBounds=True)
    return line


def token_label(text: str, limit: int = 6) -> str:
    """A token as an axis label: visible whitespace, short."""
    shown = (text.replace(" ", "\u2423").replace("\n", "\u21b5").replace("\t", "\u21e5")
             .replace("\r", "\u240d"))
    shown = "".join(ch if ch.isprintable() else "\u00b7" for ch in shown) or "\u2205"
    return shown if len(shown) <= limit else shown[: limit - 1] + "\u2026"


def cell_px(plot: pg.PlotItem) -> tuple[float, float]:
    """The on-screen width and height of one cell (one data unit) of a matrix plot."""
    vb = plot.getViewBox()
    (x0, x1), (y0, y1) = vb.viewRange()
    return vb.width() / max(x1 - x0, 1e-9), vb.height() / max(y1 - y0, 1e-9)


def set_token_ticks(plot: pg.PlotItem, labels: list[str] | int, numbers: tuple[bool, bool] = (True, True),
                    cell: tuple[float, float] | None = None) -> None:
    """Token labels on the bottom and left axes of a matrix plot (cell i spans [i, i+1)) where a
    cell is wide enough on screen to hold one; position numbers otherwise, drawn on the bottom / left
    axis only where `numbers` says (an inner plot of a grid whose outer plots number the same
    positions leaves them to those, and its matrix has the room). `cell`: the cell size in pixels
    to choose them by (default: this plot's, cell_px); plots of one size given one size get the same ticks."""
    n = labels if isinstance(labels, int) else len(labels)  # a count: numbers only
    cell_w, cell_h = cell or cell_px(plot)
    metrics = QFontMetrics(style.tick_font())
    if max(cell_w, cell_h) >= 8.0 and not isinstance(labels, int):  # a label might fit: measure them
        short = [token_label(t, 4) for t in labels]
        widest = max((metrics.horizontalAdvance(s) for s in short), default=0) + 4
        tokens = [[(i + 0.5, s) for i, s in enumerate(short)]]
    else:
        widest, tokens = float("inf"), None
    digits = metrics.horizontalAdvance(str(max(n - 1, 0))) + 8

    def numbered(cell_px: float, need: float) -> list:
        """Position numbers at cell centres, every `stride` cells so they do not collide."""
        # 1, 2, 5 x 10^k: a million positions are numbered as sparsely as a thousand are
        strides = (m * 10 ** e for e in range(0, 10) for m in (1, 2, 5))
        stride = next(s for s in strides if s * cell_px >= need or s >= max(n, 1))
        return [[(i + 0.5, str(i)) for i in range(0, n, stride)]]

    bottom = tokens if cell_w >= max(8.0, widest) else numbered(cell_w, digits)
    left = tokens if cell_h >= metrics.height() else numbered(cell_h, metrics.height() + 4)
    _set_ticks(plot.getAxis("bottom"), bottom, bottom is tokens or numbers[0])
    _set_ticks(plot.getAxis("left"), left, left is tokens or numbers[1])


def _set_ticks(axis: pg.AxisItem, ticks: list, values: bool = True) -> None:
    """setTicks only when they changed: new ticks make the axis lay out and draw its text again.
    values=False keeps the tick marks and draws no labels (the axis then takes no room for them)."""
    if getattr(axis, "_kvviz_ticks", None) != (ticks, values):
        axis._kvviz_ticks = (ticks, values)
        if axis.style["showValues"] != values:
            axis.setStyle(showValues=values)
        axis.setTicks(ticks)


_upper: np.ndarray = np.zeros((0, 0), dtype=bool)


def pool_blocks(a: np.ndarray, factor: int, reduce, fill, square: bool = True) -> np.ndarray:
    """Shrink a matrix by `factor > 1`, combining each factor x factor block with `reduce`
    (np.maximum, np.fmax). A square matrix is first padded with `fill` to a multiple of `factor`;
    with square=False, `a` is a strip whose sides already are multiples of `factor`."""
    n = a.shape[0]
    m = -(-n // factor)
    if square and m * factor != n:
        padded = np.full((m * factor, m * factor), fill, dtype=a.dtype)
        padded[:n, :n] = a
        a = padded
    # Strided passes (factor passes over memory) beat a reshape-reduce over a short last axis.
    rows = a[0::factor].copy()
    for i in range(1, factor):
        reduce(rows, a[i::factor], out=rows)
    out = rows[:, 0::factor].copy()
    for i in range(1, factor):
        reduce(out, rows[:, i::factor], out=out)
    return out


def upper_mask(n: int) -> np.ndarray:
    """Bool [n, n], True strictly above the diagonal (the future), sliced from one cached matrix."""
    global _upper
    if _upper.shape[0] < n:
        size = max(n, 256, 2 * _upper.shape[0])
        index = np.arange(size)
        _upper = index[None, :] > index[:, None]  # one comparison pass (np.triu took ~4x as long)
    return _upper[:n, :n]


def engine_step(history: RunHistory, engine: str, step: int) -> int:
    """The step to show for one engine: the selected one, clamped to what the engine has recorded."""
    n = len(history.traces.get(engine, []))
    return min(step, n - 1) if n else -1


def sequence_labels(history: RunHistory, engine: str, n: int) -> list[str]:
    """Labels of positions 0..n-1: the prompt's, then the tokens the engine generated, as read: each token of
    a character made of several is that character with its place in it (键₁ 键₂ 键₃), never a byte escape."""
    prompt = list(history.info.prompt_labels) or [str(i) for i in history.info.prompt_ids]
    generated = [t.token_text for t in history.traces.get(engine, [])[: max(0, n - len(prompt))]]
    labels = (_as_read(prompt) + _as_read(generated))[:n]
    labels += [""] * (n - len(labels))
    return labels


_SUBSCRIPTS = str.maketrans("0123456789", "\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089")


def _as_read(labels: list[str]) -> list[str]:
    out = []
    for group in group_labels(labels):
        if group.size == 1:
            out.append(group.text)
        else:
            out.extend(group.text + str(j + 1).translate(_SUBSCRIPTS) for j in range(group.size))
    return out


def series(history: RunHistory, engine: str, field: str) -> np.ndarray:
    """One StepTrace field over an engine's recorded steps, as float64."""
    return np.fromiter((getattr(t, field) for t in history.traces.get(engine, [])), dtype=np.float64)


_positions: np.ndarray = np.zeros(0)


def positions(n: int) -> np.ndarray:
    """float64 0..n-1 (x values of a series), sliced from one cached, read-only array."""
    global _positions
    if len(_positions) < n:
        _positions = np.arange(max(n, 1024, 2 * len(_positions)), dtype=np.float64)
        _positions.flags.writeable = False
    return _positions[:n]


class _Columns:
    """One engine's fields over the steps read so far, in buffers that double as they fill."""

    def __init__(self, traces: list, getters: dict) -> None:
        self.traces = traces  # the history's own list: a new run (or history) is another list
        self.n = 0
        self.last = None  # the last trace read: a list that changed under us no longer holds it here
        self.getters = getters
        fields = tuple(getters)
        self.fields = fields
        self.buf = {f: np.zeros(256) for f in fields}
        self.cum = {f: np.zeros(256) for f in fields}

    def extend(self, new: list) -> None:
        n, m = self.n, len(new)
        for f in self.fields:
            get = self.getters[f]
            values = np.fromiter((get(t) for t in new), dtype=np.float64, count=m)
            if n + m > len(self.buf[f]):
                size = max(n + m, 2 * len(self.buf[f]))
                for store in (self.buf, self.cum):
                    grown = np.zeros(size)
                    grown[:n] = store[f][:n]
                    store[f] = grown
            self.buf[f][n:n + m] = values
            # Summed from the last total on, as np.cumsum over the whole series would (same rounding).
            start = self.cum[f][n - 1] if n else 0.0
            self.cum[f][n:n + m] = np.cumsum(np.concatenate(([start], values)))[1:]
        self.n += m
        self.last = new[-1]


class TraceColumns:
    """StepTrace fields per engine as float64 arrays that grow with the run: a draw reads only the
    steps recorded since the last one, never the whole run again. A new run or another history
    (another list of traces) starts over. A field is a StepTrace attribute or (name, function of a
    trace), e.g. ("decode_ms", lambda t: t.latency_ms if t.phase == "decode" else 0.0)."""

    def __init__(self, fields) -> None:
        self.getters: dict = {}
        for field in fields:
            name, get = field if isinstance(field, tuple) else (field, operator.attrgetter(field))
            self.getters.setdefault(name, get)
        self._cols: dict[str, _Columns] = {}

    def clear(self) -> None:
        self._cols.clear()

    def _read(self, history: RunHistory, engine: str) -> _Columns:
        traces = history.traces.get(engine, [])
        cols = self._cols.get(engine)
        if (cols is None or cols.traces is not traces or cols.n > len(traces)
                or (cols.n and traces[cols.n - 1] is not cols.last)):
            cols = self._cols[engine] = _Columns(traces, self.getters)
        if len(traces) > cols.n:
            cols.extend(traces[cols.n:])
        return cols

    def values(self, history: RunHistory, engine: str, field: str) -> np.ndarray:
        """The field over the engine's recorded steps (a read-only view: do not write to it)."""
        cols = self._read(history, engine)
        return cols.buf[field][:cols.n]

    def totals(self, history: RunHistory, engine: str, field: str) -> np.ndarray:
        """The running total of the field (np.cumsum of values(), kept up to date step by step)."""
        cols = self._read(history, engine)
        return cols.cum[field][:cols.n]
