"""Colours, fonts and pyqtgraph defaults shared by every panel: one colour per engine everywhere, the
engines' palette read from kvviz.catalog (the page draws with the same).

Pure look: no data, no torch. Importing it sets pyqtgraph's row-major image order once, so a
[rows, cols] matrix is drawn as rows, never transposed.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import QGraphicsItem

from kvviz import catalog

pg.setConfigOptions(imageAxisOrder="row-major")

# One colour per engine, in every panel; line styles tell overlapping engines apart (the cached engines
# often draw the same curve). engine_color and engine_dash read the catalog at each use.
ENGINE_COLORS: dict[str, str] = catalog.engine_colors()
_EXTRA_COLORS = catalog.EXTRA_COLORS
ENGINE_DASH: dict[str, list[float] | None] = catalog.engine_dashes()

PLOT_BACKGROUND = "#ffffff"
PLOT_FOREGROUND = "#303030"
GRID_ALPHA = 0.15
MUTED_TEXT = "#8a8a8a"
HIGHLIGHT = "#ffd54f"  # the selected step's token / marker
STEP_LINE = "#555555"  # the vertical line at the selected step
STEP_OUTLINE = "#202020"  # the frame around the rows a matrix computed at the selected step

# What happened to one (query, key) cell or one cache slot at the selected step.
CELL_COLORS: dict[str, str] = {
    "empty": "#f7f7f7",  # nothing done this step
    "masked": "#d4d4d4",  # future: the causal mask forbids it
    "evicted": "#b5179e",  # dropped by a bounded cache (window, sinks): never read again
    "cached": "#7fb3e0",  # key/value read from the cache
    "recomputed": "#e4572e",  # computed again although it never changed
    "computed": "#ffb000",  # new work: computed for the first time
}
BLOCK_COLORS: dict[str, str] = {
    "free": "#ececec",  # a pool block no sequence holds
    "used": "#1f77b4",  # a slot holding a token's K/V
    "new": "#ffb000",  # a slot written this step
    "wasted": "#f4a582",  # reserved in the last block, still empty
}

# Points a long series keeps per pixel of its plot's width (pyqtgraph's 'peak' downsampling keeps
# each bin's min and max, so spikes stay): a 2 px line costs in proportion to its points.
SAMPLES_PER_PIXEL = 0.5

# The plot text's sizes at 100%: set_zoom scales the sizes below from these (View > Zoom, live).
_BASE_POINTS = {"title": 11.0, "label": 10.0, "tick": 9.0, "swatch": 11.0, "engine": 10.0, "detail": 8.0,
                "text": 11.0, "table": 9.0}
ZOOM = 1.0  # the panels' zoom (1.0 = 100%): plot text, pen widths, markers and readable sizes follow it
TITLE_SIZE = "11pt"
LABEL_SIZE = "10pt"
LABEL_STYLE = {"font-size": LABEL_SIZE, "color": PLOT_FOREGROUND}  # an axis name's look (setLabel's keywords)
TICK_POINT_SIZE = 9.0


def set_zoom(percent: int) -> float:
    """Scale the plot text sizes, pen widths and readable minimums every panel takes from here by
    percent / 100; returns the new factor. Panels read these at each restyle (Panel.apply_zoom)."""
    global ZOOM, TITLE_SIZE, LABEL_SIZE, TICK_POINT_SIZE, SWATCH_POINTS
    ZOOM = max(0.5, min(3.0, percent / 100))
    TITLE_SIZE = f"{points('title'):g}pt"
    LABEL_SIZE = f"{points('label'):g}pt"
    LABEL_STYLE["font-size"] = LABEL_SIZE
    TICK_POINT_SIZE = points("tick")
    SWATCH_POINTS = points("swatch")
    return ZOOM


# The smallest plot data areas that read at 100% (tick labels apart, a curve's shape, a matrix's
# cells), in pixels; scaled with the zoom (readable). A panel declares which it needs (Panel.readable_plot).
READABLE_PLOT = (150, 80)  # a line plot
READABLE_MATRIX = (100, 100)  # a matrix (work matrix, attention map)
STEP_ROW_PX = 5  # the step's rows in a matrix are drawn (and framed) at least this tall on screen


def readable(size: tuple[int, int]) -> tuple[int, int]:
    """A 100% plot size at the present zoom."""
    return px(size[0]), px(size[1])


def points(role: str) -> float:
    """A plot text's type size at the present zoom, rounded to half points."""
    return round(2 * _BASE_POINTS[role] * ZOOM) / 2


def px(pixels: float) -> int:
    """A length in screen pixels at 100% (an axis's width, a marker), at the present zoom."""
    return max(1, round(pixels * ZOOM))


engine_color = catalog.engine_color
engine_dash = catalog.engine_dash


def engine_label(engine: str) -> str:
    """An engine's name as the panels show it; a kernel comparison's lane as "static · C step", its kernel in the
    reader's language (kvviz.kernels.lane_label)."""
    from PySide6.QtCore import QCoreApplication

    from kvviz.kernels import KERNELS, lane_label

    return lane_label(engine, lambda k: QCoreApplication.translate("kernels", KERNELS[k].label))


def engine_pen(engine: str, order: int = 0, width: float = 2.0) -> pg.QtGui.QPen:
    dash = engine_dash(engine)
    # A dashed pen wider than 1 px is drawn through Qt's stroker: ~100x slower on a 2000-point
    # series (800 ms a frame), so dashed lines stay 1 px and are drawn above the solid ones.
    pen = pg.mkPen(engine_color(engine, order), width=1.0 if dash else width)
    if dash:
        pen.setDashPattern(dash)
    return pen


