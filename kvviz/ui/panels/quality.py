"""Quality beside cost: how far each engine's next-token distribution is from the exact cache's.

Reads StepTrace.kl_to_exact and top1_agrees (kvviz.measure.quality: teacher-forced on the exact engine's
tokens, so the figures stay comparable after the free-running outputs part) and the token ids (the
step where an engine's own output first parts from the first exact engine's). An exact engine scores 0;
a step not measured (no exact engine in the run) is a gap.
"""
from __future__ import annotations

import math

from kvviz import catalog
from kvviz.page.said import Engine
from kvviz.page.said_compare import quality_legend
from kvviz.ui.history import RunHistory
from kvviz.ui.panels._series import PlotSpec, SeriesPanel, SeriesSpec
from kvviz.ui.panels.base import said_text


def _kl(t) -> float:
    if t.kl_to_exact is not None:
        return t.kl_to_exact
    return 0.0 if catalog.is_exact(t.engine) else math.nan  # an exact engine is the reference itself


def _misses(t) -> float:
    return 1.0 if t.top1_agrees is False else 0.0


class QualityPanel(SeriesPanel):
    key = "quality"
    extra_fields = (("top1_measured", lambda t: t.top1_agrees is not None or catalog.is_exact(t.engine)),)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.columns.getters.update(kl=_kl, misses=_misses)  # computed series, as LatencyPanel's read_gbps

    priority = 35

    def plot_specs(self) -> list[PlotSpec]:
        return [
            PlotSpec("kl", self.tr("KL(exact || engine) per step"), self.tr("KL"), left_units="nats"),
            PlotSpec("misses", self.tr("top-1 disagreements so far"), self.tr("steps"), row=1),
        ]

    def series_specs(self) -> list[SeriesSpec]:
        return [
            SeriesSpec("kl", "kl", "kl"),
            SeriesSpec("misses", "misses", "misses", cumulative=True),
        ]

    def title(self) -> str:
        return self.tr("Quality")

    def help_text(self) -> str:
        return self.tr(
            "What an approximate cache costs in output quality. Each step, the engine is fed the exact "
            "engine's tokens (teacher forcing) and its next-token distribution is compared with the exact "
            "one: KL divergence in nats (0: the same distribution) and whether its most likely token is the "
            "same. Exact caches (naive, concat, static, paged) score 0 by construction. window and sinks "
            "drop old tokens, int8 rounds K and V; the legend also gives the step where the engine's own "
            "output first differs.")

    def legend_text(self, engine: str, history: RunHistory, step: int) -> str:
        kl = self.columns.values(history, engine, "kl")[: step + 1]
        seen = int(self.columns.totals(history, engine, "top1_measured")[step])
        misses = int(self.columns.totals(history, engine, "misses")[step])
        return said_text(quality_legend(Engine(engine, 0), kl, seen, misses, self._parted(history, engine), step))

    @staticmethod
    def _parted(history: RunHistory, engine: str) -> int | None:
        """First step where the engine's own tokens differ from the first exact engine's."""
        ref = next((e for e in history.traces if catalog.is_exact(e)), None)
        if ref is None or ref == engine:
            return None
        for a, b in zip(history.traces[ref], history.traces[engine]):
            if a.token_id != b.token_id:
                return a.step
        return None
