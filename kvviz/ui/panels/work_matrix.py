"""Work matrix: for each engine, what happened to every (query row, key column) cell at one step.

Derived only from the traces (pos_start/pos_stop, the mask, earlier steps' positions, a speculative round's
drafted slots), never from an engine's name, so a new cache strategy is drawn correctly the moment it records
its steps.
"""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtWidgets import QGraphicsRectItem, QVBoxLayout

from kvviz.page.said_compare import matrix_detail
from kvviz.records.tentative import SPEC_CELL_COLORS, tentative
from kvviz.records.trace import StepTrace
from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._plots import (
    OUTLINE_PX,
    TraceColumns,
    canvas,
    cell_px,
    engine_step,
    fit_matrix,
    fit_title_row,
    frame_gap,
    legend_row,
    matrix_plot,
    on_left_click,
    pool_blocks,
    scenes_in,
    sequence_labels,
    set_legend,
    set_token_ticks,
    settle,
    step_of_position,
    title_row_fits,
    view_point,
)
from kvviz.ui.panels.base import Panel, said_text

# Cell kinds, ordered by how much a pooled pixel must keep them visible (max-pooling keeps the
# highest): one computed row of 2048 must not vanish when the image is shrunk to 400 pixels.
# EVICTED: a key a bounded cache (window, sinks) dropped before this step: evicted, never read again.
# A speculative round's tentative slots (kvviz.engines.spec): a drafted row the target accepted, one it
# rejected and the rule left in place (advance-and-overwrite) or cut from the cache (crop/free), and a row
# written over a rejected slot left in place by an earlier round.
EMPTY, MASKED, EVICTED, CACHED, RECOMPUTED, COMPUTED, FREED, STALE, ACCEPTED, OVERWRITTEN = range(10)
KIND_NAMES = ("empty", "masked", "evicted", "cached", "recomputed", "computed", "freed", "stale", "accepted",
              "overwritten")
_GAP = len(KIND_NAMES)  # display-only code: the thin line between cells of a small matrix
_LUT = style.lookup_table([style.CELL_COLORS.get(k) or SPEC_CELL_COLORS[k] for k in KIND_NAMES]
                          + [style.PLOT_BACKGROUND])
_GRID_MAX = 64  # up to this many positions each cell is drawn as a tile with a gap around it
LABELLED_MAX = 4096  # longer sequences are numbered, never labelled with tokens (no cell is 8 px wide)
STEP_ROW_PX = style.STEP_ROW_PX  # the step's rows are drawn at least this tall on screen (at 100%), framed
_TILE = 8


_templates: dict[str, np.ndarray] = {}


def _template(name: str, n: int) -> np.ndarray:
    """Cached [N, N] uint8 (N >= n) patterns that depend only on (row, column), sliced per step:
    "idle": EMPTY on and below the diagonal, MASKED above; "cap": 255 on and below, MASKED above."""
    t = _templates.get(name)
    if t is None or t.shape[0] < n:
        size = max(n, 256, 2 * (t.shape[0] if t is not None else 0))
        upper = np.triu(np.ones((size, size), dtype=bool), 1)
        t = np.where(upper, np.uint8(MASKED), np.uint8(EMPTY if name == "idle" else 255))
        _templates[name] = t
    return t


def rows_of(trace: StepTrace) -> tuple[int, int]:
    """The query rows a step's matrix frames: the positions computed, and at a speculative round's first step
    the drafted rows its forward verified too (they stand past the sequence: the rejected ones are gone after)."""
    slots = trace.spec_slots
    return trace.pos_start, trace.pos_stop if slots is None else slots[2]


def _spec_kinds(trace: StepTrace, kinds: np.ndarray) -> np.ndarray:
    """A speculative step's cells over the chapter's (`kinds`, pos_stop x pos_stop), as kvviz.records.tentative
    says them (the page draws the same): at a round's first step the drafted rows, each in its verdict's colour
    where it met its round's new keys, the rows written over rejected slots marked on the diagonal; at a later
    step of the round its accepted row's own cell."""
    cells = tentative(trace)
    if cells is None:
        return kinds
    if cells.accepted_rows is not None:
        a, b = cells.accepted_rows
        kinds[a:b][kinds[a:b] == COMPUTED] = ACCEPTED  # its row came from the round's forward, not this step
        return kinds
    b = trace.pos_stop
    out = np.full((cells.size, cells.size), MASKED, dtype=np.uint8)
    out[:b, :b] = kinds
    for row, k0, k1, kind in cells.runs:
        out[row, k0:k1] = KIND_NAMES.index(kind)
    return out