def rgba(hex_color: str, alpha: int = 255) -> tuple[int, int, int, int]:
    c = QColor(hex_color)
    return c.red(), c.green(), c.blue(), alpha


def lookup_table(colors: list[str]) -> np.ndarray:
    """uint8 [256, 4] table for an indexed uint8 image: value i is drawn in colors[i].

    256 entries because pyqtgraph spreads a shorter table over the whole uint8 range; with exactly
    256 it is used as the colour table of one Indexed8 QImage (no per-pixel RGBA conversion).
    """
    table = np.empty((256, 4), dtype=np.uint8)
    table[:] = rgba(colors[-1])
    table[: len(colors)] = [rgba(c) for c in colors]
    return table


def tick_font() -> QFont:
    font = QFont()
    font.setPointSizeF(TICK_POINT_SIZE)
    return font


# A title wider than its plot is drawn smaller, down to this share of its size, then clipped.
TITLE_MIN_SCALE = 0.6


def fit_title(plot: pg.PlotItem) -> None:
    """Let the plot's title never set the plot's width: a long title (an engine, layer, head and
    step; a legend in words) is scaled down to the width the plot has, instead of widening the plot
    past its panel, where the plot's right side was clipped."""
    label = plot.titleLabel
    if getattr(label, "_kvviz_fits", False):
        return
    label._kvviz_fits = True
    set_text = label.setText

    def hints() -> None:  # replaces LabelItem.updateMin: the natural size, but no minimum width
        natural = label.item.boundingRect()
        label.setMinimumWidth(0)
        label.setMinimumHeight(natural.height() * label.item.scale())
        label._sizeHint = {
            Qt.SizeHint.MinimumSize: (0, natural.height()),
            Qt.SizeHint.PreferredSize: (0, natural.height()),  # nor the widths of a grid's columns
            Qt.SizeHint.MaximumSize: (-1, -1),
            Qt.SizeHint.MinimumDescent: (0, 0),
        }

    def rescale() -> None:
        natural = label.item.boundingRect().width()
        room = label.width()
        scale = 1.0 if room <= 0 or natural <= room else max(TITLE_MIN_SCALE, room / natural)
        if abs(label.item.scale() - scale) > 1e-3:
            label.item.setScale(scale)
        pg.LabelItem.resizeEvent(label, None)  # centre the (scaled) text again

    def text_set(text, **kwargs) -> None:
        set_text(text, **kwargs)
        rescale()

    label.updateMin = hints
    label.setText = text_set
    label.geometryChanged.connect(rescale)
    hints()
    label.updateGeometry()


def engine_title(plot: pg.PlotItem, engine: str, order: int, detail: str, detail_points: float | None = None) -> None:
    """A plot's title on two lines: the engine in its colour, then what the plot shows of it."""
    detail_points = points("detail") if detail_points is None else detail_points
    plot.setTitle(
        f'<span style="color:{engine_color(engine, order)}; font-weight:bold; font-size:{points("engine"):g}pt">'
        f'{engine_label(engine)}</span><br>'
        f'<span style="color:{PLOT_FOREGROUND}; font-size:{detail_points:g}pt">{detail}</span>',
        size=f"{detail_points:g}pt")


def style_plot(plot: pg.PlotItem, title: str = "", left: str = "", bottom: str = "",
               left_units: str | None = None, bottom_units: str | None = None) -> None:
    """Readable title, labelled axes with units, a light grid: the house look of a panel's plot."""
    fit_title(plot)
    if title:
        plot.setTitle(title, size=TITLE_SIZE, color=PLOT_FOREGROUND)
    for name, text, units in (("left", left, left_units), ("bottom", bottom, bottom_units)):
        axis = plot.getAxis(name)
        axis.setPen(pg.mkPen(PLOT_FOREGROUND))
        axis.setTextPen(pg.mkPen(PLOT_FOREGROUND))
        axis.setTickFont(tick_font())
        axis.setStyle(maxTickLevel=1)  # major ticks and one minor level: a calmer, cheaper grid
        # Drawn once into a pixmap and blitted while its range holds: replaying the ticks, labels and
        # grid lines each frame cost ~2 ms per axis, most of a streaming plot's repaint.
        axis.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        if text:
            plot.setLabel(name, text, units=units, **LABEL_STYLE)
        # "ms" stays ms, never "kms"; and without it every range change re-sets the label's HTML
        # (48 times in a four-engine work matrix's first draw of a run).
        axis.enableAutoSIPrefix(False)
        # pyqtgraph still works out a scale here, from the range of the moment, and keeps it (a
        # 0-5000 ms axis re-styled by a language switch read 0-5): no scale.
        axis.autoSIPrefixScale, axis.labelUnitPrefix = 1.0, ""
        axis._updateLabel()
    plot.showGrid(x=True, y=True, alpha=GRID_ALPHA)


SWATCH_MARKS = {"square": "&#9632;", "line": "&#9473;&#9473;", "dashed": "&#9477;&#9477;"}
SWATCH_POINTS = 11.0  # every mark: a taller square made each legend line ~5 px taller


# A square this light vanishes on the window's grey: it is drawn as an outline instead.
PALE_SWATCH = 0.9
OUTLINE_SQUARE = ("&#9633;", "#9e9e9e")  # white square, grey edge


def swatch_html(color: str, text: str, *, mark: str = "square") -> str:
    """One legend entry as rich text: a coloured square, line or dashed line, then its label."""
    size = SWATCH_POINTS
    glyph = SWATCH_MARKS[mark]
    if mark == "square" and QColor(color).lightnessF() > PALE_SWATCH:  # "free block", "not computed"
        glyph, color = OUTLINE_SQUARE
    return f'<span style="color:{color}; font-size:{size:g}pt; font-weight:bold">{glyph}</span>&nbsp;{text}'

