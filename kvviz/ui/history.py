"""The run's recorded steps, kept in the GUI thread: what every panel draws from.

No torch, no Qt: StepTrace records and numpy only, so panels, exports and trace replay share it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kvviz.records import repeats
from kvviz.records.trace import RunInfo, RunSummary, StepTrace, first_divergence


@dataclass
class RunHistory:
    """Traces per engine, appended in step order. `version` bumps on every change (repaint cue)."""

    info: RunInfo = field(default_factory=RunInfo)
    traces: dict[str, list[StepTrace]] = field(default_factory=dict)
    version: int = 0

    def reset(self, info: RunInfo) -> None:
        self.info = info
        self.traces = {k: [] for k in info.engines}
        self.version += 1

    def add(self, trace: StepTrace) -> None:
        if trace.run_id != self.info.run_id:
            return  # a late record of an earlier run
        steps = self.traces.setdefault(trace.engine, [])
        if trace.step != len(steps):
            raise ValueError(f"{trace.engine}: step {trace.step} arrived after {len(steps)} steps")
        steps.append(trace)
        self.version += 1

    @property
    def engines(self) -> tuple[str, ...]:
        return tuple(self.traces)

    def n_steps(self) -> int:
        """Steps recorded by the engine furthest along."""
        return max((len(v) for v in self.traces.values()), default=0)

    def at(self, engine: str, step: int) -> StepTrace | None:
        steps = self.traces.get(engine, [])
        return steps[step] if 0 <= step < len(steps) else None

    def upto(self, engine: str, step: int) -> list[StepTrace]:
        """Steps 0..step of one engine (fewer if it has not got that far)."""
        return self.traces.get(engine, [])[: step + 1]

    def token_ids(self, engine: str, step: int | None = None) -> list[int]:
        steps = self.traces.get(engine, [])
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