def classify(trace: StepTrace, prev_stop: int) -> np.ndarray:
    """uint8 [n, n] kinds of the cells at this step, n = positions in the sequence so far.

    Rows are query positions, columns key positions. A row computed this step (pos_start..pos_stop-1)
    shows, where the mask lets it attend: keys read from the cache (left of pos_start), keys computed
    again though an earlier step had computed them (below prev_stop), and keys computed for the first
    time. Rows not computed this step are EMPTY below the diagonal and MASKED above it.
    `prev_stop` is the end of the positions any earlier step computed (0 at prefill).
    """
    a, b = trace.pos_start, trace.pos_stop
    n = b
    kinds = np.empty((n, n), dtype=np.uint8)
    kinds[:a] = _template("idle", n)[:a, :n]
    # Per key column: where its K/V came from this step.
    col_kind = np.full(n, COMPUTED, dtype=np.uint8)
    col_kind[:a] = CACHED
    col_kind[a:min(prev_stop, n)] = RECOMPUTED
    spec = trace.mask_spec
    if spec is None or ((spec.q_len, spec.kv_len, spec.past_len) == (b - a, n, a) and not spec.bounded):
        # The chapter's causal mask, offset by pos_start: every kind is >= CACHED > MASKED, so one
        # elementwise minimum against the cached pattern masks the future (fast at 2048 tokens).
        np.minimum(col_kind[None, :], _template("cap", n)[a:b, :n], out=kinds[a:b])
    else:
        mask = trace.mask
        if mask.shape != (b - a, n):
            raise ValueError(f"{trace.engine} step {trace.step}: mask {mask.shape} does not cover "
                             f"positions {a}..{b}")
        np.copyto(kinds[a:b], np.where(mask, col_kind[None, :], np.uint8(MASKED)))
        gone = trace.evicted
        kinds[a:b, gone[gone < a]] = EVICTED  # the causal mask allowed them; the cache had dropped them
    return kinds if trace.spec_index is None else _spec_kinds(trace, kinds)


def last_row_kinds(trace: StepTrace, prev_stop: int) -> np.ndarray:
    """uint8 [n]: classify(trace, prev_stop)[-1], the last row computed at this step, worked out
    alone (a row of a million positions costs a million cells, not a million squared)."""
    if trace.spec_index is not None:  # a speculative round: its few drafted rows past the sequence
        return classify(trace, prev_stop)[-1]
    a, n = trace.pos_start, trace.pos_stop
    row = np.full(n, COMPUTED, dtype=np.uint8)
    row[:a] = CACHED
    row[a:min(prev_stop, n)] = RECOMPUTED
    spec = trace.mask_spec
    if spec is None or ((spec.q_len, spec.kv_len, spec.past_len) == (n - a, n, a) and not spec.bounded):
        return row  # causal: the last row sees every key
    mask = trace.mask
    row = np.where(mask[-1], row, np.uint8(MASKED))
    gone = trace.evicted
    row[gone[gone < a]] = EVICTED
    return row


def pool_max(kinds: np.ndarray, factor: int) -> np.ndarray:
    """Shrink by `factor` keeping the highest kind of each block (so a single new row stays visible)."""
    if factor <= 1:
        return kinds
    return pool_blocks(kinds, factor, np.maximum, 0)


