"""Cache memory: resident K/V bytes and capacity per engine over the steps, and the paged engine's
block pool at the selected step (which blocks its block table holds, the slots used and wasted).

Reads cache_bytes, cache_capacity, cache_len, block_table and block_size from the traces; the pool's
size comes from the run's length (prompt + new tokens), as the paged cache sizes it.
"""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg

from kvviz.trace import StepTrace
from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._plots import engine_step, fmt_bytes, legend_row, series
from kvviz.ui.panels._series import PlotSpec, SeriesPanel

# Slot kinds in the block pool.
FREE, USED, NEW, WASTED = range(4)
_GAP = 4  # display only: the space between blocks
_LUT = style.lookup_table([style.BLOCK_COLORS[k] for k in ("free", "used", "new", "wasted")]
                          + [style.PLOT_BACKGROUND])
_TILE = 8  # pixels per slot; the last pixel row/column is a hairline between slots
_MAX_LABELS = 64  # blocks labelled with their logical index (one TextItem each, reused)


def pool_kinds(trace: StepTrace, n_pool: int) -> np.ndarray:
    """uint8 [n_pool, block_size]: what each slot of each pool block holds after this step."""
    size = trace.block_size or 1
    table = trace.block_table or ()
    kinds = np.full((max(n_pool, max(table, default=-1) + 1), size), FREE, dtype=np.uint8)
    for logical, block in enumerate(table):
        first = logical * size
        for slot in range(size):
            pos = first + slot
            if pos >= trace.cache_len:
                kinds[block, slot] = WASTED
            elif pos >= trace.pos_start:
                kinds[block, slot] = NEW
            else:
                kinds[block, slot] = USED
    return kinds


