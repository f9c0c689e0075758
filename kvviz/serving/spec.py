"""What the serve form asks for: the workload's requests, the schedulers and the sizes, as a frozen
ServeSpec the worker turns into the library's Workload and scheduler options.

No Qt, no torch: the presets come from kvviz.serving.workload (stdlib only).
"""
from __future__ import annotations

from dataclasses import dataclass

from kvviz import catalog
from kvviz.serving import workload as _workload

SCHEDULERS = catalog.scheduler_keys()
PRESETS = ("course-batch", "shared-prefix", "chat", "random")  # "random" takes its N from the form


@dataclass(frozen=True)
class WorkRequest:
    """One row of the workload table."""

    prompt: str
    new_tokens: int
    arrival: int = 0


@dataclass(frozen=True)
class ServeSpec:
    """One serve run as the form describes it; the worker validates it again against the model."""

    model: str
    requests: tuple[WorkRequest, ...]
    schedulers: tuple[str, ...]
    max_batch: int = 8
    blocks: int = 32
    token_budget: int = 64
    block_size: int = 16
    name: str = "workload"  # the preset it came from, or "workload" once edited
    run_id: str = ""
    start_paused: bool = False
    steps_per_s: float = 0.0  # 0: as fast as possible

    def workload(self) -> _workload.Workload:
        """The library's Workload of these rows (ValueError, one line, for a bad row)."""
        return _workload.Workload(self.name, tuple(
            _workload.Request(prompt=r.prompt, new_tokens=r.new_tokens, arrival=r.arrival) for r in self.requests))


def preset_requests(name: str) -> list[WorkRequest]:
    """The rows of a preset (`random:N` included)."""
    found = _workload.preset(name)
    if found is None:
        raise ValueError(f"no preset {name!r}")
    return [WorkRequest(r.prompt, r.new_tokens, r.arrival) for r in found.requests]
