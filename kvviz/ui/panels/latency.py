"""Latency: each engine's step time and its running total, a marker at the selected step.

Reads StepTrace.latency_ms only (measured by the engine with the device synchronised).
"""
from __future__ import annotations

from kvviz.ui.history import RunHistory
from kvviz.ui.panels._series import PlotSpec, SeriesPanel, SeriesSpec


class LatencyPanel(SeriesPanel):
    key = "latency"
    extra_fields = (("decode_ms", lambda t: t.latency_ms if t.phase == "decode" else 0.0),
                    ("decode_steps", lambda t: t.phase == "decode"))

    def plot_specs(self) -> list[PlotSpec]:
        return [
            PlotSpec("step", self.tr("per step"), self.tr("latency"), left_units="ms"),
            PlotSpec("total", self.tr("total so far"), self.tr("time"), left_units="ms", row=1),
        ]

    def series_specs(self) -> list[SeriesSpec]:
        return [
            SeriesSpec("step", "step", "latency_ms"),
            SeriesSpec("total", "total", "latency_ms", cumulative=True),
        ]

    def title(self) -> str:
        return self.tr("Latency")

    def help_text(self) -> str:
        return self.tr(
            "The legend gives each engine's mean decode step. Step 0 is the prefill: one forward over "
            "the whole prompt. After it, naive's step time grows with the sequence because it re-runs "
            "everything, while a cached step feeds one token. On a tiny model Python overhead dominates "
            "the clock, so also look at the work saved (recompute count, bytes): the time gap widens as "
            "sequences and models grow.")

    def legend_text(self, engine: str, history: RunHistory, step: int) -> str:
        if step < 0:
            return engine
        n_decode = self.columns.totals(history, engine, "decode_steps")[step]
        if not n_decode:
            return engine
        ms = self.columns.totals(history, engine, "decode_ms")[step] / n_decode
        return self.tr("{engine}: {ms:.2f} ms/step").format(engine=engine, ms=ms)
