"""Cache memory: resident K/V bytes and capacity per engine over the steps, and beside it the slots of one cache at
the selected step: a speculative engine's (a round's drafted slots by verdict, the bytes its rollback wrote and undid)
or the paged engine's block pool (its tiles and their legend from kvviz.page.said_compare's pool_kinds and pool_said,
the page's own). Draws the traces' fields only: no torch, no engine."""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent

from kvviz import catalog
from kvviz.format import fmt_bytes
from kvviz.page.said import Engine
from kvviz.page.said_compare import FREE, NEW, USED, WASTED, cache_legend, pool_kinds, pool_said, slots_said
from kvviz.records.tentative import SPEC_CELL_COLORS
from kvviz.records.trace import StepTrace
from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._plots import engine_step, legend_row, positions, set_legend
from kvviz.ui.panels._series import PlotSpec, SeriesPanel, SeriesSpec
from kvviz.ui.panels.base import said_text

# Slot kinds: the block pool's FREE, USED, NEW, WASTED (kvviz.page.said_compare.pool_kinds, whose tiles its legend
# counts), then the background between tiles, then a speculative round's.
_GAP = 4  # display only: the space between blocks
# A speculative round's tentative slots, as the work matrix names them: a drafted slot the target accepted, a
# rejected one left in place (advance-and-overwrite) or freed (crop), a slot written over a rejected one.
ACCEPTED, STALE, FREED, OVERWRITTEN = range(5, 9)
SPEC_KINDS = {ACCEPTED: "accepted", STALE: "stale", FREED: "freed", OVERWRITTEN: "overwritten"}
SPEC_ROW = 16  # a speculative cache's positions drawn as tiles of this many, labelled with their first
SIDE_BY_SIDE = 0.6  # the pool beside the plot in a panel at least this wide for its height
TOKENS_AXIS_ROOM = 110  # plot pixels the data must keep for the right-hand tokens axis to be shown
_LUT = style.lookup_table([style.BLOCK_COLORS[k] for k in ("free", "used", "new", "wasted")]
                          + [style.PLOT_BACKGROUND] + [SPEC_CELL_COLORS[k] for k in SPEC_KINDS.values()])
_TILE = 8  # pixels per slot; the last pixel row/column is a hairline between slots
_MAX_LABELS = 64  # blocks labelled with their logical index (one TextItem each, reused)
TILED_MAX = 4096  # blocks drawn slot by slot; a larger pool (a million positions) a pixel per block