def pooled_kinds(trace: StepTrace, prev_stop: int, factor: int) -> np.ndarray | None:
    """pool_max(classify(trace, prev_stop), factor) worked out per block, without the [n, n] matrix,
    for the chapter's causal mask (None for another mask: classify and pool it then).

    Rows above pos_start are idle: EMPTY, MASKED where a block reaches above the diagonal. Computed
    rows see col_kind[j] where j <= i, and col_kind never decreases along j (CACHED, RECOMPUTED,
    then COMPUTED), so a block's highest kind is col_kind at its last column a computed row sees.
    """
    a, b = trace.pos_start, trace.pos_stop
    n = b
    spec = trace.mask_spec
    if trace.spec_index is not None or not (
            spec is None or ((spec.q_len, spec.kv_len, spec.past_len) == (b - a, n, a) and not spec.bounded)):
        return None
    m = -(-n // factor)
    first = np.arange(m) * factor  # each block's first row / column
    last = np.minimum(first + factor, n) - 1  # ... and last one inside the sequence
    col_kind = np.full(n, COMPUTED, dtype=np.uint8)
    col_kind[:a] = CACHED
    col_kind[a:min(prev_stop, n)] = RECOMPUTED
    above = last[None, :] > first[:, None]  # the block holds a cell right of the diagonal
    idle = np.where(above, np.uint8(MASKED), np.uint8(EMPTY))
    idle[first >= a] = EMPTY  # no idle row in the block: 0, as pool_max's padding
    row_last = np.minimum(first + factor, b) - 1  # the last computed row of each block row
    active = np.maximum(first, a) <= row_last
    seen = np.minimum(last[None, :], row_last[:, None])  # the last key the block's rows may see
    work = np.where(first[None, :] <= row_last[:, None], col_kind[np.clip(seen, 0, n - 1)], np.uint8(MASKED))
    work[~active] = EMPTY
    return np.maximum(idle, work)


class _EngineView:
    """One engine's plot: a single ImageItem fed with setImage, token ticks, the prompt boundary."""

    def __init__(self, plot: pg.PlotItem) -> None:
        self.plot = plot
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setLookupTable(_LUT)
        plot.addItem(self.image)
        pen = pg.mkPen("#606060", width=1, style=Qt.PenStyle.DotLine)
        self.prompt_v = pg.InfiniteLine(angle=90, pen=pen)
        self.prompt_h = pg.InfiniteLine(angle=0, pen=pen)
        for line in (self.prompt_v, self.prompt_h):
            line.setZValue(10)
            plot.addItem(line, ignoreBounds=True)
        # The rows computed this step, framed: at 2048 tokens one row is thinner than a pixel.
        self.outline = QGraphicsRectItem()
        self.outline.setPen(pg.mkPen(style.STEP_OUTLINE, width=OUTLINE_PX, cosmetic=True))
        self.outline.setZValue(20)
        plot.addItem(self.outline, ignoreBounds=True)
        # The rows computed this step at a readable height however long the run (STEP_ROW_PX): a copy
        # of the last of them, drawn over the matrix where one row is thinner than that on screen.
        self.row_image = pg.ImageItem(axisOrder="row-major")
        self.row_image.setLookupTable(_LUT)
        self.row_image.setZValue(15)
        self.row_image.hide()
        plot.addItem(self.row_image, ignoreBounds=True)
        self.row_label = pg.TextItem(color=style.STEP_OUTLINE, anchor=(1, 1))
        self.row_label.setFont(style.tick_font())
        self.row_label.setZValue(21)
        plot.addItem(self.row_label, ignoreBounds=True)
        self.outer = (True, True)  # whether its bottom / left axis is on the grid's edge (see _relayout)
        self.reset()

    def reset(self) -> None:
        """Forget the step drawn (a new run or a cleared panel); the plot and its items stay."""
        self.image.clear()
        self.row_image.clear()
        self.row_image.hide()
        self.row_data: np.ndarray | None = None  # the step's row as row_image shows it
        self._kinds = np.zeros((0, 0), dtype=np.uint8)
        self._kinds_for: tuple | None = None
        self.step: tuple[StepTrace, int] | None = None  # (trace, prev_stop) drawn; kinds made on demand
        self.labels: list[str] = []
        self.n_prompt = 0
        self.factor = 1
        self.drawn: tuple = ()  # (trace id, prev_stop, factor) of the image shown
        self.extent = 0  # positions the image spans (a pooled image's padding included)

    @property
    def kinds(self) -> np.ndarray:
        """The full-resolution category matrix of the step drawn (made when first asked for)."""
        if self.step is None:
            return np.zeros((0, 0), dtype=np.uint8)
        if self._kinds_for is not self.step:
            self._kinds, self._kinds_for = classify(*self.step), self.step
        return self._kinds


class WorkMatrixPanel(Panel):
    key = "work_matrix"
    picks_steps = True  # a click on a query row shows the step that first computed it

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._canvas = canvas()
        self._legend = legend_row()
        self._shown: tuple[RunHistory, int] | None = None
        self._legend.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self._legend)
        layout.addWidget(self._canvas, 1)
        self._views: dict[str, _EngineView] = {}
        # Views of earlier runs, by engine: building a PlotItem with its axes and menus took ~20 ms
        # each, a stall at the start of every run; a run with the same engines reuses them.
        self._spare: dict[str, _EngineView] = {}
        self._cols = 0
        # One axis name for the whole grid of engines, as for shared axes: a name per plot overlapped
        # its neighbour's once the plots were shorter than the words.
        self._x_name = pg.LabelItem(color=style.PLOT_FOREGROUND, size=style.LABEL_SIZE)
        self._y_name = pg.LabelItem(color=style.PLOT_FOREGROUND, size=style.LABEL_SIZE, angle=-90)
        self._stops = TraceColumns(("pos_stop",))
        on_left_click(self._canvas.scene(), self._on_clicked)
        self._evicting = False  # a bounded cache (window, sinks) is in the run: its colour is in the legend
        self._speculating = False  # a speculative engine is in the run: its drafted slots' colours too
        self.retranslate()

    def retranslate(self) -> None:
        set_legend(self._legend, [
            (style.CELL_COLORS["computed"], self.tr("computed this step (new)")),
            (style.CELL_COLORS["cached"], self.tr("read from the cache")),
            (style.CELL_COLORS["recomputed"], self.tr("recomputed though unchanged")),
            (style.CELL_COLORS["masked"], self.tr("masked (future)")),
            *([(style.CELL_COLORS["evicted"], self.tr("evicted, never read again"))] if self._evicting else []),
            *([(SPEC_CELL_COLORS["accepted"], self.tr("drafted, accepted")),
               (SPEC_CELL_COLORS["stale"], self.tr("drafted, rejected: left in place")),
               (SPEC_CELL_COLORS["freed"], self.tr("drafted, rejected: freed")),
               (SPEC_CELL_COLORS["overwritten"], self.tr("written over a rejected slot"))]
              if self._speculating else []),
            (style.CELL_COLORS["empty"], self.tr("not computed this step")),
        ])
        self._x_name.setText(self.tr("key position"), size=style.LABEL_SIZE)
        self._y_name.setText(self.tr("query position"), size=style.LABEL_SIZE)
        for view in [*self._views.values(), *self._spare.values()]:
            view.row_label.setText(self.tr("this step \u25be"))
            view.drawn = ()
        self.setToolTip(self.help_text())
        if self._shown is not None:
            self.show_step(*self._shown)  # the plot titles

    def _on_clicked(self, scene_pos) -> None:
        if self._shown is None:
            return
        for engine, view in self._views.items():
            point = view_point(view.plot, scene_pos)
            if point is not None:
                step = step_of_position(self._shown[0], engine, math.floor(point.y()))  # the query row
                if step is not None:
                    self.step_picked.emit(step)
                return

    def _prev_stop(self, history: RunHistory, engine: str, k: int) -> int:
        """The end of the positions any step before k computed (0 at prefill)."""
        stops = self._stops.values(history, engine, "pos_stop")
        return int(stops[:k].max(initial=0))

    priority = 10

    def readable_plot(self) -> tuple[int, int]:
        return style.readable(style.READABLE_MATRIX)

    def plot_grid(self) -> tuple[int, int]:
        """The squarest grid of the engines' views (what a cell of readable size gets; a wide, short
        cell lays them in one row, which needs less height): fixed by the count, so the size the grid
        asks for does not follow the shape it last gave."""
        n = len(self._views) or 1
        cols = math.ceil(math.sqrt(n))
        return cols, math.ceil(n / cols)

    def title(self) -> str:
        return self.tr("Work matrix")

    def help_text(self) -> str:
        return self.tr(
            "Rows are query positions, columns key positions; each cell shows what happened at the "
            "selected step. Naive recomputes every row's K/V each step although they never change "
            "(red); a cache computes one new row (gold) and reads the other keys from memory (blue). "
            "The scores of the new row against every key are still computed: the cache saves the K/V "
            "projections, not the attention itself. The frame marks the rows computed at this step; "
            "dotted lines mark the end of the prompt.")

    # -- data ---------------------------------------------------------------------------------
    def cell_kinds(self, engine: str) -> np.ndarray:
        """The category matrix last drawn for `engine` (full resolution), codes EMPTY..COMPUTED."""
        view = self._views.get(engine)
        return view.kinds.copy() if view else np.zeros((0, 0), dtype=np.uint8)

    def worked_rows(self, engine: str) -> np.ndarray:
        """Bool per query row: did this step compute anything in it (new, cached read or recomputed)."""
        kinds = self.cell_kinds(engine)
        return ((kinds == COMPUTED) | (kinds == CACHED) | (kinds == RECOMPUTED)).any(axis=1)

    # -- drawing ------------------------------------------------------------------------------
    def clear(self) -> None:
        # The plots stay laid out, transparent: a run with the same engines shows them again, where
        # laying out four plots afresh took ~40 ms of the run's first draw (hidden ones, too: a
        # layout skips hidden items, so showing them laid all four out again).
        for view in self._views.values():
            view.reset()
            view.plot.setOpacity(0.0)
        self._stops.clear()
        self._shown = None

    def _ensure_views(self, engines: tuple[str, ...]) -> None:
        if tuple(self._views) != engines:
            self._canvas.ci.clear()
            for engine, view in self._views.items():
                view.reset()
                view.plot.setOpacity(1.0)
                self._spare[engine] = view
            self._views = {engine: self._spare.pop(engine, None) or self._new_view() for engine in engines}
            self._relayout(force=True)
        for view in self._views.values():
            if view.plot.opacity() < 1.0:
                view.plot.setOpacity(1.0)

    def warm_up(self, engines: tuple[str, ...], positions: int = 0) -> bool:
        """Build one engine's plot ahead of its first run (~13 ms each here); then lay out the
        plots of a run of all of them (the form's default), transparent until that run draws."""
        for engine in engines:
            if engine not in self._views and engine not in self._spare:
                self._spare[engine] = self._new_view()
                return True
        if not self._views and self._shown is None:
            self._ensure_views(engines)
            for order, (engine, view) in enumerate(self._views.items()):
                # Titles of a run's height, and axes as wide as a long run's positions need (pyqtgraph
                # narrows an axis only for labels 10 px narrower): the first real draw then lays
                # nothing out again.
                self._title(view, engine, order, "&nbsp;")
                top = max(positions, 1)
                fit_matrix(view.plot, top, top)  # each draw fits the view to its own matrix again
            settle(scenes_in(self))
            self.clear()
        return False

    def _new_view(self) -> _EngineView:
        plot = pg.PlotItem(enableMenu=False)
        plot.hideButtons()
        plot.invertY(True)
        # Not aspect-locked: the grid of engines fills the panel and the axes start at 0. The range is
        # the drawn matrix's, set at every draw (see _draw_image).
        matrix_plot(plot)
        style.style_plot(plot)  # unnamed axes: the panel names them once for the grid (see _relayout)
        plot.showGrid(x=False, y=False)
        view = _EngineView(plot)
        view.row_label.setText(self.tr("this step \u25be"))
        title_row_fits(plot, view.outline)  # the title's lines, then the frame's pen, then the matrix
        plot.getViewBox().sigResized.connect(lambda *_a, v=view: self._on_resized(v))
        plot.getViewBox().sigRangeChanged.connect(lambda *_a, v=view: self._update_ticks(v))
        return view

    def _relayout(self, force: bool = False) -> None:
        """Arrange the engines' plots in the grid that gives each square matrix the most room."""
        n = len(self._views)
        if not n:
            return
        w, h = max(1, self._canvas.width()), max(1, self._canvas.height())
        cols = max(range(1, n + 1), key=lambda c: (min(w / c, h / math.ceil(n / c)), -c))
        # Each row of views takes a two-line title and the grid an axis of numbers: where that leaves the
        # squarest grid's matrices below their readable size and another grid's not, that one (at 150%
        # on 1280x720 a 2x2 grid left 129 px where a row of four left 296).
        title, axis = style.px(36), style.px(44)

        def matrix_px(c: int) -> float:
            return min((w - axis) / c, (h - axis) / math.ceil(n / c) - title)

        best = max(range(1, n + 1), key=lambda c: (matrix_px(c), -c))
        if matrix_px(cols) < self.readable_plot()[1] <= matrix_px(best):
            cols = best
        if cols == self._cols and not force:
            return
        old, self._cols = self._cols, cols
        layout = self._canvas.ci
        for item in [*(v.plot for v in self._views.values()), self._x_name, self._y_name]:
            if item in layout.items:
                layout.removeItem(item)
        rows = math.ceil(n / cols)
        layout.addItem(self._y_name, row=0, col=0, rowspan=rows, colspan=1)
        for i, view in enumerate(self._views.values()):
            row, col = divmod(i, cols)
            layout.addItem(view.plot, row=row, col=col + 1)
            # Positions numbered on the outer plots only, as for shared axes: more room for the matrices.
            view.outer = (row == rows - 1 or i + cols >= n, col == 0)  # (bottom, left)
            self._update_ticks(view)
        layout.addItem(self._x_name, row=rows, col=1, rowspan=1, colspan=cols)
        grid = layout.layout
        for col in range(1, max(cols, old, grid.columnCount()) + 1):
            # Equal matrices, however wide each plot's axis is (a plot's own preferred width would
            # give the one with numbers the wider matrix); columns a smaller grid leaves empty: none.
            # An empty column keeps the width it was given (columnCount counts only those holding
            # items): a 1x4 grid's fourth column, left at 1000, took a third of a later 2x2 grid's width.
            grid.setColumnPreferredWidth(col, 1000 if col <= cols else 0)
        for row in range(max(rows + 1, grid.rowCount())):
            # Equal matrices down the grid too: the titled top row and the bottom row with its axis had
            # shared the height unevenly (336 and 204 px in one panel), the short one setting the need.
            grid.setRowPreferredHeight(row, 1000 if row < rows else 0)
            grid.setRowStretchFactor(row, 1 if row < rows else 0)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._relayout()

    def show_step(self, history: RunHistory, step: int) -> None:
        engines = tuple(e for e in history.engines if history.traces.get(e))
        if not engines:
            self.clear()
            return
        self._ensure_views(engines)
        evicting = any(t.held is not None for e in engines for t in history.traces[e][-1:])
        speculating = any(history.traces[e][0].spec_k is not None for e in engines)
        if (evicting, speculating) != (self._evicting, self._speculating):
            self._evicting, self._speculating = evicting, speculating
            self.retranslate()
        self._shown = (history, step)
        n_prompt = len(history.info.prompt_ids)
        for order, engine in enumerate(engines):
            view = self._views[engine]
            k = engine_step(history, engine, step)
            traces = history.traces[engine]
            trace = traces[k]
            prev_stop = self._prev_stop(history, engine, k)
            if view.step is None or view.step[0] is not trace or view.step[1] != prev_stop:
                view.step = (trace, prev_stop)
            view.n_prompt = n_prompt
            # Token labels only where a cell could hold one on screen: a million labels made per draw
            # had cost seconds for numbers that are all the axis shows.
            rows = rows_of(trace)[1]  # past pos_stop: a speculative round's drafted rows
            view.labels = sequence_labels(history, engine, rows) if rows <= LABELLED_MAX else rows
            self._draw_image(view)
            self._emphasise_step(view)
            self._place_label(view)
            self._set_title(view, engine, order, trace, prev_stop)
            for line in (view.prompt_v, view.prompt_h):
                line.setPos(n_prompt)
                line.setVisible(0 < n_prompt < trace.pos_stop)
            self._update_ticks(view)

    @staticmethod
    def _emphasise_step(view: _EngineView) -> None:
        """Frame the rows computed at this step; where they are thinner than STEP_ROW_PX on screen (a
        decode step's one row of thousands), draw the last of them that tall, over the matrix, so
        the keys it read from the cache (and those a window evicted) show at projector size."""
        trace, prev_stop = view.step
        a, b = rows_of(trace)
        vb = view.plot.getViewBox()
        per_px = max(view.extent, 1) / max(vb.height(), 1.0)  # positions per screen pixel
        tall = style.px(STEP_ROW_PX) * per_px
        if (b - a) >= tall or b == 0:
            view.row_image.hide()
            view.outline.setRect(QRectF(0, a, b, b - a))
            return
        top = max(0.0, b - tall)
        row = last_row_kinds(trace, prev_stop)
        factor = max(1, view.factor)
        if factor > 1:
            padded = np.zeros(-(-len(row) // factor) * factor, dtype=np.uint8)
            padded[:len(row)] = row
            row = padded.reshape(-1, factor).max(axis=1)  # max-pooled as the matrix is
        if view.row_data is None or not np.array_equal(row, view.row_data):
            view.row_data = row
            view.row_image.setImage(row[None, :], autoLevels=False, levels=None, lut=_LUT)
        view.row_image.setRect(QRectF(0, top, len(row) * factor, b - top))
        view.row_image.show()
        view.outline.setRect(QRectF(0, top, b, b - top))

    @staticmethod
    def _place_label(view: _EngineView) -> None:
        """Name the frame when the rows it holds are too thin to see (long sequences), where the
        label fits beside it: in a narrow view its right-aligned text was cut, and in a short one (a
        2x2 grid at 1280x720) it covered half the matrix it names a row of."""
        a, b = rows_of(view.step[0])
        vb, label = view.plot.getViewBox(), view.row_label.boundingRect()
        rows_px = (b - a) * vb.height() / max(b, 1)
        view.row_label.setPos(b, a)
        fits = label.width() < vb.width() and label.height() <= vb.height() / 3
        view.row_label.setVisible(rows_px < 6 and fits)

    @staticmethod
    def _pool_factor(view: _EngineView) -> int:
        """Cells per screen pixel, rounded up (the image never holds more rows than the view has
        pixels); 0 where cells are big enough on screen to be drawn as tiles with a gap between."""
        vb = view.plot.getViewBox()
        n = rows_of(view.step[0])[1] if view.step is not None else 0
        px = max(64, int(min(vb.width(), vb.height())))
        if n <= _GRID_MAX and px / max(n, 1) >= _TILE:
            return 0
        return max(1, math.ceil(n / px))

    def _draw_image(self, view: _EngineView) -> None:
        trace, prev_stop = view.step
        factor = view.factor = self._pool_factor(view)
        drawn = (id(trace), prev_stop, factor)
        if drawn != view.drawn:
            view.drawn = drawn
            view.extent = self._set_image(view, trace, prev_stop, factor)
        # The view shows the matrix drawn, whatever range it held (the warm-up's longest run, the
        # last run's): left to auto-range, the warm-up's range stayed and a run became a thumbnail.
        fit_matrix(view.plot, view.extent, view.extent)

    @staticmethod
    def _set_image(view: _EngineView, trace: StepTrace, prev_stop: int, factor: int) -> int:
        """Give the view's image the step's cells; returns the positions it spans."""
        n = rows_of(trace)[1]
        extent = n
        pooled = pooled_kinds(trace, prev_stop, factor) if factor > 1 else None
        if pooled is not None:
            shown = pooled
            extent = shown.shape[0] * factor
        elif factor == 0:
            shown = np.repeat(np.repeat(view.kinds, _TILE, axis=0), _TILE, axis=1)
            shown[_TILE - 1::_TILE, :] = _GAP
            shown[:, _TILE - 1::_TILE] = _GAP
        else:
            shown = pool_max(view.kinds, factor)
            extent = shown.shape[0] * factor  # the padding pool_max added stays outside the sequence
        view.image.setImage(shown, autoLevels=False, levels=None, lut=_LUT)
        view.image.setRect(0, 0, extent, extent)
        return extent

    def _set_title(self, view: _EngineView, engine: str, order: int, trace: StepTrace, prev_stop: int) -> None:
        # Short: four of these share a small panel, and a title sets its plot's minimum width.
        self._title(view, engine, order, said_text(matrix_detail(trace, prev_stop)))

    @classmethod
    def _title(cls, view: _EngineView, engine: str, order: int, detail: str) -> None:
        style.engine_title(view.plot, engine, order, detail)
        fit_title_row(view.plot, frame_gap(view.outline))

    def _update_ticks(self, view: _EngineView) -> None:
        """Ticks on the view and on each view of the grid that shows the same range, all chosen by the
        smallest cell among them: matrices of one size get the same ticks (columns of a grid may differ by a
        pixel, which at a spacing's threshold numbers one matrix every 20 positions and the next every 50)."""
        group = [view]
        if any(v is view for v in self._views.values()):
            shown = view.plot.getViewBox().viewRange()
            group = [v for v in self._views.values() if v.plot.getViewBox().viewRange() == shown]
        cells = [cell_px(v.plot) for v in group if v.plot.getViewBox().width() > 1]
        cell = (min(w for w, _h in cells), min(h for _w, h in cells)) if cells else None
        for v in group:
            set_token_ticks(v.plot, v.labels, v.outer, cell)

    def _on_resized(self, view: _EngineView) -> None:
        self._update_ticks(view)
        if view.step is not None:
            if self._pool_factor(view) != view.factor:
                self._draw_image(view)
            self._emphasise_step(view)
            self._place_label(view)

    def export_items(self) -> list:
        return [v.plot for v in self._views.values()]
