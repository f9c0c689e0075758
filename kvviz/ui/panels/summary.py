"""Summary table: per engine totals up to the selected step, from RunSummary.from_traces.

Time next to the work it cost (K/V projections, bytes moved), so the lesson survives a tiny model
whose wall time is mostly Python overhead; and the memory wall (kvviz.costs.wall): the bytes the steps had to
read, over their time, against the machine's read ceiling, from RunInfo's figures (blank without them).
"""
from __future__ import annotations

import html
import math
from dataclasses import replace

from PySide6.QtCore import QCoreApplication, QEvent, QSize, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QLayout,
    QStyledItemDelegate,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from kvviz import catalog
from kvviz.costs.wall import WallShape, achieved_gbps
from kvviz.kernels import baselines, compared_kernels
from kvviz.page.said import Engine, said, text
from kvviz.page.said_compare import (
    COLUMNS,
    QUALITY_ROWS,
    ROW_NAMES,
    WALL_ROWS,
    cell_text,
    decode_note,
    kernel_note,
    row_units,
    spread_note,
    summary_heading,
    work_note,
)
from kvviz.records.repeats import spread
from kvviz.records.trace import RunSummary, StepTrace, speedup
from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.narration import kernel_label, kernels_ran
from kvviz.ui.panels._plots import engine_step
from kvviz.ui.panels._shown import shown_engines
from kvviz.ui.panels.base import Panel, said_text

# The rows, COLUMNS (kvviz.page.said_compare, which the page says them with): keys (stable, used by table_values)
# and, where the best value is tinted, whether a larger value is better. Byte rows and the memory wall's get no
# "best": naive's 0 B is no win (it pays in compute), and naive reads most so reaches the highest rate, at no gain.

# The best figure of a row is tinted (bold had widened each column by ~4 pixels, past a narrow panel).
_BEST = QBrush(QColor("#cfe8c8"))
_NO_TINT = QBrush()


class _ReadTotals:
    """Per engine, the bytes its steps 0..k read, summed (kvviz.costs.wall.bytes_read of the first k+1 steps),
    kept as running sums: summed anew on every draw, a 2,000-step run of four engines cost ~30 ms a frame.
    The trace lists only grow; a new run brings new lists."""

    def __init__(self) -> None:
        self._sums: dict[str, tuple[list[StepTrace], WallShape, list[int]]] = {}

    def upto(self, wall: WallShape, engine: str, traces: list[StepTrace], step: int) -> int:
        kept = self._sums.get(engine)
        if kept is None or kept[0] is not traces or kept[1] != wall:
            kept = (traces, wall, [])
            self._sums[engine] = kept
        sums = kept[2]
        for trace in traces[len(sums): step + 1]:
            sums.append((sums[-1] if sums else 0) + wall.read(trace).total_bytes)
        return sums[step]

    def clear(self) -> None:
        self._sums.clear()


class _TightDelegate(QStyledItemDelegate):
    """Cells as wide as their figure, its margins and the grid line (the style's own hint took ~4 more)."""

    def sizeHint(self, option, index) -> QSize:  # noqa: N802 (Qt override)
        hint = super().sizeHint(option, index)
        font = index.data(Qt.ItemDataRole.FontRole) or option.font
        return QSize(QFontMetrics(font).horizontalAdvance(index.data() or "") + 9, hint.height())  # margins, grid


TABLE_POINTS = 9.0  # the table's type size where it fits; smaller, down to MIN_POINTS, where it does not
MIN_POINTS = 7.0
ONE_LINE_POINTS = 8.0


def _sizes() -> list[tuple[bool, float]]:
    """(names on two lines, type size) to try, largest first, at the panels' zoom."""
    top, one_line, least = (style.ZOOM * p for p in (TABLE_POINTS, ONE_LINE_POINTS, MIN_POINTS))
    return ([(False, top - 0.5 * i) for i in range(int((top - one_line) * 2) + 1)]
            + [(True, top - 0.5 * i) for i in range(int((top - least) * 2) + 1)])


