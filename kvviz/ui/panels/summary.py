"""Summary table: per engine totals up to the selected step, from RunSummary.from_traces.

Time next to the work it cost (K/V projections, bytes moved), so the lesson survives a tiny model
whose wall time is mostly Python overhead.
"""
from __future__ import annotations

import math

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout

from kvviz.trace import RunSummary, speedup
from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._plots import engine_step
from kvviz.ui.panels.base import Panel

# Column keys (stable, used by table_values) and, where the best value is set in bold, whether a
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
)


class SummaryPanel(Panel):
    key = "summary"

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._heading = QLabel()
        self._heading.setStyleSheet(f"color: {style.PLOT_FOREGROUND}; font-weight: bold")
        self._heading.setWordWrap(True)  # "Totals over steps 0-5 (6 new tokens)" is wider than a narrow panel
        # Metrics down, engines across: fits a narrow panel and reads as a comparison per metric.
        self._table = QTableWidget(len(COLUMNS), 0)
        self._table.setVerticalHeaderLabels(self._headers())
        self._table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self._table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self._table.setAlternatingRowColors(True)
        self._table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        font = self._table.font()
        font.setPointSize(9)
        self._table.setFont(font)
        # Columns as wide as their figures (a narrow panel scrolls rather than wrapping "10.1 ms").
        self._table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self._table.setWordWrap(False)
        self._table.horizontalHeader().setDefaultAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self._table.horizontalHeader().setMinimumSectionSize(50)
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
        return [self.tr("time"), self.tr("tokens/s"), self.tr("speedup"), self.tr("K/V computed"),
                self.tr("copied"), self.tr("written"), self.tr("gathered"), self.tr("peak cache")]

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
            }
        shown = min(step, history.n_steps() - 1)
        self._heading.setText(self.tr("Totals over steps 0\u2013{step} ({n} new tokens)").format(
            step=shown, n=shown + 1))
        self._fill(engines)
        self._note.setText(self._work_note(summaries))

    def _fill(self, engines: list[str]) -> None:
        table = self._table
        # Sections fitted to their contents once, after the cells are set: fitted on every setText,
        # the 32 cells of four engines took ~11 ms a draw (0.34 ms a cell).
        hh, vh = table.horizontalHeader(), table.verticalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        vh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        table.setColumnCount(len(engines))
        table.setHorizontalHeaderLabels(engines)
        bold = QFont()
        bold.setBold(True)
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
                font = bold if key in best and value == best[key] else QFont()
                if item.font() != font:
                    item.setFont(font)
        vh.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self._fit()

    def _fit(self) -> None:
        """Columns share the width where the figures fit, else keep their width and scroll; the table
        is as tall as its rows so the note sits right under the figures."""
        table = self._table
        header = table.horizontalHeader()
        need = table.verticalHeader().width() + 2 * table.frameWidth()
        need += sum(max(header.sectionSizeHint(c), table.sizeHintForColumn(c)) for c in range(table.columnCount()))
        fits = need <= table.width()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Stretch if fits else QHeaderView.ResizeMode.ResizeToContents)
        height = header.height() + 2 * table.frameWidth()
        height += sum(table.rowHeight(r) for r in range(table.rowCount()))
        if not fits:
            height += table.horizontalScrollBar().sizeHint().height()
        table.setFixedHeight(height + 2)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        if self._table.columnCount():
            self._fit()

    def _format(self, key: str, value) -> str:
        if value is None or _nan(value):
            return "\u2014"
        if key == "total_ms":
            return self.tr("{v:.1f} ms").format(v=value)
        if key == "tokens_per_s":
            return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"
        if key == "speedup_vs_naive":
            return f"{value:.2f}\u00d7"
        if key == "kv_projections":
            return f"{value:,}"
        return _short_bytes(value)

    def _work_note(self, summaries: dict[str, RunSummary]) -> str:
        naive = summaries.get("naive")
        cached = [s for k, s in summaries.items() if k != "naive" and s.kv_projections]
        if naive is None or not cached:
            return ""
        fewest = min(cached, key=lambda s: s.kv_projections)
        ratio = naive.kv_projections / fewest.kv_projections
        return self.tr(
            "Work saved: naive computed <b>{naive:,}</b> K/V projections so far, a cache "
            "<b>{cached:,}</b> ({ratio:.1f}\u00d7 fewer). Each one it skips is a K or V that never "
            "changed.").format(naive=naive.kv_projections, cached=fewest.kv_projections, ratio=ratio)


def _short_bytes(n: int) -> str:
    """Three significant figures: 366 KiB, 12.0 KiB, 1.50 MiB (narrow columns)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}" if value >= 10 \
                else f"{value:.2f} {unit}"
    return f"{int(n)} B"


def _nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)
