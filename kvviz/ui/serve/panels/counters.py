"""Counters: per scheduler, as of the step shown: padding and idle waste, the prefix hit rate and the
prefill tokens it saved, preemptions, tokens and tokens per second, the pool's peak. A table, a column
per scheduler, and a "vLLM" column where vLLM ran beside them (what vLLM reports; a dash where it reports
nothing alike, its start-up's wait or failure while it has no steps).

Reads ServeHistory.counters and ServeHistory.vllm_counters only.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QHeaderView, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from kvviz.serving.history import VLLM, ServeHistory
from kvviz.serving.narration import cell_text
from kvviz.serving.words import counter_rows
from kvviz.ui.qtutil import translator
from kvviz.ui.serve import colors
from kvviz.ui.serve.panels.base import ServePanel

_tr = translator("CountersPanel")


def rows() -> list[tuple[str, str]]:
    """(counter key, its name in the window's language), in the table's order (the serve page's, too)."""
    return counter_rows(_tr)


def lane_text(run: ServeHistory) -> str:
    """vLLM's state while it has no steps to show: its start-up's wait, or that it failed."""
    lane = run.vllm
    if lane.state == "failed":
        return _tr("failed")
    return _tr("starting {0:.0f} s").format(lane.waited_s)


def even_widths(needs: list[int], room: int) -> list[int]:
    """Column widths (px) for columns needing `needs` in `room` px: equal shares of the room, except that a column
    needing more than its share keeps its need and the others share what is left; all of the room is used (the
    first columns take the odd pixels). Where the needs pass the room, each column its need."""
    if not needs or sum(needs) >= room:
        return list(needs)
    fixed: set[int] = set()
    while True:
        others = [i for i in range(len(needs)) if i not in fixed]
        share = (room - sum(needs[i] for i in fixed)) / len(others)
        wider = {i for i in others if needs[i] > share}
        if not wider:
            break
        fixed |= wider
    left = room - sum(needs[i] for i in fixed)
    base, odd = divmod(left, len(others))
    widths = list(needs)
    for n, i in enumerate(others):
        widths[i] = base + (1 if n < odd else 0)
    return widths


class CountersPanel(ServePanel):
    key = "counters"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.table = QTableWidget(0, 0)
        self.table.setObjectName("serve_counters")
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        font = self.table.font()
        font.setPointSizeF(font.pointSizeF() * 0.9)
        self.table.setFont(font)
        self.table.verticalHeader().setFont(font)
        self.table.horizontalHeader().setFont(font)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 3)
        self.table.horizontalHeader().setMinimumSectionSize(20)
        # the columns share the table's width evenly, none narrower than its figures (stretched equally
        # regardless, four schedulers' "1,234" read "1,..." in the panel's width at 1280x720): fit_columns
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.table.horizontalHeader().setStretchLastSection(False)
        self.table.viewport().installEventFilter(self)  # its width changed: the columns shared again
        layout.addWidget(self.table)
        self.shown: dict[str, dict[str, float]] = {}

    def readable_size(self) -> tuple[int, int]:
        """Every scheduler's column beside the counters' names, and six counters down."""
        table = self.table
        fm = table.fontMetrics()
        names = table.verticalHeader().sizeHint().width() if table.rowCount() else fm.horizontalAdvance("tokens saved")
        column = max(fm.horizontalAdvance("continuous"), fm.horizontalAdvance("99,999")) + 12
        width = names + max(1, table.columnCount()) * column + table.verticalScrollBar().sizeHint().width() + 8
        height = table.horizontalHeader().sizeHint().height() + 6 * (fm.height() + 3) + 8
        return width, height

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt override)
        if watched is self.table.viewport() and event.type() == QEvent.Type.Resize:
            self.fit_columns()
        return super().eventFilter(watched, event)

    def fit_columns(self) -> None:
        """Every column as wide as its heading and figures need, the viewport's width shared evenly
        (even_widths); wider than the viewport, the table scrolls."""
        table, header = self.table, self.table.horizontalHeader()
        needs = [max(header.sectionSizeHint(col), table.sizeHintForColumn(col)) for col in range(table.columnCount())]
        for col, width in enumerate(even_widths(needs, table.viewport().width())):
            if header.sectionSize(col) != width:
                header.resizeSection(col, width)

    def help_text(self) -> str:
        return self.tr("Per scheduler, up to this step: padding and idle slots (computed and thrown away) and "
                       "their share of the prefill and generation slots; prefix hits: the share of prefill "
                       "positions the prefix cache served, and the tokens it saved; prefilled: the positions "
                       "prefilled; preemptions; tokens generated and tokens per second of step time; the most "
                       "pool blocks held at once.")

    def clear(self) -> None:
        self.table.setRowCount(0)
        self.table.setColumnCount(0)
        self.shown = {}

    def show_step(self, run: ServeHistory, step: int, request: int | None) -> None:
        shown = [k for k in run.schedulers if run.n_steps(k)] + ([VLLM] if run.vllm is not None else [])
        names = rows()
        if self.table.columnCount() != len(shown) or self.table.rowCount() != len(names):
            self.table.setColumnCount(len(shown))
            self.table.setRowCount(len(names))
        self.table.setVerticalHeaderLabels([n for _k, n in names])
        self.shown = {}
        for col, k in enumerate(shown):
            head = QTableWidgetItem("vLLM" if k == VLLM else k)
            head.setForeground(QColor(colors.scheduler_color(k)))
            head.setToolTip(self.vllm_tip(run) if k == VLLM else k)
            self.table.setHorizontalHeaderItem(col, head)
            waiting = k == VLLM and not run.vllm.steps
            c = run.vllm_counters(step) if k == VLLM else run.counters(k, step)
            self.shown[k] = c
            for row, (key, _name) in enumerate(names):
                item = self.table.item(row, col)
                if item is None:
                    item = QTableWidgetItem()
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                    self.table.setItem(row, col, item)
                text = (lane_text(run) if row == 0 else "") if waiting else cell_text(key, c)
                if item.text() != text:
                    item.setText(text)
                tip = (run.vllm.message if waiting else "" if key in c else _tr("vLLM does not report this")) \
                    if k == VLLM else ""
                if item.toolTip() != tip:
                    item.setToolTip(tip)
        self.fit_columns()

    def vllm_tip(self, run: ServeHistory) -> str:
        """The vLLM column's heading's tooltip: its version and the scheduler its settings follow."""
        lane = run.vllm
        version = lane.run.version if lane.run is not None else "?"
        return _tr("vLLM {0}, settings as {1}'s; prefix hits and tokens saved are its cached prompt tokens, "
                   "prefilled its prompt tokens computed, peak blocks its KV cache usage times the pool's "
                   "blocks").format(version, lane.counterpart or "paged")
