"""Request timeline: a row per request, a column per token slot of each step, one block per scheduler;
each cell what that request's slot did (waiting, prefill, decode, padding, idle, preempted, finished),
like the course's padding bars. The wasted slots (padding + idle) are counted in the title. Under each
block, a step-number axis: labels at the least round interval (1, 2, 5, 10, ...) at which nine in ten of its
multiples have room (a multiple crowded by narrow steps before it is left out), a tick at the start of every
labelled step; the interval follows the panel's width. Where vLLM ran beside them, a "vLLM" block under
theirs: each engine step as wide as the counterpart scheduler's same step, a request's cells from the steps
vLLM reported a token for it (prefill at its first, decode after), and above it what vLLM reported at the
step shown (running, waiting, blocks in use, prompt tokens from its cache, preemptions); while vLLM starts, the
seconds waited.

Drawn from ServeHistory.timeline (numpy cells) with QPainter: one indexed image per scheduler, scaled
by whole pixels while the slots fit, so every cell is the same size.
"""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPainter
from PySide6.QtWidgets import QToolTip, QWidget

from kvviz.serving import narration, words
from kvviz.serving.history import CELL_KINDS, VLLM, ServeHistory, Timeline
from kvviz.ui.qtutil import translator
from kvviz.ui.serve import colors
from kvviz.ui.serve.panels.base import ServePanel

LABEL_W = 30  # px left of the cells for "r12" at 100% (wider where the type is: label_width)
MARK_W = 8  # without labels (rows too low): the margin that marks the selected request
MARK_H = 4  # the strip under a block that marks the step shown (the cells themselves are never drawn over)
MAX_ROW_PX = 22  # at 100%: a row is never drawn taller than this, or than a line of its labels and 4 px
AXIS_GAP = 8  # px at the least between two step labels
KEEP_SHARE = 0.9  # an interval is taken when this share of its multiples find room (narrow steps crowd some out)
NICE = (1, 2, 5)
LEGEND_KINDS = ("waiting", "prefill", "decode", "padding", "idle", "preempted", "finished")

_tr = translator("TimelinePanel")


def kind_name(kind: str) -> str:
    """A cell kind in the window's language (kvviz.serving.words', which the serve page says too)."""
    return words.kind_names(_tr)[kind]


