"""Block pool: every physical block of each scheduler's pool at the step shown, a cell coloured by the
request that owns it (filled in proportion to the positions written), a shared block marked with its
ref count, a cached-but-free block (kept for a prefix hit) hatched, a free block grey. Hovering a block
(or selecting a request) shows that request's block table, logical → physical.

Reads the step's PoolState and RequestState block tables only.
"""
from __future__ import annotations

import math

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QBrush, QColor, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QToolTip, QWidget

from kvviz.serving.history import ServeHistory
from kvviz.serving.narration import pool_heading
from kvviz.ui.qtutil import translator
from kvviz.ui.serve import colors
from kvviz.ui.serve.panels.base import ServePanel

GAP = 2
HEAD_LINES = 3  # the most lines a pool's heading takes

_tr = translator("PoolPanel")


def wrapped(text: str, fm: QFontMetrics, width: int) -> list[str]:
    """`text` in lines of at most `width` px, broken at spaces (dropped) and after a full-width colon (kept: the
    Chinese "paged：27" has no space), a piece wider than `width` a line of its own."""
    pieces = [(" " if i and not j else "", part) for i, word in enumerate(text.split(" "))
              for j, part in enumerate(word.replace("：", "：\n").split("\n")) if part or not j]
    lines: list[str] = []
    for glue, part in pieces:
        joined = lines[-1] + glue + part if lines else part
        if lines and fm.horizontalAdvance(joined) <= width:
            lines[-1] = joined
        else:
            lines.append(part)
    return lines


def table_text(request: int, table: tuple[int, ...]) -> str:
    """"request 3: 0→7 1→12 2→4" (logical → physical)."""
    pairs = " ".join(f"{i}→{b}" for i, b in enumerate(table))
    return _tr("request {0}: {1}").format(request, pairs or _tr("no blocks"))


