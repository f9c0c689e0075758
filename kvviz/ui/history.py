"""The run's recorded steps, kept in the GUI thread: what every panel draws from.

No torch, no Qt: StepTrace records and numpy only, so panels, exports and trace replay share it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kvviz.trace import RunSummary, StepTrace, first_divergence
from kvviz.wall import WallShape


@dataclass
class RunInfo:
    """What the window knows about a run besides its steps (all derived from the model's config)."""

    run_id: str = ""
    model_name: str = ""
    device: str = ""
    dtype: str = ""
    prompt: str = ""
    prompt_ids: tuple[int, ...] = ()
    prompt_labels: tuple[str, ...] = ()  # one display label per prompt token
    engines: tuple[str, ...] = ()
    max_new_tokens: int = 0
    n_layer: int = 0
    n_head: int = 0
    n_kv_head: int = 0
    head_dim: int = 0
    param_count: int = 0
    kv_bytes_per_token: int = 0
    block_size: int = 16
    # W, S, R of the approximate caches the run asked for (0: not set; each step records its own too)
    window: int = 0
    sinks: int = 0
    residual: int = 0
    # The memory wall (kvviz.wall, kvviz.bandwidth); zero where unknown, as in traces saved before them.
    weights_read_bytes: int = 0  # read whole by every forward: every matrix once
    embed_row_bytes: int = 0  # embedding rows looked up per computed position
    copy_gbps: float = 0.0  # copy bandwidth (read + written) of the machine and device that ran it
    peak_gbps: float = 0.0  # the device's nominal peak, where it reports one (CUDA)

    def wall(self) -> WallShape | None:
        """The figures a step's bytes read are built from, or None where the run did not record them."""
        shape = WallShape(self.weights_read_bytes, self.embed_row_bytes, self.kv_bytes_per_token)
        return shape if shape.known and self.embed_row_bytes >= 0 else None

    def bandwidth_gbps(self) -> float | None:
        """The recorded copy bandwidth, or None where it is missing or no measurement's (0, NaN, inf)."""
        value = self.copy_gbps
        return value if isinstance(value, (int, float)) and 0 < value < float("inf") else None


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