def fit_cap(widths: list[np.ndarray], room_px: int) -> int | None:
    """None when every scheduler's slots fit `room_px` at a whole pixel each; else the largest number of
    columns a step may take for the widest scheduler to fit at two pixels a column (1 at the least)."""
    if max((int(w.sum()) for w in widths), default=0) <= room_px:
        return None
    lo, hi = 1, max((int(w.max()) for w in widths if len(w)), default=1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if max(int(np.minimum(w, mid).sum()) for w in widths) * 2 <= room_px:
            lo = mid
        else:
            hi = mid - 1
    return lo


def nice_intervals():
    """1, 2, 5, 10, 20, 50, ... (steps between two labels)."""
    scale = 1
    while True:
        for m in NICE:
            yield m * scale
        scale *= 10


class TimelinePanel(ServePanel):
    key = "timeline"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setMinimumSize(200, 120)
        self.run: ServeHistory | None = None
        self.step = 0
        self.request: int | None = None
        self.blocks: list[tuple[str, QRect, int]] = []  # (scheduler, cells rect, px per slot) as last painted
        self.cell_px = (0, 0)  # (width, height) of one cell when whole pixels (0: scaled down)
        self.cap: int | None = None  # the most columns a step takes (None: one per slot)
        self.axis: dict[str, list[tuple[int, QRect]]] = {}  # per scheduler: (step, its label's rect) as painted
        self._images: dict[str, tuple[int, QImage]] = {}

    # -- sizes ------------------------------------------------------------------------------------
    def small_font(self) -> QFont:
        """The request labels' and the step numbers' type."""
        small = QFont(self.font())
        small.setPointSizeF(max(6.0, small.pointSizeF() * 0.85))
        return small

    def row_min(self) -> int:
        """The least height of a request's row: a line of its label ("r12") in the small type."""
        return QFontMetrics(self.small_font()).height()

    def label_width(self) -> int:
        return max(LABEL_W, QFontMetrics(self.small_font()).horizontalAdvance("r99") + 6)

    def _chrome(self, n_schedulers: int, width: int) -> int:
        """The height besides the rows: the legend, and per scheduler its line, the step strip, the axis."""
        line = self.fontMetrics().height() + 2
        axis_h = QFontMetrics(self.small_font()).height() + 3
        return self.legend_height(width) + 2 + (line + MARK_H + 4 + axis_h) * n_schedulers

    def legend_entries(self, cap: int | None) -> list[tuple[str, str]]:
        entries = [(kind, kind_name(kind)) for kind in LEGEND_KINDS]
        if cap is not None:
            entries.append(("", self.tr("a step over {0} slots drawn in {0} columns").format(cap)))
        return entries

    def legend_rows(self, width: int, cap: int | None = None) -> list[list[tuple[str, str]]]:
        """The legend's entries in lines that fit `width` (a narrow panel wraps them, never cuts them)."""
        fm = self.fontMetrics()
        box = fm.height() - 4
        rows: list[list[tuple[str, str]]] = [[]]
        x = 0
        for kind, text in self.legend_entries(cap):
            w = (box + 3 if kind else 0) + fm.horizontalAdvance(text) + 10
            if rows[-1] and x + w - 10 > width:
                rows.append([])
                x = 0
            rows[-1].append((kind, text))
            x += w
        return rows

    def legend_height(self, width: int, cap: int | None = 99) -> int:
        """The legend's height at a width; the need counts the note a narrowed step adds (`cap`) whether
        or not it shows, so that it does not change with the width the panel is painted at."""
        return (self.fontMetrics().height() + 2) * len(self.legend_rows(width - 4, cap)) + 2

    def groups(self) -> list[str]:
        """The blocks drawn, top to bottom: every scheduler with steps, then vLLM where it ran beside them."""
        run = self.run
        if run is None:
            return []
        return [k for k in run.schedulers if run.n_steps(k)] + ([VLLM] if run.vllm is not None else [])

    def timeline_of(self, k: str) -> Timeline:
        return self.run.vllm_timeline(self.cap) if k == VLLM else self.run.timeline(k, self.cap)

    def vllm_heading(self, step: int, short: bool = False) -> str:
        """The line above vLLM's block: its start-up's wait, its failure, or what it reported at `step` (`short`:
        in fewer words, for a narrow panel)."""
        lane = self.run.vllm
        s = lane.record_at(step)
        if lane.state != "failed" and s is not None and short:
            return self.tr("vLLM {0}: {1} running, {2} waiting, {3} blocks, {4} cached, {5} preempted").format(
                s.step, s.running, s.waiting, s.blocks_in_use, s.prompt_cached, s.preempted)
        return narration.vllm_heading(self.run, step, self.tr)

    def readable_size(self) -> tuple[int, int]:
        """Every request's row a line of text tall under every scheduler, the legend, and room for the
        schedulers' lines and a few dozen slots."""
        fm = self.fontMetrics()
        run = self.run
        schedulers = self.groups()
        n_req = run.n_requests() if schedulers else 0
        width = self.label_width() + fm.averageCharWidth() * 40
        if not schedulers:
            return width, fm.lineSpacing() * 7
        # The schedulers' lines at three digits a count: the need stays put while a run's counts grow.
        width = max([width] + [fm.horizontalAdvance(self.heading(k, (999, 999, 999))) + 8 for k in schedulers
                                if k != VLLM])
        return width, self._chrome(len(schedulers), width) + n_req * len(schedulers) * self.row_min()

    def heading(self, k: str, counts: tuple[int, int, int] | None = None) -> str:
        """The line above a scheduler's block: its wasted slots and its steps (or these counts)."""
        if counts is None:
            counts = (*words.wasted_slots(self.run, k), self.run.n_steps(k))
        return words.timeline_heading(k, counts, self.tr)

    def title(self) -> str:
        return words.timeline_title(self.run if self.run is not None else ServeHistory(), self.tr)

    def help_text(self) -> str:
        return self.tr("A row per request, a column per token slot of each step: what the request's slot did. "
                       "Padding and idle slots are computed and thrown away (static batching). Click a cell to "
                       "select that request and step.")

    def clear(self) -> None:
        self.run = None
        self._images.clear()
        self.update()

    def show_step(self, run: ServeHistory, step: int, request: int | None) -> None:
        if run is not self.run:
            self._images.clear()
        self.run, self.step, self.request = run, step, request
        self.update()

    # -- painting ---------------------------------------------------------------------------------
    def _image(self, scheduler: str) -> QImage:
        timeline = self.timeline_of(scheduler)
        key = (timeline.cells.shape[1], self.cap)
        hit = self._images.get(scheduler)
        if hit is None or hit[0] != key or hit[1].height() != timeline.cells.shape[0]:
            cells = np.ascontiguousarray(timeline.cells)
            h, w = cells.shape
            pad = (-w) % 4  # QImage rows are 32-bit aligned
            data = np.pad(cells, ((0, 0), (0, pad))) if pad else cells
            image = QImage(data.data, w, h, w + pad, QImage.Format.Format_Indexed8).copy()
            image.setColorTable(colors.CELL_TABLE)
            hit = (key, image)
            self._images[scheduler] = hit
        return hit[1]

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt override)
        painter = QPainter(self)
        painter.fillRect(self.rect(), QColor("#ffffff"))
        self.blocks = []
        self.axis = {}
        run = self.run
        if run is None or not run.n_steps():
            painter.setPen(QColor("#8a8a8a"))
            waiting = run is not None and run.vllm is not None
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap,
                             self.vllm_heading(0) if waiting else self.tr("no run yet"))
            return
        fm = painter.fontMetrics()
        line = fm.height() + 2
        schedulers = self.groups()
        n_req = run.n_requests()
        legend_h = self.legend_height(self.width())  # room for the note of a narrowed step, as the need has
        small = self.small_font()
        axis_h = QFontMetrics(small).height() + 3  # the tick and the step numbers under the strip
        room = self.height() - legend_h - (line + MARK_H + 4 + axis_h) * len(schedulers)
        most_px = max(MAX_ROW_PX, self.row_min() + 4)
        with_rows = [k for k in schedulers if k != VLLM or run.vllm.steps]  # vLLM starting or failed: a line only
        row_px = max(1, min(most_px, room // max(1, n_req * len(with_rows))))
        label_w = self.label_width() if row_px >= self.row_min() - 1 else MARK_W
        width = self.width() - label_w - 4
        self.cap = fit_cap([run.step_widths(k) for k in schedulers if k != VLLM] or [np.ones(1, int)], width)
        most = max(self.timeline_of(k).cells.shape[1] for k in schedulers)
        whole = width // max(1, most)
        self.cell_px = (whole, row_px) if whole >= 1 else (0, row_px)
        y = 2
        for k in schedulers:
            timeline = self.timeline_of(k)
            painter.setPen(QColor(colors.scheduler_color(k)))
            heading = self.heading(k) if k != VLLM else self.vllm_heading(self.step) \
                if fm.horizontalAdvance(self.vllm_heading(self.step)) <= self.width() - 4 else \
                self.vllm_heading(self.step, short=True)
            painter.drawText(QRect(2, y, self.width() - 4, line),
                             Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             fm.elidedText(heading, Qt.TextElideMode.ElideRight, self.width() - 4))
            y += line
            cols = timeline.cells.shape[1]
            if not cols:  # vLLM still starting, or failed: its line only
                continue
            cell_w = whole if whole >= 1 else width / max(1, most)
            rect = QRect(label_w + 2, y, max(1, round(cols * cell_w)), n_req * row_px)
            # One cell one colour, enlarged by whole pixels: a painter handed in with smooth scaling (an
            # export's) had blended neighbouring cells into gradients.
            painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, False)
            painter.drawImage(rect, self._image(k))
            self.blocks.append((k, rect, cell_w))
            self._draw_marks(painter, k, rect, cell_w, row_px, small, label_w)
            self._draw_axis(painter, k, rect, cell_w, small, rect.bottom() + 2 + MARK_H + 1, axis_h)
            y += n_req * row_px + MARK_H + 4 + axis_h
        self._draw_legend(painter, QRect(2, self.height() - legend_h, self.width() - 4, legend_h))

    def _draw_marks(self, painter: QPainter, k: str, rect: QRect, cell_w: float, row_px: int, small: QFont,
                    label_w: int) -> None:
        """The lockstep's future faded, the step shown in the strip below, the selected request's label."""
        run = self.run
        timeline = self.timeline_of(k)
        step = run.clamp(k, self.step)
        a, b = timeline.x0[step], timeline.x0[step + 1]
        # Steps after the one shown: faded (the lockstep's future).
        x_end = rect.left() + round(b * cell_w)
        if x_end < rect.right():
            painter.fillRect(QRect(x_end, rect.top(), rect.right() - x_end + 1, rect.height()),
                             QColor(255, 255, 255, 150))
        strip = QRect(rect.left(), rect.bottom() + 2, rect.width(), MARK_H)
        painter.fillRect(strip, QColor("#e0e0e0"))
        painter.fillRect(QRect(rect.left() + round(a * cell_w), strip.top(), max(2, round((b - a) * cell_w)), MARK_H),
                         QColor(colors.SELECTED_EDGE))
        selected = self.request if self.request is not None and self.request < run.n_requests() else None
        if selected is not None:
            painter.fillRect(QRect(0, rect.top() + selected * row_px, label_w - 2, row_px), QColor("#ffd54f"))
        if label_w > MARK_W:
            painter.setFont(small)
            painter.setPen(QColor("#303030"))
            for r in range(run.n_requests()):
                painter.drawText(QRect(0, rect.top() + r * row_px, label_w - 3, row_px),
                                 Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, f"r{r}")
            painter.setFont(self.font())

    def _draw_axis(self, painter: QPainter, k: str, rect: QRect, cell_w: float, small: QFont, top: int,
                   height: int) -> None:
        """Step numbers under the block at the least round interval (1, 2, 5, 10, ...) for which KEEP_SHARE of
        its multiples find room, each centred on its step's columns (kept inside the block) and AXIS_GAP from
        the label before it (a multiple without room is left out: steps are as wide as their slots); a tick at
        each labelled step's first column."""
        x0 = self.timeline_of(k).x0
        n = len(x0) - 1
        fm = QFontMetrics(small)
        for interval in nice_intervals():
            labels, right = [], -10**9
            multiples = self.timeline_of(k).multiples(interval)  # a stretch of idle steps: one
            for step in multiples:
                w = fm.horizontalAdvance(str(step))
                mid = rect.left() + (x0[step] + x0[step + 1]) * cell_w / 2
                left = int(round(min(max(mid - w / 2, rect.left()), rect.right() + 1 - w)))
                if left >= right + 1 + AXIS_GAP:  # else crowded out by the label before it
                    labels.append((step, QRect(left, top + 2, w, height - 2)))
                    right = left + w - 1
            if interval >= n or len(labels) >= KEEP_SHARE * len(multiples):
                break
        painter.setFont(small)
        painter.setPen(QColor("#303030"))
        for step, box in labels:
            a = rect.left() + round(x0[step] * cell_w)
            painter.drawLine(a, top, a, top + 2)
            painter.drawText(box, Qt.AlignmentFlag.AlignCenter, str(step))
        self.axis[k] = labels
        painter.setFont(self.font())

    def _draw_legend(self, painter: QPainter, rect: QRect) -> None:
        fm = painter.fontMetrics()
        box = fm.height() - 4
        line = fm.height() + 2
        for r, entries in enumerate(self.legend_rows(rect.width(), self.cap)):
            x, top = rect.left(), rect.top() + r * line
            for kind, text in entries:
                if not kind:
                    painter.setPen(QColor("#8a8a8a"))
                    painter.drawText(QPoint(x, top + fm.ascent()), text)
                    continue
                painter.fillRect(QRect(x, top + 2, box, box), QColor(colors.CELL_COLORS[kind]))
                painter.setPen(QColor("#9e9e9e"))
                painter.drawRect(QRect(x, top + 2, box, box))
                painter.setPen(QColor("#303030"))
                painter.drawText(QPoint(x + box + 3, top + fm.ascent()), text)
                x += box + 3 + fm.horizontalAdvance(text) + 10

    # -- the mouse --------------------------------------------------------------------------------
    def cell_at(self, pos: QPoint) -> tuple[str, int, int] | None:
        """(scheduler, request, step) under a point of the widget, or None."""
        for k, rect, cell_w in self.blocks:
            if rect.contains(pos):
                row = (pos.y() - rect.top()) // max(1, self.cell_px[1])
                column = int((pos.x() - rect.left()) / cell_w)
                timeline = self.timeline_of(k)
                if 0 <= row < timeline.cells.shape[0] and 0 <= column < timeline.cells.shape[1]:
                    return k, int(row), timeline.step_at(column)
        return None

    def mousePressEvent(self, event) -> None:  # noqa: N802 (Qt override)
        hit = self.cell_at(event.position().toPoint())
        if hit is not None and event.button() == Qt.MouseButton.LeftButton:
            self.cell_picked.emit(hit[1], hit[2])
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event) -> None:  # noqa: N802 (Qt override)
        pos = event.position().toPoint()
        hit = self.cell_at(pos)
        if hit is None:
            QToolTip.hideText()
            return
        k, request, step = hit
        timeline = self.timeline_of(k)
        column = int((pos.x() - next(r for s, r, _c in self.blocks if s == k).left())
                     / next(c for s, _r, c in self.blocks if s == k))
        kind = CELL_KINDS[int(timeline.cells[request, column])]
        QToolTip.showText(event.globalPosition().toPoint(),
                          self.tr("{0}: request {1}, step {2}: {3}").format(k, request, step, kind_name(kind)), self)