def spec_slot_kinds(traces: list[StepTrace], index: int) -> np.ndarray:
    """uint8 [positions]: what each slot of a speculative engine's cache holds at `traces[index]`, its round's
    drafted slots by verdict. The round's first step (spec_index 0) carries its forward: the drafted slots
    pos_stop .. pos_stop + p - 1, the first a accepted; the rejected ones freed where the rule undid bytes
    (crop), else left in place with any an earlier round left (spec_stale); of the rows the forward wrote over
    rejected slots (from pos_start on), the one that is no draft (a draft keeps its verdict's colour). Slots
    past what the step holds: reserved (a static buffer's room) or background."""
    t = traces[index]
    r = traces[index - (t.spec_index or 0)]
    first, p, a = r.pos_stop, r.spec_proposed or 0, r.spec_accepted or 0
    stale = r.spec_stale or 0
    n = max(t.cache_capacity, t.cache_len, first + p, first + a + stale)
    kinds = np.full(n, _GAP, dtype=np.uint8)
    kinds[:t.cache_capacity] = WASTED
    kinds[:t.cache_len] = USED
    if not t.spec_index:
        kinds[t.pos_start:t.pos_stop] = NEW
    kinds[first:first + a] = ACCEPTED
    if r.bytes_undone:
        kinds[first + a:first + p] = FREED
    kinds[first + a:first + a + stale] = STALE
    if r.bytes_overwritten:
        per_row = r.bytes_written // (1 + (r.spec_rolled_back or 0))  # the round wrote 1 + p - a rows it kept
        over = slice(r.pos_start, r.pos_start + r.bytes_overwritten // max(per_row, 1))
        kinds[over] = np.where(np.isin(kinds[over], (USED, NEW)), np.uint8(OVERWRITTEN), kinds[over])
    return kinds


def spec_bytes(traces: list[StepTrace], index: int) -> dict[str, int]:
    """The K/V bytes a speculative engine's steps 0..index wrote, undid (crop) and wrote over rejected slots
    (advance-and-overwrite), summed as its records give them."""
    upto = traces[:index + 1]
    return dict(written=sum(t.bytes_written for t in upto), undone=sum(t.bytes_undone or 0 for t in upto),
                overwritten=sum(t.bytes_overwritten or 0 for t in upto))


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


def compact_pool(kinds: np.ndarray) -> np.ndarray:
    """uint8 image of a pool too large to draw slot by slot (TILED_MAX blocks): one pixel per block, in
    a near-square grid, the block's most telling kind (written this step, then reserved and empty, then
    holding K/V, else free); the cells past the last block are background."""
    n_pool = kinds.shape[0]
    block = np.full(n_pool, FREE, dtype=np.uint8)
    for kind in (USED, WASTED, NEW, ACCEPTED, STALE, FREED, OVERWRITTEN):  # later kinds win
        block[(kinds == kind).any(axis=1)] = kind
    cols = max(1, math.ceil(math.sqrt(n_pool)))
    rows = -(-n_pool // cols)
    image = np.full(rows * cols, _GAP, dtype=np.uint8)
    image[:n_pool] = block
    return image.reshape(rows, cols)


def slot_shape(size: int) -> tuple[int, int]:
    """(rows, cols) of a block drawn as a small tile: the most square factorisation of `size`."""
    rows = max(d for d in range(1, int(math.isqrt(size)) + 1) if size % d == 0)
    return rows, size // rows


class CacheMemoryPanel(SeriesPanel):
    key = "cache_memory"
    log_option = False
    extra_fields = ("cache_len",)

    def plot_specs(self) -> list[PlotSpec]:
        return [PlotSpec("memory", self.tr("resident K/V"), self.tr("memory"), byte_units=True)]

    priority = 30

    def readable_items(self) -> list:
        """The memory plot: the block pool beside it is a picture of blocks (labelled only where they
        are large enough), not a plot with ticks to read."""
        return [self._plots["memory"]]

    def series_specs(self) -> list[SeriesSpec]:
        return [SeriesSpec("bytes", "memory", "cache_bytes")]

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        plot = self._plots["memory"]
        # Resident bytes are capacity x bytes per token for every cache, so one plot carries both:
        # bytes on the left, the same lines read in tokens on the right.
        plot.showAxis("right")
        self._tokens_axis = plot.getAxis("right")
        self._tokens_axis.setTickFont(style.tick_font())
        self._tokens_axis.setTextPen(pg.mkPen(style.PLOT_FOREGROUND))
        self._tokens_axis.enableAutoSIPrefix(False)
        self._tokens_axis.setWidth(52)
        self._held = pg.PlotDataItem(pen=pg.mkPen("#9e9e9e", width=6))
        self._held.setZValue(-5)
        plot.addItem(self._held)
        self._grid = pg.PlotItem()
        style.fit_title(self._grid)
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
        self._n_labelled = 0
        self._block_px = 1
        self._grid.getViewBox().sigResized.connect(self._update_labels)
        self._grid.getViewBox().sigRangeChanged.connect(self._update_labels)
        self._side_by_side: bool | None = None
        self._place_grid()
        # The canvas's resizes (the panel's, and the legends above and below it gaining or losing
        # lines) place the grid and decide the tokens axis.
        self._canvas.installEventFilter(self)
        # The block legend's first entry says whose pool the grid is, its size and the block table
        # (or that no engine has one): as the grid's title it had run over the plot's title beside it.
        # Its texts are said_compare's sentences (said in the window's language when shown) or the panel's own.
        self._pool_entry: tuple = ()
        self._slots_said = slots_said(None, None)  # the slots holding K/V and the reserved, empty ones, counted
        self._block_legend = legend_row()
        self.layout().addWidget(self._block_legend)
        self._pool = np.zeros((0, 0), dtype=np.uint8)
        self._table: tuple[int, ...] = ()
        self._held_y = np.zeros(0)
        self._held_key: tuple = ()
        self._held_base = None
        self._pool_key: tuple = ()
        self._pool_trace: StepTrace | None = None
        self._spec_slots = np.zeros(0, dtype=np.uint8)  # a speculative engine's slot kinds, as drawn
        self._spec_bytes: dict[str, int] = {}
        self.retranslate()

    def retranslate(self) -> None:
        if not hasattr(self, "_block_legend"):
            return  # SeriesPanel.__init__ calls it before this panel's own items exist
        self._tokens_axis.setLabel(self.tr("capacity (tokens)"), **style.LABEL_STYLE)
        self._set_block_legend()
        self._pool_key = ()
        super().retranslate()

    def _set_block_legend(self, slots: tuple | None = None) -> None:
        """The grid's legend: whose pool or cache it is (_pool_entry), the slots holding K/V and the reserved, empty
        ones (`slots`: said_compare's sentences with their counts of drawn tiles, kept for a retranslation), the
        other kinds."""
        if slots is not None:
            self._slots_said = slots
        head = [(color, said_text(words), *mark) for color, words, *mark in self._pool_entry]
        held, empty = (said_text(words) for words in self._slots_said)
        if len(self._spec_slots):
            shown = set(np.unique(self._spec_slots).tolist())
            spec = [(SPEC_CELL_COLORS["accepted"], self.tr("drafted, accepted")),
                    (SPEC_CELL_COLORS["stale"], self.tr("drafted, rejected: left in place")),
                    (SPEC_CELL_COLORS["freed"], self.tr("drafted, rejected: freed")),
                    (SPEC_CELL_COLORS["overwritten"], self.tr("written over a rejected slot"))]
            set_legend(self._block_legend, [
                *head,
                (style.BLOCK_COLORS["used"], held),
                (style.BLOCK_COLORS["new"], self.tr("written this step")),
                *[entry for kind, entry in zip(SPEC_KINDS, spec) if kind in shown],
                *([(style.BLOCK_COLORS["wasted"], empty)] if WASTED in shown else []),
            ])
            return
        set_legend(self._block_legend, [
            *head,
            (style.BLOCK_COLORS["used"], held),
            (style.BLOCK_COLORS["new"], self.tr("written this step")),
            (style.BLOCK_COLORS["wasted"], empty),
            (style.BLOCK_COLORS["free"], self.tr("free block")),
        ])

    def _update_labels(self, *_args) -> None:
        """Label blocks with their place in the table only where a block is big enough on screen."""
        vb = self._grid.getViewBox()
        (x0, x1), _ = vb.viewRange()
        block_on_screen = self._block_px * vb.width() / max(x1 - x0, 1e-9)
        for i, text in enumerate(self._texts):
            text.setVisible(i < self._n_labelled and block_on_screen >= 30)

    def _place_grid(self) -> None:
        """The block pool beside the plot unless the panel is tall (narrower than SIDE_BY_SIDE of its
        height), under it then; the tokens axis only where the plot's data keeps TOKENS_AXIS_ROOM
        pixels beside both axes (the legend gives each engine's capacity in tokens as well).
        Decided by the panel's shape, not the canvas's: the legends above and below the canvas take
        more or fewer lines in another language, and the pool had gone under the plot in Chinese."""
        side = self.width() >= SIDE_BY_SIDE * self.height()
        share = self._canvas.width() * (0.6 if side else 1.0)  # the plot's column (stretch 3:2 beside)
        axes = self._plots["memory"].getAxis("left").fixedWidth + self._tokens_axis.fixedWidth  # shown or not
        tokens_axis = share - axes >= TOKENS_AXIS_ROOM
        if tokens_axis != self._tokens_axis.isVisible():
            self._plots["memory"].showAxis("right", tokens_axis)
        if side == self._side_by_side:
            return
        self._side_by_side = side
        layout = self._canvas.ci
        if self._grid in layout.items:
            layout.removeItem(self._grid)
        layout.addItem(self._grid, row=0 if side else 1, col=1 if side else 0)
        stretch = layout.layout
        stretch.setColumnStretchFactor(0, 3)
        stretch.setColumnStretchFactor(1, 2 if side else 0)
        stretch.setRowStretchFactor(0, 1)
        stretch.setRowStretchFactor(1, 0 if side else 1)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt override)
        if watched is self._canvas and event.type() == QEvent.Type.Resize:
            self._place_grid()
        return super().eventFilter(watched, event)

    def title(self) -> str:
        return self.tr("Cache memory")

    def help_text(self) -> str:
        return self.tr(
            "Per token and layer a cache holds K and V: 2 \u00b7 kv_heads \u00b7 d_head \u00b7 bytes. concat "
            "holds exactly the tokens so far but reallocates every step; static reserves the whole run "
            "up front; paged takes a fixed-size block from a pool only when the last one is full, so "
            "at most one block is partly empty (salmon). The grid is the pool: the block table "
            "(#0, #1, ...) holds the sequence together, not adjacency: the grid shows pool blocks 0, 1, 2, ... "
            "left to right, labelled with their place in the table.") + " " + self.tr(
            "With a speculative engine in the run the grid is its cache instead, {n} positions a tile: a round's "
            "drafted slots in the work matrix's colours (accepted; rejected and left in place for the next "
            "forward to write over, or freed; written over a rejected slot), and what its rollback rule wrote "
            "and undid.").format(n=SPEC_ROW)

    def legend_entries(self, engines: list[str], history: RunHistory, step: int) -> list[tuple]:
        return [*super().legend_entries(engines, history, step), ("#9e9e9e", self.tr("tokens held"), "line")]

    def legend_text(self, engine: str, history: RunHistory, step: int) -> str:
        trace = history.at(engine, step)
        if trace is None:
            return engine
        return said_text(cache_legend(Engine(engine, 0), trace))  # a preallocated cache's room beside its content

    # -- data ---------------------------------------------------------------------------------
    def pool(self) -> np.ndarray:
        """[n_pool, block_size] slot kinds (FREE, USED, NEW, WASTED) of the paged pool, as drawn."""
        return self._pool.copy()

    def block_table(self) -> tuple[int, ...]:
        return self._table

    def spec_slots(self) -> np.ndarray:
        """[positions] slot kinds of the speculative engine's cache as drawn (empty: none in the run)."""
        return self._spec_slots.copy()

    def spec_byte_totals(self) -> dict[str, int]:
        """The K/V bytes the drawn speculative engine wrote, undid and wrote over up to the step shown."""
        return dict(self._spec_bytes)

    # -- drawing ------------------------------------------------------------------------------
    def clear(self) -> None:
        super().clear()
        if hasattr(self, "_block_legend"):
            self._held.setData([], [])
            self._held_y = np.zeros(0)
            self._held_key = ()
            self._pool_key = ()
            self._image.clear()
            for text in self._texts:
                text.hide()
            self._n_labelled = 0  # an earlier paged run's block labels stay hidden (a resize had shown them)
            self._pool_entry = ()
            self._spec_slots = np.zeros(0, dtype=np.uint8)
            self._spec_bytes = {}
            self._set_block_legend(slots_said(None, None))
            self._pool = np.zeros((0, 0), dtype=np.uint8)
            self._table = ()

    def y_values(self, plot_key: str) -> list[np.ndarray]:
        return [*super().y_values(plot_key), self._held_y]

    def show_step(self, history: RunHistory, step: int) -> None:
        engines = [e for e in history.engines if history.traces.get(e)]
        if engines:
            self._ensure_curves(engines)  # (a new engine set clears the held line too)
        sized = [t for e in engines for t in history.traces[e][-1:] if t.cache_capacity]
        if sized:
            per_token = sized[0].cache_bytes / sized[0].cache_capacity  # bytes of one token, all layers
            if self._tokens_axis.scale != 1.0 / per_token:
                self._tokens_axis.setScale(1.0 / per_token)
            held = self.columns.values(history, sized[0].engine, "cache_len")
            key = (id(held.base), len(held), per_token)
            if key != self._held_key or self._held_base is not held.base:
                self._held_key, self._held_base = key, held.base
                self._held_y = held * per_token
                self._held.setData(positions(len(held)), self._held_y)
        super().show_step(history, step)
        if not engines:
            return
        spec = [e for e in engines if history.traces[e][0].spec_k is not None]
        if spec:  # a speculative engine's tentative slots say more than a pool: its slots are drawn
            engine = spec[0]
            index = engine_step(history, engine, step)
            trace = history.traces[engine][index]
            key = ("spec", id(trace), history.info.run_id)
            if self._pool_key != key or self._pool_trace is not trace:
                self._pool_key, self._pool_trace = key, trace
                self._draw_spec(history, engine, index)
            return
        self._spec_slots = np.zeros(0, dtype=np.uint8)
        self._spec_bytes = {}
        paged = [e for e in engines if history.traces[e][0].block_table is not None]
        if not paged:
            self._image.clear()
            self._pool_key = ()
            for text in self._texts:
                text.hide()
            self._n_labelled = 0
            self._pool_entry = ((style.MUTED_TEXT, self.tr("no paged engine: no block table"), "square"),)
            self._set_block_legend(slots_said(None, None))
            return
        engine = paged[0]
        trace = history.traces[engine][engine_step(history, engine, step)]
        key = (id(trace), history.info.run_id, history.info.max_new_tokens)
        if self._pool_key != key or self._pool_trace is not trace:
            self._pool_key, self._pool_trace = key, trace
            self._draw_pool(history, engine, trace)

    def _draw_spec(self, history: RunHistory, engine: str, index: int) -> None:
        """The speculative engine's cache slots at step `index`, SPEC_ROW positions a tile, and the bytes its
        round and its steps so far wrote, undid and wrote over."""
        traces = history.traces[engine]
        kinds = spec_slot_kinds(traces, index)
        self._spec_slots = kinds
        self._pool, self._table = np.zeros((0, 0), dtype=np.uint8), ()
        rows = -(-len(kinds) // SPEC_ROW)
        tiles = np.full(rows * SPEC_ROW, _GAP, dtype=np.uint8)
        tiles[:len(kinds)] = kinds
        tiles = tiles.reshape(rows, SPEC_ROW)
        self._draw_tiles(tiles, [str(i * SPEC_ROW) for i in range(rows)], SPEC_ROW)
        t = traces[index]
        r = traces[index - (t.spec_index or 0)]
        self._spec_bytes = totals = spec_bytes(traces, index)
        order = list(history.engines).index(engine)
        dash = "dashed" if catalog.engine_dash(engine) else "line"
        self._pool_entry = (
            (style.engine_color(engine, order),
             f"{engine} " + self.tr("cache slots, {n} positions a tile").format(n=SPEC_ROW) + ", "
             + self.tr("this round wrote {written}, undid {undone}, wrote over {over}").format(
                 written=fmt_bytes(r.bytes_written), undone=fmt_bytes(r.bytes_undone or 0),
                 over=fmt_bytes(r.bytes_overwritten or 0)), dash),
            (style.MUTED_TEXT, self.tr("steps 0 to {step}: wrote {written}, undid {undone}, wrote over {over}").format(
                step=index, written=fmt_bytes(totals["written"]), undone=fmt_bytes(totals["undone"]),
                over=fmt_bytes(totals["overwritten"])), "square"))
        self._set_block_legend(slots_said(int(np.isin(kinds, (USED, NEW, ACCEPTED, OVERWRITTEN)).sum()),
                                          int((kinds == WASTED).sum())))

    def _draw_pool(self, history: RunHistory, engine: str, trace: StepTrace) -> None:
        """The paged engine's pool at the step of `trace`, its legend counted on the tiles drawn (as the page's)."""
        kinds = pool_kinds(trace, history.info)
        self._pool = kinds
        self._table = tuple(trace.block_table or ())
        self._draw_tiles(kinds, {b: f"#{i}" for i, b in enumerate(self._table)}, kinds.shape[1])
        order = list(history.engines).index(engine)
        said = pool_said(Engine(engine, order), trace, kinds)
        self._pool_entry = ((style.engine_color(engine, order), said["title"],
                             "dashed" if catalog.engine_dash(engine) else "line"),)
        self._set_block_legend((said["used"], said["wasted"]))

    def _draw_tiles(self, kinds: np.ndarray, labels, size: int) -> None:
        """Draw `kinds` ([tiles, size] slot kinds) as the grid of tiles, labelled where `labels` says: a list
        (tile i's label) or a dict (tile -> label), up to _MAX_LABELS of them."""
        labels = dict(enumerate(labels)) if isinstance(labels, list) else labels
        if kinds.shape[0] > TILED_MAX:  # drawing costs what the panel shows, not the pool's size
            image, centers = compact_pool(kinds), []
        else:
            image, centers = layout_pool(kinds)
        self._image.setImage(image, autoLevels=False, levels=None, lut=_LUT)
        self._image.setRect(0, 0, image.shape[1], image.shape[0])
        labelled = list(labels.items()) if len(labels) <= _MAX_LABELS and centers else []
        while len(self._texts) < len(labelled):
            text = pg.TextItem(color=style.PLOT_FOREGROUND, anchor=(0.5, 0.5),
                               fill=pg.mkBrush(255, 255, 255, 215))
            text.setFont(style.tick_font())
            text.setZValue(10)
            self._grid.addItem(text)
            self._texts.append(text)
        for i, text in enumerate(self._texts):
            if i < len(labelled):
                tile, label = labelled[i]
                text.setText(label)
                text.setPos(*centers[tile])
        self._n_labelled = len(labelled)
        self._block_px = slot_shape(size)[1] * _TILE  # a block's width in image pixels
        self._update_labels()

    def export_items(self) -> list:
        return [*super().export_items(), self._grid]
