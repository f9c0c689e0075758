"""Small pieces the panels share: a white plot canvas, a byte-unit axis, a legend row, token labels.

Qt, pyqtgraph and numpy only; nothing here knows what a trace is beyond RunHistory's accessors.
"""
from __future__ import annotations

import html
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

from kvviz.bench import fmt_bytes
from kvviz.ui import style
from kvviz.ui.history import RunHistory

__all__ = ["BytesAxis", "fmt_bytes", "canvas", "legend_row", "set_legend", "token_label", "engine_step",
           "step_line", "new_legend"]

_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1))


def canvas() -> pg.GraphicsLayoutWidget:
    """A GraphicsLayoutWidget on the house background."""
    widget = pg.GraphicsLayoutWidget()
    widget.setBackground(style.PLOT_BACKGROUND)
    widget.ci.setContentsMargins(4, 4, 4, 4)
    return widget


class BytesAxis(pg.AxisItem):
    """Tick labels in B / KiB / MiB / GiB (binary units, as the cache figures are), linear or log."""

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph override)
        if self.logMode:
            # Log mode hands us log10 values; label whole decades only, as pyqtgraph does.
            out = []
            for v in values:
                if abs(v - round(v)) < 1e-6:
                    out.append(_short_bytes(10.0 ** round(v)))
                else:
                    out.append("")
            return out
        top = max((abs(v * scale) for v in values), default=0.0)
        unit, size = next(((u, s) for u, s in _UNITS if top >= s), ("B", 1))
        step = spacing * scale / size
        places = 0 if step >= 1 else min(3, math.ceil(-math.log10(step)))
        return [f"{v * scale / size:.{places}f} {unit}" if v else "0" for v in values]


def _short_bytes(n: float) -> str:
    for unit, size in _UNITS:
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) else f"{value:.1f} {unit}"
    return f"{n:g} B"


def legend_row(entries: list[tuple[str, str]], *, dashed: set[str] = frozenset()) -> QLabel:
    """A one-line legend of coloured swatches: entries are (colour, label)."""
    label = QLabel()
    label.setTextFormat(Qt.TextFormat.RichText)
    set_legend(label, entries, dashed=dashed)
    return label


def set_legend(label: QLabel, entries: list[tuple[str, str]], *, dashed: set[str] = frozenset()) -> None:
    items = [style.swatch_html(color, html.escape(text), dashed=text in dashed) for color, text in entries]
    label.setText("&nbsp;&nbsp;&nbsp;".join(items))


def new_legend(plot: pg.PlotItem) -> pg.LegendItem:
    """An in-plot legend, top left, readable on the white canvas."""
    legend = plot.addLegend(offset=(8, 8), labelTextColor=style.PLOT_FOREGROUND, labelTextSize="9pt")
    legend.setBrush(pg.mkBrush(255, 255, 255, 210))
    legend.setPen(pg.mkPen("#c8c8c8"))
    return legend


def step_line(plot: pg.PlotItem) -> pg.InfiniteLine:
    """The vertical marker at the selected step."""
    line = pg.InfiniteLine(angle=90, movable=False,
                           pen=pg.mkPen(style.STEP_LINE, width=1, style=Qt.PenStyle.DashLine))
    line.setZValue(50)
    line.hide()
    plot.addItem(line, ignoreBounds=True)
    return line


def token_label(text: str, limit: int = 6) -> str:
    """A token as an axis label: visible whitespace, short."""
    shown = (text.replace(" ", "\u2423").replace("\n", "\u21b5").replace("\t", "\u21e5")
             .replace("\r", "\u240d"))
    shown = "".join(ch if ch.isprintable() else "\u00b7" for ch in shown) or "\u2205"
    return shown if len(shown) <= limit else shown[: limit - 1] + "\u2026"


def engine_step(history: RunHistory, engine: str, step: int) -> int:
    """The step to show for one engine: the selected one, clamped to what the engine has recorded."""
    n = len(history.traces.get(engine, []))
    return min(step, n - 1) if n else -1


def sequence_labels(history: RunHistory, engine: str, n: int) -> list[str]:
    """Labels of positions 0..n-1: the prompt's, then the tokens the engine generated."""
    prompt = list(history.info.prompt_labels) or [str(i) for i in history.info.prompt_ids]
    labels = prompt[:n]
    for trace in history.traces.get(engine, []):
        if len(labels) >= n:
            break
        labels.append(trace.token_text)
    labels += [""] * (n - len(labels))
    return labels


def series(history: RunHistory, engine: str, field: str) -> np.ndarray:
    """One StepTrace field over an engine's recorded steps, as float64."""
    return np.fromiter((getattr(t, field) for t in history.traces.get(engine, [])), dtype=np.float64)
