"""Summary table: per engine totals up to the selected step, from RunSummary.from_traces.

Time next to the work it cost (K/V projections, bytes moved), so the lesson survives a tiny model
whose wall time is mostly Python overhead.
"""
from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QStyledItemDelegate,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from kvviz.format import byte_unit, duration_unit, fmt_count, fmt_figure
from kvviz.trace import RunSummary, speedup
from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._plots import engine_step
from kvviz.ui.panels.base import Panel

# The best figure of a row is tinted (bold had widened each column by ~4 pixels, past a narrow panel).
_BEST = QBrush(QColor("#cfe8c8"))
_NO_TINT = QBrush()
# Column keys (stable, used by table_values) and, where the best value is tinted, whether a
# larger value is better. Byte columns get no "best": naive's 0 B is no win, it pays in compute.
COLUMNS: tuple[tuple[str, bool | None], ...] = (
    ("total_ms", False),
    ("tokens_per_s", True),
    ("speedup_vs_naive", True),
    ("kv_projections", False),
    ("bytes_copied", None),
    ("bytes_written", None),
    ("bytes_gathered", None),
    ("peak_cache_bytes", None),
    ("mean_kl", False),  # quality beside cost (kvviz.quality): 0 for the exact engines
    ("top1_agreement", True),
)
EXACT = ("naive", "concat", "static", "paged")  # kvviz.engines.EXACT_KEYS (panels import no engines)


class _TightDelegate(QStyledItemDelegate):
    """Cells as wide as their figure, its margins and the grid line (the style's own hint took ~4 more)."""

    def sizeHint(self, option, index) -> QSize:  # noqa: N802 (Qt override)
        hint = super().sizeHint(option, index)
        font = index.data(Qt.ItemDataRole.FontRole) or option.font
        return QSize(QFontMetrics(font).horizontalAdvance(index.data() or "") + 9, hint.height())  # margins, grid


TABLE_POINTS = 9.0  # the table's type size where it fits; smaller, down to MIN_POINTS, where it does not
MIN_POINTS = 7.0
ONE_LINE_POINTS = 8.0
_SIZES = ([(False, TABLE_POINTS - 0.5 * i) for i in range(int((TABLE_POINTS - ONE_LINE_POINTS) * 2) + 1)]
          + [(True, TABLE_POINTS - 0.5 * i) for i in range(int((TABLE_POINTS - MIN_POINTS) * 2) + 1)])


