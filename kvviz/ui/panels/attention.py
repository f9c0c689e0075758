"""Attention weights of the recorded layer and head at the selected step, one engine at a time.

A cached engine records only the rows it computed each step, so its matrix is accumulated from the
earlier steps' rows: the lower triangle fills in as decode goes on. The selected step's rows are
outlined. Reads StepTrace.attn_weights only.
"""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QComboBox, QGraphicsRectItem, QHBoxLayout, QLabel, QVBoxLayout

from kvviz.page.said import said
from kvviz.page.said_compare import attention_said
from kvviz.records.trace import StepTrace
from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._plots import (
    OUTLINE_PX,
    canvas,
    engine_step,
    fit_matrix,
    fit_title_row,
    frame_gap,
    matrix_plot,
    on_left_click,
    pool_blocks,
    sequence_labels,
    set_token_ticks,
    step_of_position,
    title_row_fits,
    upper_mask,
    view_point,
)
from kvviz.ui.panels.base import Panel, said_text

# The weights are drawn as one indexed uint8 image (pyqtgraph's fast Indexed8 path, no NaN
# handling per pixel): codes 0..252 are the colour map from 0 to the largest weight shown,
# 253 a key a bounded cache had evicted (stored as -1 in the weights), 254 a cell not recorded
# yet, 255 a masked (future) cell.
_LEVELS = 253
_EVICTED, _UNKNOWN, _MASKED = 253, 254, 255
_CMAP = pg.colormap.get("viridis")
_LUT = np.concatenate([
    _CMAP.getLookupTable(0.0, 1.0, _LEVELS, alpha=True).astype(np.uint8),
    style.lookup_table([style.CELL_COLORS["evicted"], style.CELL_COLORS["empty"], style.CELL_COLORS["masked"]])[:3],
])


def accumulate(traces: list[StepTrace]) -> tuple[np.ndarray, np.ndarray]:
    """(weights float32 [n, n] with NaN where unknown or masked, filled bool [n]) from steps 0..last.

    Each row comes from the latest step that computed it; n is the last step's sequence length.
    The causal mask (row i sees keys 0..i) is applied once to the whole matrix.
    """
    n = traces[-1].pos_stop
    out = np.full((n, n), np.nan, dtype=np.float32)
    filled = np.zeros(n, dtype=bool)
    lowest = n  # rows lowest..n-1 are filled: engines compute a contiguous block ending at pos_stop
    for trace in reversed(traces):
        w = trace.attn_weights
        if w is None or trace.pos_start >= lowest:
            continue
        a, b = trace.pos_start, min(trace.pos_stop, lowest)
        kv = min(w.shape[1], n)
        out[a:b, :kv] = w[: b - a, :kv]
        filled[a:b] = True
        lowest = a
        if lowest == 0:
            break
    out[upper_mask(n)] = np.nan
    return out, filled


# Weight buffers are kept between runs, written through once (their pages faulted in) while the
# window is idle: a fresh buffer's pages were faulted in as the sequence reached its rows, ~5 ms of
# each draw during a 2000-step run. At most this much memory is warmed or kept.
_KEEP_BYTES = 64 << 20
_spare: list[np.ndarray] = []  # float32 arrays owning buffers no accumulator uses


def _take_buffer(rows: int) -> np.ndarray:
    """A [rows, rows] float32 buffer (uninitialised), from the spares when one is large enough."""
    fits = [b for b in _spare if b.size >= rows * rows]
    if not fits:
        return np.empty((rows, rows), dtype=np.float32)
    owner = min(fits, key=lambda b: b.size)
    _forget(owner)
    return owner.reshape(-1)[: rows * rows].reshape(rows, rows)


def _give_buffer(buf: np.ndarray) -> None:
    owner = buf if buf.base is None else buf.base  # the array that owns the memory
    if owner.nbytes <= _KEEP_BYTES and all(b is not owner for b in _spare):
        _spare.append(owner)
        while sum(b.nbytes for b in _spare) > _KEEP_BYTES:
            _forget(min(_spare, key=lambda b: b.size))


def _forget(owner: np.ndarray) -> None:
    """Take one array out of the spares, by identity (list.remove compares arrays by value)."""
    _spare[:] = [b for b in _spare if b is not owner]


