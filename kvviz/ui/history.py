"""The compare view's history: each engine's StepTrace records (kvviz.records.history.History, lanes keyed by
engine) under the run's RunInfo, and the comparisons the panels read of them (divergence, summaries, repeats).

No torch, no Qt: StepTrace records and numpy only, so panels, exports and trace replay share it.
"""
from __future__ import annotations

from kvviz.records import repeats
from kvviz.records.history import History
from kvviz.records.trace import RunInfo, RunSummary, StepTrace, first_divergence


class RunHistory(History[StepTrace]):
    """Traces per engine, appended in step order, of the run `info` describes."""

    def __init__(self, info: RunInfo | None = None, traces: dict[str, list[StepTrace]] | None = None) -> None:
        super().__init__(traces)
        self.info = info if info is not None else RunInfo()

    @property
    def info(self) -> RunInfo:
        return self._info

    @info.setter
    def info(self, info: RunInfo) -> None:
        self._info = info
        self.run_id = info.run_id

    def reset(self, info: RunInfo) -> None:
        """Empty lanes for the run `info` describes."""
        super().reset(info.run_id, info.engines)
        self.info = info

    def lane_of(self, trace: StepTrace) -> str:
        return trace.engine

    @property
    def traces(self) -> dict[str, list[StepTrace]]:
        return self._lanes

    @property
    def engines(self) -> tuple[str, ...]:
        return self.lanes

    def token_ids(self, engine: str, step: int | None = None) -> list[int]:
        steps = self.lane(engine)
        return [t.token_id for t in (steps if step is None else steps[: step + 1])]

    def divergence(self) -> int | None:
        """First step at which the engines' tokens differ so far, else None."""
        return first_divergence(self.token_ids(k) for k in self.traces if self.traces[k])

    def summaries(self) -> dict[str, RunSummary]:
        return {k: RunSummary.from_traces(v) for k, v in self.traces.items() if v}

    @property
    def repeat(self) -> int:
        """How many times the run's comparison ran (kvviz.records.repeats; 1: once)."""
        return self.info.repeat

    def totals(self, engine: str, step: int) -> list[float]:
        """The engine's total time over steps 0..step in each run of a repeated comparison, the shown run last
        (one total for a run made once)."""
        return repeats.totals_upto(self.info, engine, [t.latency_ms for t in self.upto(engine, step)], step)
