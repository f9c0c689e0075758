"""Attention weights of the recorded layer and head at the selected step, one engine at a time.

A cached engine records only the rows it computed each step, so its matrix is accumulated from the
earlier steps' rows: the lower triangle fills in as decode goes on. The selected step's rows are
outlined. Reads StepTrace.attn_weights only.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QComboBox, QGraphicsRectItem, QHBoxLayout, QLabel, QVBoxLayout

from kvviz.trace import StepTrace
from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._plots import canvas, engine_step, sequence_labels, set_token_ticks
from kvviz.ui.panels.base import Panel

# Background behind the weights (which are NaN where there is nothing to show).
_BG_NONE, _BG_MASKED = 0, 1
_BG_LUT = style.lookup_table([style.CELL_COLORS["empty"], style.CELL_COLORS["masked"]])


def accumulate(traces: list[StepTrace]) -> tuple[np.ndarray, np.ndarray]:
    """(weights float32 [n, n] with NaN where unknown or masked, filled bool [n]) from steps 0..last.

    Each row comes from the latest step that computed it; n is the last step's sequence length.
    """
    last = traces[-1]
    n = last.pos_stop
    out = np.full((n, n), np.nan, dtype=np.float32)
    filled = np.zeros(n, dtype=bool)
    for trace in reversed(traces):
        w = trace.attn_weights
        if w is None:
            continue
        a, b = trace.pos_start, trace.pos_stop
        rows = np.arange(a, b)
        new = ~filled[a:b]
        if not new.any():
            continue
        kv = min(w.shape[1], n)
        block = w[: b - a, :kv].astype(np.float32, copy=True)
        mask = trace.mask
        if mask is not None and mask.shape == w.shape:
            block[~mask[:, :kv]] = np.nan
        out[rows[new], :kv] = block[new]
        filled[a:b] = True
        if filled.all():
            break
    return out, filled


class AttentionPanel(Panel):
    key = "attention"

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._engine_box = QComboBox()
        self._engine_box.setToolTip(self.tr("Which engine's recorded weights to show"))
        self._engine_box.currentTextChanged.connect(self._on_engine_changed)
        self._caption = QLabel()
        self._caption.setStyleSheet(f"color: {style.MUTED_TEXT}")
        self._caption.setWordWrap(True)
        top = QHBoxLayout()
        top.addWidget(QLabel(self.tr("Engine:")))
        top.addWidget(self._engine_box)
        top.addWidget(self._caption, 1)

        self._canvas = canvas()
        self._plot = self._canvas.addPlot()
        self._plot.hideButtons()
        self._plot.setMenuEnabled(False)
        self._plot.invertY(True)
        self._plot.setAspectLocked(True)
        self._plot.getViewBox().setDefaultPadding(0.0)
        style.style_plot(self._plot, left=self.tr("query position"), bottom=self.tr("key position"))
        self._plot.showGrid(x=False, y=False)
        self._background = pg.ImageItem(axisOrder="row-major")
        self._image = pg.ImageItem(axisOrder="row-major")
        self._plot.addItem(self._background)
        self._plot.addItem(self._image)
        self._outline = QGraphicsRectItem()
        self._outline.setPen(pg.mkPen("#d62728", width=2, cosmetic=True))
        self._outline.setZValue(20)
        self._plot.addItem(self._outline, ignoreBounds=True)
        self._colorbar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=pg.colormap.get("viridis"),
                                         interactive=False, width=14, label=self.tr("weight"))
        self._colorbar.setImageItem(self._image, insert_in=self._plot)
        self._colorbar.axis.setTickFont(style.tick_font())
        self._plot.getViewBox().sigResized.connect(self._refresh_ticks)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(top)
        layout.addWidget(self._canvas, 1)
        self._history: RunHistory | None = None
        self._step = 0
        self._labels: list[str] = []
        self._weights = np.zeros((0, 0), dtype=np.float32)
        self._engine = ""
        self.setToolTip(self.help_text())

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
        self._weights = np.zeros((0, 0), dtype=np.float32)
        self._engine_box.blockSignals(True)
        self._engine_box.clear()
        self._engine_box.blockSignals(False)
        self._image.clear()
        self._background.clear()
        self._outline.hide()
        self._plot.setTitle("")
        self._caption.setText("")

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
            self._background.clear()
            self._outline.hide()
            self._caption.setText(self.tr("No attention weights recorded in this run."))
            return
        self._engine = engine
        k = engine_step(history, engine, step)
        traces = history.upto(engine, k)
        current = traces[-1]
        weights, filled = accumulate(traces)
        self._weights = weights
        n = weights.shape[0]
        rows = np.arange(n)[:, None]
        background = np.where(np.arange(n)[None, :] > rows, _BG_MASKED, _BG_NONE).astype(np.uint8)
        self._background.setImage(background, autoLevels=False, levels=None, lut=_BG_LUT)
        self._background.setRect(0, 0, n, n)
        top = float(np.nanmax(weights)) if filled.any() else 1.0
        self._image.setImage(weights, autoLevels=False, levels=(0.0, max(top, 1e-6)))
        self._image.setRect(0, 0, n, n)
        self._colorbar.setLevels((0.0, max(top, 1e-6)))
        self._outline.setRect(QRectF(0, current.pos_start, n, current.pos_stop - current.pos_start))
        self._outline.show()
        order = list(history.engines).index(engine)
        layer, head = current.weights_layer, current.weights_head
        self._plot.setTitle(
            f'<span style="color:{style.engine_color(engine, order)}; font-weight:bold">{engine}</span>'
            f'<span style="color:{style.PLOT_FOREGROUND}"> &nbsp;'
            + self.tr("layer {layer}, head {head}, step {step}").format(layer=layer, head=head, step=k)
            + "</span>", size=style.TITLE_SIZE)
        earlier = int(filled[: current.pos_start].sum())
        if earlier:
            self._caption.setText(self.tr(
                "Outlined: the {rows} row(s) computed at this step. The {earlier} rows above were "
                "computed at earlier steps.").format(rows=current.pos_stop - current.pos_start, earlier=earlier))
        else:
            self._caption.setText(self.tr("Outlined: the {rows} row(s) computed at this step.").format(
                rows=current.pos_stop - current.pos_start))
        self._labels = sequence_labels(history, engine, n)
        self._refresh_ticks()

    def _refresh_ticks(self, *_args) -> None:
        set_token_ticks(self._plot, self._labels)

    def export_items(self) -> list:
        return [self._plot]