class SummaryPanel(Panel):
    key = "summary"

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
        self._points = TABLE_POINTS
        self._set_points(TABLE_POINTS)
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
        self.setToolTip(self.help_text())

    def retranslate(self) -> None:
        self._table.setVerticalHeaderLabels(self._headers())
        for i, tip in enumerate(self._header_tips()):
            self._table.verticalHeaderItem(i).setToolTip(tip)
        self.setToolTip(self.help_text())
        if self._shown is not None:
            self.show_step(*self._shown)  # the heading, figures with units and the note

    def _headers(self) -> list[str]:
        """The rows' names, with the unit of a time or byte row: after it, or under it where the
        table is too narrow for both on one line."""
        names = [self.tr("time"), self.tr("tokens/s"), self.tr("speedup"), self.tr("K/V computed"),
                 self.tr("copied"), self.tr("written"), self.tr("gathered"), self.tr("peak cache"),
                 self.tr("mean KL"), self.tr("top-1 same")]
        if self._two_lines:  # a word a line
            names = [name.replace(" ", "\n") for name in names]
        unit = self.tr("{name}\n({unit})") if self._two_lines else self.tr("{name} ({unit})")
        return [unit.format(name=name, unit=self._units[key][0]) if key in self._units
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
            self.tr("Mean KL divergence (nats) of the next-token distribution from the exact engine's, "
                    "teacher-forced on its tokens: 0 for an exact cache"),
            self.tr("Share of steps whose most likely token is the exact engine's (teacher-forced)"),
        ]

    def title(self) -> str:
        return self.tr("Summary")

    def help_text(self) -> str:
        return self.tr(
            "Totals up to the selected step. Time alone can mislead on a tiny model, where Python "
            "overhead dominates each step; the work columns show what the cache saves: K/V projections "
            "(O(n\u00b2) for naive, one per token for a cache) and bytes copied (O(n\u00b2) for the "
            "chapter's torch.cat cache, none for static and paged).")

    def table_values(self) -> dict[str, dict[str, float | int | None]]:
        """Per engine, per column key (see COLUMNS): the raw figures shown."""
        return {e: dict(v) for e, v in self._values.items()}

    def clear(self) -> None:
        self._table.setColumnCount(0)
        self._values.clear()
        self._units = {}
        self._table.setVerticalHeaderLabels(self._headers())
        self._heading.setText("")
        self._note.setText("")
        self._shown = None

    def show_step(self, history: RunHistory, step: int) -> None:
        engines = [e for e in history.engines if history.traces.get(e)]
        if not engines:
            self.clear()
            return
        self._shown = (history, step)
        summaries = {e: RunSummary.from_traces(history.upto(e, engine_step(history, e, step))) for e in engines}
        naive = summaries.get("naive")
        self._values = {}
        for engine, s in summaries.items():
            self._values[engine] = {
                "total_ms": s.total_ms,
                "tokens_per_s": s.tokens_per_s,
                "speedup_vs_naive": speedup(s, naive),
                "kv_projections": s.kv_projections,
                "bytes_copied": s.bytes_copied,
                "bytes_written": s.bytes_written,
                "bytes_gathered": s.bytes_gathered,
                "peak_cache_bytes": s.peak_cache_bytes,
                "mean_kl": 0.0 if engine in EXACT else s.mean_kl,
                "top1_agreement": 1.0 if engine in EXACT else s.top1_agreement,
            }
        shown = min(step, history.n_steps() - 1)
        self._heading.setText(self.tr("Totals over steps 0\u2013{step} ({n} new tokens)").format(
            step=shown, n=shown + 1))
        approximate = any(e not in EXACT for e in engines)  # the quality rows only where they tell something
        for row, (key, _higher) in enumerate(COLUMNS):
            if key in ("mean_kl", "top1_agreement") and self._table.isRowHidden(row) == approximate:
                self._table.setRowHidden(row, not approximate)
        self._units = self._row_units()
        self._set_headers()
        self._note.setText(self._work_note(summaries))
        self._fill(engines)

    def _row_units(self) -> dict[str, tuple[str, float]]:
        """Per time or byte row, the unit its figures are given in (named once, in the row's label,
        so four engines' columns fit a narrow panel): the largest figure's."""
        units: dict[str, tuple[str, float]] = {}
        for key, _higher in COLUMNS:
            values = [v[key] for v in self._values.values() if v[key] is not None and not _nan(v[key])]
            top = max((abs(x) for x in values), default=0)
            if key == "total_ms":
                units[key] = duration_unit(top)
            elif key.endswith("bytes") or key.startswith("bytes"):
                units[key] = byte_unit(top)
        return units

    def _fill(self, engines: list[str]) -> None:
        table = self._table
        # Sections fitted to their contents once, after the cells are set: fitted on every setText,
        # the 32 cells of four engines took ~11 ms a draw (0.34 ms a cell).
        hh, vh = table.horizontalHeader(), table.verticalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        vh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        table.setColumnCount(len(engines))
        table.setHorizontalHeaderLabels(engines)
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
                text = self._format(key, value)
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
        The table is as tall as its rows so the note sits right under the figures."""
        table = self._table
        header = table.horizontalHeader()
        room = table.width()
        need = self._need()
        if need > room or (self._points < TABLE_POINTS or self._two_lines) and need < 0.85 * room:
            # The largest type that fits: on one line down to ONE_LINE_POINTS, then with the rows'
            # names and units a word a line, down to MIN_POINTS.
            for two_lines, points in _SIZES if self._units else [s for s in _SIZES if not s[0]]:
                if (two_lines, points) != (self._two_lines, self._points):
                    if two_lines != self._two_lines:
                        self._two_lines = two_lines
                        self._set_headers()
                    self._set_points(points)
                    need = self._need()
                if need <= room:
                    break
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
        # Where the columns fit, no scrollbar: one shown while the row names' width settled had
        # covered the last row.
        table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff if fits
                                           else Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        # Rows fitted to the type now (left to the next layout pass, the last row had been hidden
        # under the note after the type changed).
        table.verticalHeader().resizeSections(QHeaderView.ResizeMode.ResizeToContents)
        height = max(header.height(), header.sizeHint().height()) + 2 * table.frameWidth()
        height += sum(table.rowHeight(r) for r in range(table.rowCount()))
        if not fits:
            height += table.horizontalScrollBar().sizeHint().height()
        table.setFixedHeight(height + 2)
        self._fit_note(height + 2)

    def _fit_note(self, table_height: int) -> None:
        """The note under the table only where the panel has the height for it: in a short panel
        (a 1280x720 window) it had been drawn over the table's last rows."""
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

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt override)
        # The table's own width decides the columns: it settles after the panel's resize (the
        # heading above it rewraps), and a fit made at the panel's resize had cut the last column.
        if (watched is self._table and event.type() == QEvent.Type.Resize and self._table.columnCount()
                and event.size().width() != event.oldSize().width()):
            self._fit()
        return super().eventFilter(watched, event)

    def _format(self, key: str, value) -> str:
        if value is None or _nan(value):
            return "\u2014"
        if key in self._units:
            return fmt_figure(value / self._units[key][1])
        if key == "tokens_per_s":
            return fmt_figure(value)
        if key == "speedup_vs_naive":
            return f"{value:.2f}\u00d7"
        if key == "mean_kl":
            return f"{value:.3g}"
        if key == "top1_agreement":
            return f"{100 * value:.0f}%"
        return fmt_count(value)

    def _work_note(self, summaries: dict[str, RunSummary]) -> str:
        naive = summaries.get("naive")
        cached = [s for k, s in summaries.items() if k != "naive" and s.kv_projections]
        if naive is None or not cached:
            return ""
        fewest = min(cached, key=lambda s: s.kv_projections)
        ratio = naive.kv_projections / fewest.kv_projections
        return self.tr(
            "Work saved: naive computed <b>{naive}</b> K/V projections so far, a cache "
            "<b>{cached}</b> ({ratio:.1f}\u00d7 fewer). Each one it skips is a K or V that never "
            "changed.").format(naive=fmt_count(naive.kv_projections), cached=fmt_count(fewest.kv_projections),
                               ratio=ratio)


def _nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)