def layout_pool(kinds: np.ndarray) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """Draw the pool as a grid of blocks, each a small tile of its slots, blocks apart by a gap.

    Returns the uint8 image (pixels, row-major) and each block's centre in image pixels.
    """
    n_pool, size = kinds.shape
    sr, sc = slot_shape(size)
    t, gap = _TILE, _TILE // 2 + 2
    bc = max(1, round(math.sqrt(n_pool * (sr * t + gap) / (sc * t + gap))))
    br = -(-n_pool // bc)
    cells = np.full((br * sr, bc * sc), _GAP, dtype=np.uint8)
    for block in range(n_pool):
        r0, c0 = (block // bc) * sr, (block % bc) * sc
        cells[r0:r0 + sr, c0:c0 + sc] = kinds[block].reshape(sr, sc)

    def axis_map(n_blocks: int, per: int) -> tuple[np.ndarray, np.ndarray]:
        pitch = per * t + gap
        px = np.arange(n_blocks * pitch - gap)
        within = px % pitch
        index = (px // pitch) * per + np.minimum(within // t, per - 1)
        blank = (within >= per * t) | (within % t == t - 1)  # block gap or hairline between slots
        return index, blank

    rows, row_blank = axis_map(br, sr)
    cols, col_blank = axis_map(bc, sc)
    image = cells[rows[:, None], cols[None, :]]
    image[row_blank, :] = _GAP
    image[:, col_blank] = _GAP
    centers = [((b % bc) * (sc * t + gap) + sc * t / 2, (b // bc) * (sr * t + gap) + sr * t / 2)
               for b in range(n_pool)]
    return np.ascontiguousarray(image), centers


def slot_shape(size: int) -> tuple[int, int]:
    """(rows, cols) of a block drawn as a small tile: the most square factorisation of `size`."""
    rows = max(d for d in range(1, int(math.isqrt(size)) + 1) if size % d == 0)
    return rows, size // rows


class CacheMemoryPanel(SeriesPanel):
    key = "cache_memory"
    log_option = False

    def plot_specs(self) -> list[PlotSpec]:
        return [
            PlotSpec("bytes", self.tr("Resident K/V"), self.tr("cache memory"), "cache_bytes", byte_units=True),
            PlotSpec("capacity", self.tr("Capacity (lines) and tokens held (grey)"), self.tr("tokens"),
                     "cache_capacity", row=1),
        ]

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._held = pg.PlotDataItem(pen=pg.mkPen("#9e9e9e", width=6))
        self._held.setZValue(-5)
        self._plots["capacity"].addItem(self._held)
        self._grid = self._canvas.addPlot(row=0, col=1, rowspan=2)
        self._grid.hideButtons()
        self._grid.setMenuEnabled(False)
        self._grid.invertY(True)
        self._grid.setAspectLocked(True)
        self._grid.hideAxis("left")
        self._grid.hideAxis("bottom")
        self._grid.getViewBox().setDefaultPadding(0.02)
        self._image = pg.ImageItem(axisOrder="row-major")
        self._grid.addItem(self._image)
        self._texts: list[pg.TextItem] = []
        self._canvas.ci.layout.setColumnStretchFactor(0, 3)
        self._canvas.ci.layout.setColumnStretchFactor(1, 2)
        self._block_legend = legend_row([
            (style.BLOCK_COLORS["used"], self.tr("slot holding a token's K/V")),
            (style.BLOCK_COLORS["new"], self.tr("written this step")),
            (style.BLOCK_COLORS["wasted"], self.tr("reserved in the last block, empty")),
            (style.BLOCK_COLORS["free"], self.tr("free pool block")),
        ])
        self.layout().addWidget(self._block_legend)
        self._pool = np.zeros((0, 0), dtype=np.uint8)
        self._table: tuple[int, ...] = ()

    def title(self) -> str:
        return self.tr("Cache memory")

    def help_text(self) -> str:
        return self.tr(
            "Per token and layer a cache holds K and V: 2 \u00b7 kv_heads \u00b7 d_head \u00b7 bytes. concat "
            "holds exactly the tokens so far but reallocates every step; static reserves the whole run "
            "up front; paged takes a fixed-size block from a pool only when the last one is full, so "
            "at most one block is partly empty (salmon). The grid is the pool: the block table "
            "(#0, #1, ...) holds the sequence together, not adjacency: the grid shows pool blocks 0, 1, 2, ... "
            "left to right, labelled with their place in the table.")

    def legend_text(self, engine: str, history: RunHistory, step: int) -> str:
        trace = history.at(engine, step)
        if trace is None:
            return engine
        return self.tr("{engine}: {bytes}, {cap} slots").format(
            engine=engine, bytes=fmt_bytes(trace.cache_bytes), cap=trace.cache_capacity)

    # -- data ---------------------------------------------------------------------------------
    def pool(self) -> np.ndarray:
        """[n_pool, block_size] slot kinds (FREE, USED, NEW, WASTED) of the paged pool, as drawn."""
        return self._pool.copy()

    def block_table(self) -> tuple[int, ...]:
        return self._table

    # -- drawing ------------------------------------------------------------------------------
    def clear(self) -> None:
        super().clear()
        if hasattr(self, "_image"):
            self._held.setData([], [])
            self._image.clear()
            for text in self._texts:
                text.hide()
            self._grid.setTitle("")
            self._pool = np.zeros((0, 0), dtype=np.uint8)
            self._table = ()

    def show_step(self, history: RunHistory, step: int) -> None:
        super().show_step(history, step)
        engines = [e for e in history.engines if history.traces.get(e)]
        if not engines:
            return
        cached = [e for e in engines if any(t.cache_len for t in history.traces[e][:1])]
        if cached:
            held = series(history, cached[0], "cache_len")
            self._held.setData(np.arange(len(held)), held)
        paged = [e for e in engines if history.traces[e][0].block_table is not None]
        if not paged:
            self._image.clear()
            for text in self._texts:
                text.hide()
            self._grid.setTitle(self.tr("No paged engine in this run: no block table to draw"),
                                size=style.TITLE_SIZE, color=style.MUTED_TEXT)
            return
        engine = paged[0]
        trace = history.traces[engine][engine_step(history, engine, step)]
        self._draw_pool(history, engine, trace)

    def _draw_pool(self, history: RunHistory, engine: str, trace: StepTrace) -> None:
        size = trace.block_size or 1
        info = history.info
        n_pool = -(-(len(info.prompt_ids) + info.max_new_tokens) // size) if info.max_new_tokens else 0
        kinds = pool_kinds(trace, n_pool)
        self._pool = kinds
        self._table = tuple(trace.block_table or ())
        n_pool = kinds.shape[0]
        image, centers = layout_pool(kinds)
        self._image.setImage(image, autoLevels=False, levels=None, lut=_LUT)
        self._image.setRect(0, 0, image.shape[1], image.shape[0])
        labelled = self._table if len(self._table) <= _MAX_LABELS else ()
        while len(self._texts) < len(labelled):
            text = pg.TextItem(color=style.PLOT_FOREGROUND, anchor=(0.5, 0.5),
                               fill=pg.mkBrush(255, 255, 255, 215))
            text.setFont(style.tick_font())
            text.setZValue(10)
            self._grid.addItem(text)
            self._texts.append(text)
        for i, text in enumerate(self._texts):
            if i < len(labelled):
                text.setText(f"#{i}")
                text.setPos(*centers[labelled[i]])
                text.show()
            else:
                text.hide()
        used = int(np.isin(kinds, (USED, NEW)).sum())
        wasted = int((kinds == WASTED).sum())
        order = list(history.engines).index(engine)
        table = ", ".join(str(b) for b in self._table[:12]) + (", \u2026" if len(self._table) > 12 else "")
        self._grid.setTitle(
            f'<span style="color:{style.engine_color(engine, order)}; font-weight:bold">{engine}</span> '
            f'<span style="color:{style.PLOT_FOREGROUND}">'
            + self.tr("block pool: {n} blocks of {size} slots").format(n=n_pool, size=size)
            + "<br>" + self.tr("table [{table}] \u00b7 {used} used, {wasted} wasted").format(
                table=table, used=used, wasted=wasted)
            + "</span>", size=style.TITLE_SIZE)

    def export_items(self) -> list:
        return [*super().export_items(), self._grid]