class SummaryPanel(Panel):
    key = "summary"
    _ceiling: str | None = None  # RunInfo.ceiling_kind() of the run shown: names the share's row
    narration_shown = True  # a narration beside the panel tells the rows set aside (False: a lesson's slide)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._units: dict[str, tuple[str, float]] = {}  # row key -> (unit, its size) where the row has one
        self._two_lines = False  # the units under the rows' names (a narrow panel)
        self._heading = QLabel()
        self._heading.setStyleSheet(f"color: {style.PLOT_FOREGROUND}; font-weight: bold")
        self._heading.setWordWrap(True)  # "Totals over steps 0-5 (6 new tokens)" is wider than a narrow panel
        # Metrics down, engines across: fits a narrow panel and reads as a comparison per metric.
        self._table = QTableWidget(len(COLUMNS), 0)
        self._table.setVerticalHeaderLabels(self._headers())
        self._table.setItemDelegate(_TightDelegate(self._table))
        self._table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self._table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self._table.setAlternatingRowColors(True)
        self._table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self._points = TABLE_POINTS * style.ZOOM
        self._set_points(self._points)
        # Columns as wide as their figures (a narrow panel scrolls rather than wrapping "10.1 ms").
        self._table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self._table.setWordWrap(False)
        self._table.horizontalHeader().setDefaultAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self._table.horizontalHeader().setMinimumSectionSize(24)
        self._table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self._table.verticalHeader().setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        for i, tip in enumerate(self._header_tips()):
            self._table.verticalHeaderItem(i).setToolTip(tip)
        self._note = QLabel()
        self._note.setWordWrap(True)
        self._note.setTextFormat(Qt.TextFormat.RichText)
        layout = QVBoxLayout(self)
        # The panel's height is the grid's to give: a table taller than it sets rows aside (_fit) rather
        # than raising the panel's minimum (a lone panel had kept 333 px when asked for 256).
        layout.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self._heading)
        layout.addWidget(self._table)
        self._table.installEventFilter(self)
        # As tall as its rows (see _fit): a vertical scrollbar, shown while a fit settles, had
        # narrowed the view and brought a horizontal one with it.
        self._table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        layout.addWidget(self._note)
        layout.addStretch(1)
        self._values: dict[str, dict[str, float | int | None]] = {}
        self._shown: tuple[RunHistory, int] | None = None
        self._read = _ReadTotals()
        self._heading_text = ""  # the heading without the note of rows set aside
        self._wall_rows: tuple[str, ...] = ()  # the wall's rows with figures to show (WALL_ROWS, in order)
        self._aside_for: tuple | None = None  # the fit (room, type, rows) the wall's rows were last placed for
        self._sized_for: tuple | None = None  # the room and rows the type was last chosen for
        self._hide_run_rows()
        self.setToolTip(self.help_text())

    def retranslate(self) -> None:
        self._table.setVerticalHeaderLabels(self._headers())
        for i, tip in enumerate(self._header_tips()):
            self._table.verticalHeaderItem(i).setToolTip(tip)
        self.setToolTip(self.help_text())
        if self._shown is not None:
            self.show_step(*self._shown)  # the heading, figures with units and the note
        elif not self._table.columnCount():
            self._fit_empty()

    def _plain_names(self) -> list[str]:
        """The rows' names, in COLUMNS' order, without units (kvviz.page.said_compare's ROW_NAMES: the page's too)."""
        share = "of copy" if self._ceiling == "copy" else "of read ceiling"
        return [said_text(said("SummaryPanel", share if name is None else name)) for name in ROW_NAMES]

    def _headers(self) -> list[str]:
        """The rows' names, with the unit of a time or byte row: after it, or under it where the
        table is too narrow for both on one line."""
        names = self._plain_names()
        if self._two_lines:  # a word a line, or more where they are no wider than the longest word
            # (a three-line "read\nrate\n(GB/s)" had left a 1500x920 window's panel no room for the next)
            metrics = QFontMetrics(self._table.verticalHeader().font())
            widest = max(metrics.horizontalAdvance(word) for name in names for word in name.split())
            names = [_wrap(name, widest, metrics) for name in names]

        def with_unit(name: str, unit: str) -> str:
            if self._two_lines:
                return self.tr("{name}\n({unit})").format(name=name, unit=unit)
            return said_text(said("SummaryPanel", "{name} ({unit})", name=name, unit=unit))  # the page's too
        return [with_unit(name, self._units[key][0]) if key in self._units
                else name for name, (key, _higher) in zip(names, COLUMNS)]

    def _set_headers(self) -> None:
        labels = self._headers()
        if [self._table.verticalHeaderItem(r).text() for r in range(len(labels))] != labels:
            self._table.setVerticalHeaderLabels(labels)
            for i, tip in enumerate(self._header_tips()):
                self._table.verticalHeaderItem(i).setToolTip(tip)

    def _header_tips(self) -> list[str]:
        return [
            self.tr("Sum of step latencies (forward, cache update and sampling)"),
            self.tr("New tokens per second of summed step time"),
            self.tr("Speedup vs naive: naive's total time divided by this engine's"),
            self.tr("K/V projections, token x layer: naive recomputes the whole sequence every step"),
            self.tr("Bytes copied: existing cache content moved to a new place (the concat cache's torch.cat)"),
            self.tr("Bytes written: new K/V stored"),
            self.tr("Bytes gathered: copies made only to feed attention (the paged gather)"),
            self.tr("Largest resident K/V memory"),
            self.tr("Bytes read: the weights and the K/V every step must read from memory (each weight once, "
                    "the K/V of every position it attends over, at the run's dtype), summed over the steps"),
            self.tr("Bytes read over the summed step time, in GB/s (10^9 B/s): the memory bandwidth the engine "
                    "achieved"),
            self.tr("The read rate as a share of this machine's measured read ceiling (shown in the status "
                    "bar; a trace saved before it was measured: the copy bandwidth): how close decode runs to "
                    "the memory wall"),
            self.tr("Mean KL divergence (nats) of the next-token distribution from the exact engine's, "
                    "teacher-forced on its tokens: 0 for an exact cache"),
            self.tr("Share of steps whose most likely token is the exact engine's (teacher-forced)"),
        ]

    priority = 15

    def readable_size(self) -> tuple[int, int]:
        """Every row the run has figures for, at the table's full type on one line, and the heading."""
        font = QFont(self._table.font())
        font.setPointSizeF(TABLE_POINTS * style.ZOOM)
        metrics = QFontMetrics(font)
        hidden_aside = [key for key in self._wall_rows if self._table.isRowHidden(COLUMNS.index((key, None)))]
        rows = sum(not self._table.isRowHidden(r) for r in range(len(COLUMNS))) + len(hidden_aside)
        line = metrics.height() + 6  # a row: its text and the delegate's margins
        names = max(metrics.horizontalAdvance(name) for name in self._headers()) + 12
        engines = max(1, self._table.columnCount())
        figure = metrics.horizontalAdvance("0000.00") + 12
        heading = metrics.height() + 8
        return names + engines * figure + 8, heading + line * (rows + 1) + 12

    def apply_zoom(self) -> None:
        self._sized_for = self._aside_for = None
        self._set_size(False, TABLE_POINTS * style.ZOOM)
        self.retranslate()

    def title(self) -> str:
        return self.tr("Summary")

    def help_text(self) -> str:
        return self.tr(
            "Totals up to the selected step. Time alone can mislead on a tiny model, where Python "
            "overhead dominates each step; the work columns show what the cache saves: K/V projections "
            "(O(n\u00b2) for naive, one per token for a cache) and bytes copied (O(n\u00b2) for the "
            "chapter's torch.cat cache, none for static and paged). The memory wall: the bytes the steps "
            "had to read (every weight, and the K/V each attends over), those bytes over their time, and that "
            "rate against this machine's read ceiling; in a panel too short for them these rows step aside "
            "(the narration still tells them).")

    def table_values(self) -> dict[str, dict[str, float | int | None]]:
        """Per engine, per column key (see COLUMNS): the raw figures shown."""
        return {e: dict(v) for e, v in self._values.items()}

    def clear(self) -> None:
        self._table.setColumnCount(0)
        self._values.clear()
        self._read.clear()
        self._wall_rows = ()
        self._aside_for = self._sized_for = None
        self._units = {}
        self._table.setVerticalHeaderLabels(self._headers())
        self._hide_run_rows()
        self._heading.setText("")
        self._heading_text = ""
        self._note.setText("")
        self._shown = None
        self._fit_empty()

    def _hide_run_rows(self) -> None:
        """No run, no figures: the rows a run may or may not bring (the wall's, the quality ones) wait for
        one. An empty table had shown them all, the last cut in half at 1500x920."""
        for row, (key, _higher) in enumerate(COLUMNS):
            if key in WALL_ROWS or key in QUALITY_ROWS:
                self._table.setRowHidden(row, True)

    def show_step(self, history: RunHistory, step: int) -> None:
        engines = shown_engines(self, history, step)
        if not engines:
            return
        summaries = {e: RunSummary.from_traces(history.upto(e, engine_step(history, e, step))) for e in engines}
        spreads = {}
        if history.repeat > 1:  # a repeated comparison: each engine's median total of the runs, as the bench gives
            spreads = {e: spread(history.totals(e, engine_step(history, e, step))) for e in engines}
            summaries = {e: replace(s, total_ms=spreads[e].median_ms) for e, s in summaries.items()}
        against = baselines(engines)
        wall = history.info.wall()  # None for a trace saved before the wall figures: those rows blank
        copy = history.info.bandwidth_gbps()  # the read ceiling, or an older trace's copy figure
        self._ceiling = history.info.ceiling_kind()
        self._values = {}
        for engine, s in summaries.items():
            read = gbps = share = None
            if wall is not None:
                read = self._read.upto(wall, engine, history.traces[engine], engine_step(history, engine, step))
                gbps = achieved_gbps(read, s.total_ms)
                gbps = gbps if gbps < float("inf") else None  # NaN: no step time recorded
                share = gbps / copy if gbps is not None and copy is not None else None
            self._values[engine] = {
                "total_ms": s.total_ms,
                "tokens_per_s": s.tokens_per_s,
                "speedup_vs_naive": speedup(s, summaries.get(against.get(engine, ""))),
                "kv_projections": s.kv_projections,
                "bytes_copied": s.bytes_copied,
                "bytes_written": s.bytes_written,
                "bytes_gathered": s.bytes_gathered,
                "peak_cache_bytes": s.peak_cache_bytes,
                "bytes_read": read,
                "read_gbps": gbps,
                "copy_share": share,
                "mean_kl": 0.0 if catalog.is_exact(engine) else s.mean_kl,
                "top1_agreement": 1.0 if catalog.is_exact(engine) else s.top1_agreement,
            }
        shown = min(step, history.n_steps() - 1)
        kernels = kernels_ran(history.info, engines)
        compared = compared_kernels(engines)  # a kernel comparison: the lanes name their kernels, the title the two
        self._heading_text = said_text(summary_heading(shown, history.repeat if spreads else None, compared, kernels))
        self._heading.setText(self._heading_text + self._aside_text())
        approximate = catalog.any_approximate(engines)  # the quality rows only where they tell something
        for row, (key, _higher) in enumerate(COLUMNS):
            if key in QUALITY_ROWS and self._table.isRowHidden(row) == approximate:
                self._table.setRowHidden(row, not approximate)
        # The wall's rows where the run recorded its figures (the share where it recorded the machine's
        # copy bandwidth too); _fit sets them aside in a panel too short for them.
        self._wall_rows = () if wall is None else WALL_ROWS if copy is not None else WALL_ROWS[:2]
        self._units = row_units(self._values)
        self._set_headers()
        row = COLUMNS.index(("speedup_vs_naive", True))
        self._table.verticalHeaderItem(row).setToolTip(self.tr(
            "Speedup vs {kernel}: the same engine's total time under {kernel} divided by this lane's").format(
            kernel=kernel_label(compared[0])) if compared else self._header_tips()[row])
        named = _named(engines)
        decode = {e: _decode_ms(history, e, step) for e in engines}
        notes = (spread_note(spreads, named), work_note({e: s.kv_projections for e, s in summaries.items()}),
                 decode_note(decode, {e: history.traces[e][0].latency_ms for e in engines}, named, compared),
                 kernel_note(kernels, compared))
        self._note.setText("<br>".join(n for n in map(_rich, notes) if n))
        self._fill(engines)

    def _fill(self, engines: list[str]) -> None:
        table = self._table
        # Sections fitted to their contents once, after the cells are set: fitted on every setText,
        # the 32 cells of four engines took ~11 ms a draw (0.34 ms a cell).
        hh, vh = table.horizontalHeader(), table.verticalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        vh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        table.setColumnCount(len(engines))
        # a lane's engine over its kernel: a comparison's four columns then fit a 1280x720 window's panel
        table.setHorizontalHeaderLabels([style.engine_label(e).replace(" \u00b7 ", "\n") for e in engines])
        bold = self._font(True)
        plain = self._font(False)
        best: dict[str, float] = {}
        for key, higher in COLUMNS:
            if higher is None:
                continue
            values = [v[key] for v in self._values.values() if v[key] is not None and not _nan(v[key])]
            if len(values) > 1 and len(set(values)) > 1:
                best[key] = max(values) if higher else min(values)
        for col, engine in enumerate(engines):
            header = table.horizontalHeaderItem(col)
            header.setForeground(QBrush(QColor(style.engine_color(engine, col))))
            header.setFont(bold)
            for row, (key, _higher) in enumerate(COLUMNS):
                value = self._values[engine][key]
                item = table.item(row, col)
                if item is None:
                    item = QTableWidgetItem()
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                    table.setItem(row, col, item)
                text = cell_text(key, value, self._units.get(key))
                if item.text() != text:
                    item.setText(text)
                if item.font() != plain:
                    item.setFont(plain)
                tint = _BEST if key in best and value == best[key] else _NO_TINT
                if item.background() != tint:
                    item.setBackground(tint)
        vh.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self._fit()

    def _font(self, bold: bool) -> QFont:
        font = QFont(self._table.font())
        font.setBold(bold)
        return font

    def _set_points(self, points: float) -> None:
        """The table's type size, its cells' and engine names' fonts with it (an item's own font
        does not follow the table's)."""
        self._points = points
        font = self._table.font()
        font.setPointSizeF(points)
        self._table.setFont(font)
        self._table.verticalHeader().setFont(font)
        self._table.horizontalHeader().setFont(font)
        for col in range(self._table.columnCount()):
            header = self._table.horizontalHeaderItem(col)
            if header is not None:
                header.setFont(self._font(True))
            for row in range(self._table.rowCount()):
                item = self._table.item(row, col)
                if item is not None:
                    item.setFont(self._font(False))

    def _need(self) -> int:
        """The width the table takes with every column as wide as its figures."""
        table = self._table
        header = table.horizontalHeader()
        need = table.verticalHeader().sizeHint().width() + 2 * table.frameWidth()
        columns = range(table.columnCount())
        return need + sum(max(header.sectionSizeHint(c), table.sizeHintForColumn(c)) for c in columns)

    def _fit(self) -> None:
        """Columns share the width where the figures fit; where they do not, the type gets smaller
        (to MIN_POINTS) until they do, and only past that the columns keep their width and scroll.
        Smaller still where that brings the wall's rows into the panel's height (else they step aside:
        _place_wall_rows). The table is as tall as its rows so the note sits right under the figures."""
        table = self._table
        header = table.horizontalHeader()
        room = table.width()
        need = self._need()
        sized_for = (room, self._table_room(), table.columnCount(), self._wall_rows, self._other_rows())
        regrow = (self._points < TABLE_POINTS * style.ZOOM or self._two_lines) and need < 0.85 * room
        if self._wall_rows:  # a type made smaller for the height is kept until the room or the rows change
            regrow = regrow and sized_for != self._sized_for
        if need > room or regrow or self._wall_rows and sized_for != self._sized_for:
            self._sized_for = sized_for
            # The largest type that fits: on one line down to ONE_LINE_POINTS, then with the rows'
            # names and units a word a line, down to MIN_POINTS; the largest that fits the height with
            # the wall's rows too, where one does.
            width_fit = None
            sizes = _sizes()
            for size in sizes if self._units else [s for s in sizes if not s[0]]:
                if size != (self._two_lines, self._points):
                    self._set_size(*size)
                    need = self._need()
                if need <= room:
                    width_fit = width_fit or size
                    if self._tall_enough(sized_for[1]):
                        break
            else:
                if width_fit is not None and width_fit != (self._two_lines, self._points):
                    self._set_size(*width_fit)
                    need = self._need()
        fits = need <= room
        if fits:  # each column its figures' width and an equal share of the room left (Stretch gave
            # equal widths, and a wide column, naive's K/V count, was elided)
            header.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
            n = table.columnCount()
            widths = [max(header.sectionSizeHint(c), table.sizeHintForColumn(c)) for c in range(n)]
            spare = room - need  # need: these widths, the row names' and the frame
            for c, width in enumerate(widths):
                header.resizeSection(c, width + max(0, spare) // n + (1 if c < max(0, spare) % n else 0))
        else:
            header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        # Where the columns fit, no scrollbar: one shown while the row names' width settles would
        # cover the last row.
        table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff if fits
                                           else Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        # Rows fitted to the type now (left to the next layout pass, the last row would hide under
        # the note after the type changes).
        table.verticalHeader().resizeSections(QHeaderView.ResizeMode.ResizeToContents)
        height = self._place_wall_rows(self._rows_height())
        table.setFixedHeight(height + 2)
        self._fit_note(height + 2)

    def _set_size(self, two_lines: bool, points: float) -> None:
        if two_lines != self._two_lines:
            self._two_lines = two_lines
            self._set_headers()
        self._set_points(points)

    def _other_rows(self) -> tuple[bool, ...]:
        """Which rows besides the wall's are hidden (the quality rows come and go with the engines)."""
        return tuple(self._table.isRowHidden(r) for r, (key, _higher) in enumerate(COLUMNS) if key not in WALL_ROWS)

    def _table_room(self) -> int:
        """The height the panel leaves the table: its own less the margins, the heading and 2 px."""
        layout = self.layout()
        margins = layout.contentsMargins()
        room = self.height() - margins.top() - margins.bottom() - 2 - layout.spacing()
        if self._heading.text():
            room -= self._heading.heightForWidth(self.width() - margins.left() - margins.right()) + layout.spacing()
        return room

    def _tall_enough(self, room: int) -> bool:
        """Whether the table with every wall row that has figures fits `room` at the present type."""
        if not self._wall_rows:
            return True
        table = self._table
        for row, (key, _higher) in enumerate(COLUMNS):
            if key in self._wall_rows and table.isRowHidden(row):
                table.setRowHidden(row, False)
        table.verticalHeader().resizeSections(QHeaderView.ResizeMode.ResizeToContents)
        return self._rows_height(scrolls=False) <= room

    def _place_wall_rows(self, height: int) -> int:
        """Shows the wall's rows (self._wall_rows) that the panel has the height for, the share first to
        step aside, then the rate, then the bytes (the narration still tells all three), and returns the
        table's height with them. Placed again only when the room, the type or the rows change."""
        table = self._table
        rows = {key: row for row, (key, _higher) in enumerate(COLUMNS)}
        room = self._table_room()
        fit = (room, self._points, self._two_lines, self._wall_rows, self._other_rows(), table.columnCount())
        if fit == self._aside_for:
            return height
        self._aside_for = fit
        for key in WALL_ROWS:  # all that have figures, measured
            if table.isRowHidden(rows[key]) == (key in self._wall_rows):
                table.setRowHidden(rows[key], key not in self._wall_rows)
        if any(key in self._wall_rows for key in WALL_ROWS):
            table.verticalHeader().resizeSections(QHeaderView.ResizeMode.ResizeToContents)
            height = self._rows_height()
        aside = list(reversed(self._wall_rows))
        while True:
            # The heading names the rows set aside; a longer heading leaves less room: measured again.
            if self._heading.text() and self._heading.text() != self._heading_text + self._aside_text():
                self._heading.setText(self._heading_text + self._aside_text())
                names = dict(zip((key for key, _higher in COLUMNS), self._plain_names()))
                tip = (self.tr("Set aside for want of room (the narration tells them): {rows}") if self.narration_shown
                       else self.tr("Set aside for want of room: {rows}"))
                self._heading.setToolTip(tip.format(rows=", ".join(names[k] for k in self.set_aside()))
                                         if self.set_aside() else "")
            if not aside or height <= self._table_room():
                break
            key = aside.pop(0)
            height -= table.rowHeight(rows[key])
            table.setRowHidden(rows[key], True)
        return height

    def set_aside(self) -> list[str]:
        """The wall's rows with figures that the panel has no room for (the narration tells them)."""
        return [key for key in self._wall_rows if self._table.isRowHidden(COLUMNS.index((key, None)))]

    def _aside_text(self) -> str:
        aside = self.set_aside()
        if not aside:
            return ""
        # Short: a narrow panel's heading must not take the rows' room (the rows' names are its tooltip).
        if not self.narration_shown:
            return self.tr(" (+{n} rows without room)").format(n=len(aside))
        return self.tr(" (+{n} in the narration)").format(n=len(aside))

    def _rows_height(self, scrolls: bool | None = None) -> int:
        """The table's height with its visible rows (what _fit sets, less 2 px of room below) and the
        scrollbar where the columns scroll (by default: where its policy shows one)."""
        table = self._table
        header = table.horizontalHeader()
        height = max(header.height(), header.sizeHint().height()) + 2 * table.frameWidth()
        height += sum(table.rowHeight(r) for r in range(table.rowCount()))
        if scrolls is None:
            scrolls = table.horizontalScrollBarPolicy() != Qt.ScrollBarPolicy.ScrollBarAlwaysOff
        if scrolls:
            height += table.horizontalScrollBar().sizeHint().height()
        return height

    def _fit_note(self, table_height: int) -> None:
        """The note under the table only where the panel has the height for it: in a short panel
        (a 1280x720 window) it would cover the table's last rows."""
        layout = self.layout()
        margins = layout.contentsMargins()
        width = self.width() - margins.left() - margins.right()
        room = self.height() - margins.top() - margins.bottom() - table_height - 2 * layout.spacing()
        room -= self._heading.heightForWidth(width) if self._heading.text() else 0
        fits = bool(self._note.text()) and self._note.heightForWidth(width) <= room
        if fits != self._note.isVisibleTo(self):
            self._note.setVisible(fits)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        if self._table.columnCount():
            self._fit()
        else:
            self._fit_empty()

    def _fit_empty(self) -> None:
        """No run: the table as tall as its rows' names, whole rows only (as many as the panel has the height for).
        Left to the layout, it took its own size hint and cut its last row in half (the Chinese names are taller
        than the table's type measures)."""
        table = self._table
        table.verticalHeader().resizeSections(QHeaderView.ResizeMode.ResizeToContents)
        height, room = self._rows_height(scrolls=False), self._table_room() - 2
        for row in reversed(range(table.rowCount())):  # the last rows out of sight rather than cut
            if height <= room or room <= 0:
                break
            if not table.isRowHidden(row):
                height -= table.rowHeight(row)
        table.setFixedHeight(height + 2)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt override)
        # The table's own width decides the columns: it settles after the panel's resize (the
        # heading above it rewraps), and a fit made at the panel's resize had cut the last column.
        if (watched is self._table and event.type() == QEvent.Type.Resize and self._table.columnCount()
                and event.size().width() != event.oldSize().width()):
            self._fit()
        return super().eventFilter(watched, event)


def _named(engines: list[str]) -> dict[str, Engine]:
    return {e: Engine(e, order) for order, e in enumerate(engines)}


def _rich(note) -> str:
    """A note of kvviz.page.said_compare as the note label's rich text, each engine by its label; "" for None."""
    if note is None:
        return ""
    return text(note, QCoreApplication.translate, lambda e: style.engine_label(e.name), escape=html.escape)


def _decode_ms(history: RunHistory, engine: str, step: int) -> list[float]:
    """The engine's decode steps' time up to `step` (the prefill apart): all of them, the odd ones, the even ones."""
    steps = history.upto(engine, engine_step(history, engine, step))[1:]
    return [sum(t.latency_ms for t in steps if parity is None or t.step % 2 == parity) for parity in (None, 1, 0)]


def _wrap(name: str, width: int, metrics: QFontMetrics) -> str:
    """name's words on lines no wider than width (a longer word on a line of its own)."""
    lines: list[str] = []
    for word in name.split():
        if lines and metrics.horizontalAdvance(f"{lines[-1]} {word}") <= width:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return "\n".join(lines)


def _nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)