def warm_buffer(positions: int) -> bool:
    """Fault in a spare buffer for a run of up to `positions` tokens (False if none was made)."""
    size = positions * positions
    if not positions or size * 4 > _KEEP_BYTES or any(b.size >= size for b in _spare):
        return False
    flat = np.empty(size, dtype=np.float32)
    flat.fill(np.nan)  # touches every page
    _give_buffer(flat)
    return True


class _Accumulated:
    """One engine's accumulate() kept up to date as steps arrive: each new step writes only its own
    rows, and the image pooled for the view is refreshed only in the block rows those touch."""

    def __init__(self, traces: list[StepTrace], planned: int = 0) -> None:
        self.traces = traces  # the history's list: another run is another list
        self.steps = 0  # traces[:steps] are folded in
        self.last: StepTrace | None = None
        # Sized for the whole run up front (growing it mid-run meant a stall of a full copy and
        # re-pool) but left uninitialised: np.empty touches no memory, and rows are set to NaN only
        # as the sequence reaches them (_reach), so the first draw costs no planned x planned pass.
        self.buf = _take_buffer(planned)
        self.ready = 0  # buf rows [0, ready) hold NaN or weights across their whole width
        self.n = 0
        self.filled = np.zeros(planned, dtype=bool)
        self.factor = 0
        self.pooled = np.empty((0, 0), dtype=np.float32)
        self.pooled_ready = 0  # the same for pooled's rows
        self.dirty: tuple[int, int] | None = None  # rows changed since the last pooling

    def release(self) -> None:
        """Hand the buffer back for a later run (the accumulator is not used after this)."""
        if self.buf.size:
            _give_buffer(self.buf)
        self.buf = np.empty((0, 0), dtype=np.float32)

    def _reach(self, rows: int) -> None:
        """Make buf rows [0, rows) valid (NaN where nothing was written), growing buf if needed."""
        if rows > self.buf.shape[0]:
            size = max(rows, 256, 2 * self.buf.shape[0])
            grown = _take_buffer(size)
            old = self.buf.shape[0]
            grown[: self.ready, :old] = self.buf[: self.ready]
            grown[: self.ready, old:] = np.nan
            self.release()
            self.buf = grown
            filled = np.zeros(size, dtype=bool)
            filled[: len(self.filled)] = self.filled
            self.filled = filled
        if rows > self.ready:
            self.buf[self.ready: rows] = np.nan
            self.ready = rows

    def valid_for(self, traces: list[StepTrace]) -> bool:
        return (traces is self.traces and self.steps <= len(traces)
                and (not self.steps or traces[self.steps - 1] is self.last))

    def fold(self, upto: int) -> None:
        """Fold steps [steps, upto) in: each step's rows replace what earlier steps wrote there.
        A step whose rows a later one rewrites is skipped (naive rewrites them all every step)."""
        if upto <= self.steps:
            return
        # Every row the new steps reach made valid in one pass, not one call per step.
        self._reach(max(self.n, max(t.pos_stop for t in self.traces[self.steps: upto])))
        lowest, needed = math.inf, set()
        for j in range(upto - 1, self.steps - 1, -1):
            trace = self.traces[j]
            if trace.attn_weights is not None and trace.pos_start < lowest:
                needed.add(j)
                lowest = trace.pos_start
        for j in range(self.steps, upto):
            trace = self.traces[j]
            if j not in needed:
                self.n = max(self.n, trace.pos_stop)
                self.steps, self.last = j + 1, trace
                continue
            n = trace.pos_stop
            self.n = max(self.n, n)
            w = trace.attn_weights
            if w is not None:
                a, b = trace.pos_start, trace.pos_stop
                kv = min(w.shape[1], n)
                # The causal mask: row i sees keys 0..i.
                if b - a == 1:  # decode: one row, the keys past it masked
                    row = self.buf[a]
                    row[:kv] = w[0, :kv]
                    row[a + 1: kv] = np.nan
                    if getattr(trace, "held", None) is not None:  # keys the cache dropped: -1, in their colour
                        gone = trace.evicted
                        row[gone[gone < a]] = -1.0
                else:
                    block = self.buf[a:b, :kv]
                    block[...] = w[: b - a, :kv]
                    np.copyto(block, np.nan, where=np.arange(kv) > np.arange(a, b)[:, None])
                    spec = getattr(trace, "mask_spec", None)
                    if spec is not None and spec.bounded:
                        np.copyto(block, np.nan, where=~trace.mask[: b - a, :kv])  # left of a window's band
                self.filled[a:b] = True
                lo, hi = self.dirty or (a, b)
                self.dirty = (min(lo, a), max(hi, b))
            self.steps += 1
            self.last = trace

    def image(self, factor: int) -> np.ndarray:
        """The weights pooled by `factor` (max per block), re-pooled only where rows changed."""
        n = self.n
        m = -(-n // factor)
        if factor == 2 * self.factor and self.pooled_ready:
            # Coarser by two: blocks of the old image pair up exactly, no pass over the weights.
            self.image(self.factor)  # rows changed since, pooled as before
            pairs = -(-self.pooled_ready // 2)
            self._reach_pooled(min(2 * pairs, self.pooled.shape[0]))
            old = self.pooled[: 2 * pairs, : 2 * pairs]
            if old.shape[0] < 2 * pairs:  # the old image's edge: pad with NaN
                old = np.pad(old, ((0, 2 * pairs - old.shape[0]),) * 2, constant_values=np.nan)
            self._new_pooled(factor)
            self.pooled[:pairs, :pairs] = _pool_fmax(old, 2)
            self.pooled[:pairs, pairs:] = np.nan
            self.pooled_ready = pairs
        if factor != self.factor or self.pooled.shape[0] < m:
            self._new_pooled(factor, m)
            self.dirty = (0, n)
        self._reach_pooled(m)
        if self.dirty is not None:
            lo, hi = self.dirty[0] // factor, -(-self.dirty[1] // factor)
            self._reach(min(hi * factor, self.buf.shape[0]))  # rows past the sequence read as NaN
            rows = self.buf[lo * factor: hi * factor, : m * factor]
            if rows.shape != ((hi - lo) * factor, m * factor):  # the buffer's edge: pad with NaN
                padded = np.full(((hi - lo) * factor, m * factor), np.nan, dtype=np.float32)
                padded[: rows.shape[0], : rows.shape[1]] = rows
                rows = padded
            self.pooled[lo:hi, :m] = _pool_fmax(np.ascontiguousarray(rows[:, : m * factor]), factor, square=False)
            self.dirty = None
        return self.pooled[:m, :m]

    def _new_pooled(self, factor: int, m: int = 0) -> None:
        """An uninitialised pooled image as large as the buffer at this factor (grows with it)."""
        cap = max(m, -(-self.buf.shape[0] // factor))
        self.factor = factor
        self.pooled = np.empty((cap, cap), dtype=np.float32)
        self.pooled_ready = 0

    def _reach_pooled(self, rows: int) -> None:
        if rows > self.pooled_ready:
            self.pooled[self.pooled_ready: rows] = np.nan
            self.pooled_ready = rows


def _pool_fmax(weights: np.ndarray, factor: int, square: bool = True) -> np.ndarray:
    """Shrink by `factor` keeping each block's largest weight (NaN only where all are NaN).
    With square=False, `weights` is a strip whose sides are already multiples of `factor`."""
    if factor <= 1:
        return weights.copy()
    return pool_blocks(weights, factor, np.fmax, np.nan, square)


def to_codes(weights: np.ndarray, top: float, factor: int = 1) -> np.ndarray:
    """uint8 image of `weights` for the indexed colour table (pooled by `factor` when > 1)."""
    shown = _pool_fmax(weights, factor) if factor > 1 else weights
    m = shown.shape[0]
    with np.errstate(invalid="ignore"):
        codes = np.clip(shown * ((_LEVELS - 1) / max(top, 1e-12)), 0, _LEVELS - 1)
    unknown = np.isnan(shown)
    codes = np.nan_to_num(codes, nan=0).astype(np.uint8)
    codes[unknown] = _UNKNOWN
    codes[np.less(shown, 0, where=~unknown, out=np.zeros(shown.shape, dtype=bool))] = _EVICTED
    codes[upper_mask(m)] = _MASKED  # a block wholly above the diagonal
    return codes


class AttentionPanel(Panel):
    key = "attention"
    picks_steps = True  # a click on a query row shows the step that computed it

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._engine_box = QComboBox()
        # As wide as its longest engine name at the app's type size ("conca" at 150% before).
        self._engine_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self._engine_box.currentTextChanged.connect(self._on_engine_changed)
        self._caption = QLabel()
        self._caption.setStyleSheet(f"color: {style.MUTED_TEXT}")
        self._caption.setWordWrap(True)
        top = QHBoxLayout()
        top.addWidget(self._engine_box)
        top.addWidget(self._caption, 1)

        self._canvas = canvas()
        self._plot = self._canvas.addPlot()
        self._plot.hideButtons()
        self._plot.setMenuEnabled(False)
        self._plot.invertY(True)
        self._plot.setAspectLocked(True)
        matrix_plot(self._plot)  # the range is the drawn matrix's, set at every draw
        self._image = pg.ImageItem(axisOrder="row-major")
        self._plot.addItem(self._image)
        self._outline = QGraphicsRectItem()
        self._outline.setPen(pg.mkPen(style.STEP_OUTLINE, width=OUTLINE_PX, cosmetic=True))
        self._outline.setZValue(20)
        self._plot.addItem(self._outline, ignoreBounds=True)
        title_row_fits(self._plot, self._outline)  # the title's lines, then the frame's pen, then the matrix
        self._colorbar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=_CMAP, interactive=False, width=14,
                                         label=self.tr("weight"))
        self._colorbar.axis.setTickFont(style.tick_font())
        self._canvas.addItem(self._colorbar, row=0, col=1)
        self._plot.getViewBox().sigResized.connect(self._refresh_ticks)
        self._plot.getViewBox().sigRangeChanged.connect(self._refresh_ticks)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(top)
        layout.addWidget(self._canvas, 1)
        self._history: RunHistory | None = None
        on_left_click(self._canvas.scene(), self._on_clicked)
        self._step = 0
        self._labels: list[str] = []
        self._weights = np.zeros((0, 0), dtype=np.float32)
        self._engine = ""
        self._acc: dict[str, _Accumulated] = {}
        self._engine_label = QLabel()
        top.insertWidget(0, self._engine_label)
        self.retranslate()

    priority = 40

    def readable_plot(self) -> tuple[int, int]:
        return style.readable(style.READABLE_MATRIX)

    def warm_up(self, engines: tuple[str, ...], positions: int = 0) -> bool:
        """Fault in a weights buffer for the selected model's longest run (up to 64 MiB)."""
        warm_buffer(positions)
        return False

    def retranslate(self) -> None:
        self._engine_box.setToolTip(self.tr("Which engine's recorded weights to show"))
        self._engine_label.setText(self.tr("Engine:"))
        style.style_plot(self._plot, left=self.tr("query position"), bottom=self.tr("key position"))
        self._plot.showGrid(x=False, y=False)
        for side in ("left", "right"):  # the side ColorBarItem put its label on
            axis = self._colorbar.getAxis(side)
            if axis.labelText:
                axis.setLabel(self.tr("weight"))
        self.setToolTip(self.help_text())
        if self._history is not None:
            self.show_step(self._history, self._step)

    def title(self) -> str:
        return self.tr("Attention weights")

    def help_text(self) -> str:
        return self.tr(
            "softmax(Q K^T / sqrt(d)) of one layer and head: row i is how much query i looks at each "
            "earlier key; the causal mask hides the future (grey). Naive recomputes the whole matrix "
            "every step; a cached engine computes only the outlined new row and reads the keys from "
            "the cache, so its matrix fills in row by row. The rows agree across engines: the cache "
            "changes no math.")

    # -- data ---------------------------------------------------------------------------------
    def engine(self) -> str:
        """The engine whose weights are drawn ('' when none has any)."""
        return self._engine

    def weights(self) -> np.ndarray:
        """The matrix drawn, NaN where unknown or masked."""
        return self._weights.copy()

    def set_engine(self, engine: str) -> None:
        self._engine_box.setCurrentText(engine)

    # -- drawing ------------------------------------------------------------------------------
    def clear(self) -> None:
        self._history = None
        self._engine = ""
        for acc in self._acc.values():
            acc.release()
        self._acc.clear()
        self._weights = np.zeros((0, 0), dtype=np.float32)
        self._engine_box.blockSignals(True)
        self._engine_box.clear()
        self._engine_box.blockSignals(False)
        self._image.clear()
        self._outline.hide()
        self._plot.setTitle("")
        self._caption.setText("")

    def _on_clicked(self, scene_pos) -> None:
        point = view_point(self._plot, scene_pos)
        if point is None or self._history is None or not self._engine:
            return
        step = step_of_position(self._history, self._engine, math.floor(point.y()))  # the query row
        if step is not None:
            self.step_picked.emit(step)

    def _on_engine_changed(self, _text: str) -> None:
        if self._history is not None:
            self.show_step(self._history, self._step)

    def show_step(self, history: RunHistory, step: int) -> None:
        self._history, self._step = history, step
        with_weights = [e for e in history.engines
                        if any(t.attn_weights is not None for t in history.traces.get(e, [])[:1])]
        if [self._engine_box.itemText(i) for i in range(self._engine_box.count())] != with_weights:
            chosen = self._engine_box.currentText()
            self._engine_box.blockSignals(True)
            self._engine_box.clear()
            self._engine_box.addItems(with_weights)
            if chosen in with_weights:
                self._engine_box.setCurrentText(chosen)
            self._engine_box.blockSignals(False)
        engine = self._engine_box.currentText()
        if not engine:
            self._engine = ""
            self._image.clear()
            self._outline.hide()
            self._caption.setText(said_text(said("AttentionPanel", "No attention weights recorded in this run.")))
            return
        self._engine = engine
        k = engine_step(history, engine, step)
        all_traces = history.traces[engine]
        current = all_traces[k]
        n = current.pos_stop
        vb = self._plot.getViewBox()
        # A power of two: as the sequence grows the image gets coarser by halves, each made from the
        # last one; it keeps between half and all of the view's pixels.
        factor = 1 << max(0, math.ceil(math.log2(n / max(64, int(min(vb.width(), vb.height()))))))
        acc = self._acc.get(engine)
        if acc is None or not acc.valid_for(all_traces) or acc.steps > k + 1:
            planned = len(history.info.prompt_ids) + history.info.max_new_tokens
            if acc is not None:
                acc.release()
            acc = self._acc[engine] = _Accumulated(all_traces, planned)  # a new run, or scrubbing back
        acc.fold(k + 1)
        weights, filled = acc.buf[:n, :n], acc.filled[:n]
        self._weights = weights
        pooled = acc.image(factor)
        known = filled.any()
        top = max(float(np.nanmax(pooled)), 1e-6) if known else 1.0  # pooled by max: the same top
        codes = to_codes(pooled, top, 1)
        self._image.setImage(codes, autoLevels=False, levels=None, lut=_LUT)
        self._image.setRect(0, 0, codes.shape[1] * factor, codes.shape[0] * factor)
        fit_matrix(self._plot, codes.shape[1] * factor, codes.shape[0] * factor)
        self._colorbar.setLevels((0.0, top))
        # The step's rows framed at least STEP_ROW_PX tall on screen, however long the run (one row of
        # 2,000 is a fifth of a pixel): the frame grows upwards from the rows' end.
        extent = max(codes.shape[0] * factor, 1)
        tall = style.px(style.STEP_ROW_PX) * extent / max(self._plot.getViewBox().height(), 1.0)
        top = min(current.pos_start, max(0.0, current.pos_stop - tall))
        self._outline.setRect(QRectF(0, top, n, current.pos_stop - top))
        self._outline.show()
        order = list(history.engines).index(engine)
        title, caption = attention_said(current, k, int(filled[: current.pos_start].sum()))
        # Two lines, as the work matrix's views are titled: one line was too wide for a narrow panel.
        style.engine_title(self._plot, engine, order, said_text(title), detail_points=style.points("tick"))
        fit_title_row(self._plot, frame_gap(self._outline))
        self._caption.setText(said_text(caption))
        self._labels = sequence_labels(history, engine, n)
        self._refresh_ticks()

    def _refresh_ticks(self, *_args) -> None:
        set_token_ticks(self._plot, self._labels)

    def export_items(self) -> list:
        return [self._plot]