class PoolPanel(ServePanel):
    key = "pool"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setMinimumSize(160, 120)
        self.run: ServeHistory | None = None
        self.step = 0
        self.request: int | None = None
        self.hovered: tuple[str, int] | None = None  # (scheduler, request) under the mouse
        self.cells: dict[str, list[QRect]] = {}  # each scheduler's block rectangles as last painted
        self.heads: dict[str, list[str]] = {}  # each scheduler's heading's lines as last painted
        self.head_width = 0  # the px those lines may take

    def help_text(self) -> str:
        return self.tr("Every physical KV block of each scheduler's pool at this step, coloured by the request "
                       "holding it and filled as far as it is written. A number is a ref count (a prefix shared "
                       "by several requests); hatched: cached but free, kept for a prefix hit; grey: free. "
                       "Hover a block to see its request's block table (logical → physical).")

    def clear(self) -> None:
        self.run = None
        self.update()

    def show_step(self, run: ServeHistory, step: int, request: int | None) -> None:
        self.run, self.step, self.request = run, step, request
        self.update()

    def readable_size(self) -> tuple[int, int]:
        """Two schedulers' pools across, each a line's title ("paged: 14 of 32 blocks free") over four
        lines of blocks."""
        fm = self.fontMetrics()
        run = self.run
        n = len([k for k in run.schedulers if run.n_steps(k)]) if run is not None else 1
        across = max(1, min(2, n))
        down = math.ceil(max(1, n) / across)
        return across * fm.averageCharWidth() * 22, down * (fm.height() + 2) * 5

    def shown_request(self, scheduler: str) -> int | None:
        if self.hovered is not None and self.hovered[0] == scheduler:
            return self.hovered[1]
        return self.request

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt override)
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor("#ffffff"))
        self.cells, self.heads = {}, {}
        run = self.run
        schedulers = [k for k in run.schedulers if run.n_steps(k)] if run is not None else []
        if not schedulers:
            painter.setPen(QColor("#8a8a8a"))
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, self.tr("no run yet"))
            return
        fm = painter.fontMetrics()
        line = fm.height() + 2
        n = len(schedulers)
        across = max(1, min(n, round(math.sqrt(n * self.width() / max(1, self.height())))))
        down = math.ceil(n / across)
        w, h = self.width() // across, self.height() // down
        self.head_width = w - 6
        self.heads = {k: self.heading_lines(k, self.head_width) for k in schedulers}
        for i, k in enumerate(schedulers):
            row = schedulers[i - i % across:i - i % across + across]
            head = line * max(len(self.heads[j]) for j in row)  # the blocks of a row's pools level
            self._draw_pool(painter, k, QRect((i % across) * w, (i // across) * h, w, h), line, head)

    def heading_lines(self, k: str, width: int) -> list[str]:
        """The scheduler's heading (kvviz.serving.narration.pool_heading) in lines of `width` px at most: the
        full form, or the short one where it takes fewer lines, wrapped at spaces (so its figures are never cut);
        cut short ("...") only past HEAD_LINES lines or where one word is wider than the pool."""
        record = self.run.at(k, self.step)
        fm = self.fontMetrics()
        forms = [wrapped(pool_heading(k, record, self.tr, form), fm, width) for form in ("full", "short")]
        lines = min(forms, key=len)  # the full form on a tie
        if len(lines) > HEAD_LINES:
            lines = lines[:HEAD_LINES - 1] + [" ".join(lines[HEAD_LINES - 1:])]
        return [fm.elidedText(text, Qt.TextElideMode.ElideRight, width) for text in lines]

    def _draw_pool(self, painter: QPainter, k: str, area: QRect, line: int, head: int) -> None:
        record = self.run.at(k, self.step)
        pool = record.pool
        n = pool.n_blocks
        painter.setPen(QColor(colors.scheduler_color(k)))
        for i, text in enumerate(self.heads[k]):
            painter.drawText(QRect(area.left() + 2, area.top() + i * line, area.width() - 4, line),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, text)
        shown = self.shown_request(k)
        table = next((r.block_table for r in record.requests if r.request == shown), ()) if shown is not None else ()
        foot = line if shown is not None else 0
        room = QRect(area.left() + 2, area.top() + head, area.width() - 4, area.height() - head - foot - 2)
        cols = max(1, math.ceil(math.sqrt(n * room.width() / max(1, room.height()))))
        rows = math.ceil(n / cols)
        size = max(3, min((room.width() - GAP * cols) // cols, (room.height() - GAP * rows) // max(1, rows), 40))
        rects = []
        logical = {b: i for i, b in enumerate(table)}
        for b in range(n):
            r = QRect(room.left() + (b % cols) * (size + GAP), room.top() + (b // cols) * (size + GAP), size, size)
            rects.append(r)
            state = pool.state(b)
            if state == "used":
                color = colors.request_color(pool.owners[b][0])
                painter.fillRect(r, color.lighter(175))
                fill = round(size * pool.filled[b] / pool.block_size)
                painter.fillRect(QRect(r.left(), r.bottom() - fill + 1, size, fill), color)
            elif state == "cached":
                painter.fillRect(r, QColor("#f4f4f4"))
                painter.fillRect(r, QBrush(QColor(colors.CACHED_EDGE), Qt.BrushStyle.BDiagPattern))
            else:
                painter.fillRect(r, QColor(colors.FREE_BLOCK))
            edge = QPen(QColor(colors.SELECTED_EDGE), 2) if b in logical else QPen(QColor("#b0b0b0"), 1)
            painter.setPen(edge)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRect(r.adjusted(0, 0, -1, -1))
            label = ""
            if b in logical:
                label = str(logical[b])
            if pool.ref_counts[b] > 1:
                label = f"{label}×{pool.ref_counts[b]}" if label else f"×{pool.ref_counts[b]}"
            if label and painter.fontMetrics().horizontalAdvance(label) > size - 2:
                label = str(logical[b]) if b in logical else ""  # the table's order first, when both do not fit
            if label and size >= 12:
                painter.setPen(QColor("#000000"))
                painter.drawText(r, Qt.AlignmentFlag.AlignCenter, label)
        self.cells[k] = rects
        if shown is not None:
            text = painter.fontMetrics().elidedText(table_text(shown, table), Qt.TextElideMode.ElideRight,
                                                    area.width() - 4)
            painter.setPen(QColor("#303030"))
            painter.drawText(QRect(area.left() + 2, area.bottom() - foot, area.width() - 4, foot),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, text)

    def block_at(self, pos: QPoint) -> tuple[str, int] | None:
        for k, rects in self.cells.items():
            for b, r in enumerate(rects):
                if r.contains(pos):
                    return k, b
        return None

    def mouseMoveEvent(self, event) -> None:  # noqa: N802 (Qt override)
        hit = self.block_at(event.position().toPoint())
        hovered = None
        if hit is not None:
            k, b = hit
            pool = self.run.at(k, self.step).pool
            owners = pool.owners[b]
            hovered = (k, owners[0]) if owners else None
            state = {"used": self.tr("used"), "cached": self.tr("cached, free"), "free": self.tr("free")}[pool.state(b)]
            tip = self.tr("{0}: block {1}, {2}, {3} of {4} positions written").format(
                k, b, state, pool.filled[b], pool.block_size)
            if owners:
                tip += "\n" + self.tr("held by requests {0} (ref count {1})").format(
                    ", ".join(map(str, owners)), pool.ref_counts[b])
                record = self.run.at(k, self.step)
                for o in owners:
                    table = next((r.block_table for r in record.requests if r.request == o), ())
                    tip += "\n" + table_text(o, table)
            QToolTip.showText(event.globalPosition().toPoint(), tip, self)
        else:
            QToolTip.hideText()
        if hovered != self.hovered:
            self.hovered = hovered
            self.update()

    def leaveEvent(self, event) -> None:  # noqa: N802 (Qt override)
        if self.hovered is not None:
            self.hovered = None
            self.update()
        super().leaveEvent(event)

    def mousePressEvent(self, event) -> None:  # noqa: N802 (Qt override)
        hit = self.block_at(event.position().toPoint())
        if hit is not None and event.button() == Qt.MouseButton.LeftButton:
            owners = self.run.at(hit[0], self.step).pool.owners[hit[1]]
            if owners:
                self.cell_picked.emit(owners[0], self.step)
        super().mousePressEvent(event)
