"""Bytes moved by cache maintenance (copied) and to feed attention (gathered), per step and in total.

Reads StepTrace.bytes_copied and bytes_gathered only.
"""
from __future__ import annotations

from kvviz.page.said import Engine
from kvviz.page.said_compare import bytes_legend
from kvviz.ui import style
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._series import PlotSpec, SeriesPanel, SeriesSpec
from kvviz.ui.panels.base import said_text


class BytesPanel(SeriesPanel):
    key = "bytes"

    priority = 70

    def plot_specs(self) -> list[PlotSpec]:
        return [
            PlotSpec("step", self.tr("per step (dashed: gathered)"), self.tr("bytes"), byte_units=True),
            PlotSpec("total", self.tr("total so far"), self.tr("bytes"), byte_units=True, row=1),
        ]

    def series_specs(self) -> list[SeriesSpec]:
        return [
            SeriesSpec("copied", "step", "bytes_copied"),
            SeriesSpec("copied_total", "total", "bytes_copied", cumulative=True),
            SeriesSpec("gathered", "step", "bytes_gathered", dashed=True),
            SeriesSpec("gathered_total", "total", "bytes_gathered", cumulative=True, dashed=True),
        ]

    def title(self) -> str:
        return self.tr("Bytes copied")

    def help_text(self) -> str:
        return self.tr(
            "The chapter's torch.cat cache copies the whole history into a new tensor every step: O(k) "
            "bytes at step k, O(n\u00b2) over a generation (the total curves upward). A static cache is "
            "preallocated and a paged cache takes fixed-size blocks; both write the new token in place "
            "and copy nothing. Dashed: bytes gathered only to feed attention (the paged blocks copied "
            "into one contiguous tensor; a fused paged-attention kernel would read them in place).")

    def legend_text(self, engine: str, history: RunHistory, step: int) -> str:
        copied = int(self.columns.totals(history, engine, "bytes_copied")[step])
        gathered = int(self.columns.totals(history, engine, "bytes_gathered")[step])
        return said_text(bytes_legend(Engine(style.engine_label(engine), 0), copied, gathered))
