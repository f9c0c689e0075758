"""What the window, the run worker and the engine process tell each other besides StepTrace: frozen records only.

Stdlib and kvviz.config only: no torch, no Qt, no engines. The window learns the model presets,
devices and engines from an Environment the worker lists in its own thread (so `import torch`
never delays the window), and asks for a run with a RunRequest; the engine process
(kvviz.runtime.process) answers the requests below with these records.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvviz.config import ModelConfig, RunConfig
from kvviz.runtime.process import Request

if TYPE_CHECKING:
    from kvviz.records.trace import RunInfo


@dataclass(frozen=True)
class ModelChoice:
    """One entry of the model picker. `config` is None for a checkpoint not read yet."""

    name: str  # a preset name or a folder path
    description: str = ""
    config: ModelConfig | None = None
    warning: str = ""
    available: bool = True
    reason: str = ""  # why it is not available


@dataclass(frozen=True)
class Environment:
    """What this machine and this kvviz offer, listed once by the worker after torch is imported."""

    models: tuple[ModelChoice, ...]
    default_model: str
    devices: tuple[str, ...]  # "auto" first, then what is present: "cpu", "cuda", "cuda:1", "mps"
    auto_device: str  # what "auto" resolves to here
    engines: tuple[tuple[str, str], ...]  # (key, one-line help), registry order
    torch_version: str = ""
    threads: int = 1
    cached_models: tuple[ModelChoice, ...] = ()  # hub checkpoints found in the caches, openable or not


@dataclass(frozen=True)
class RunRequest:
    """One compare run as the form describes it; the worker loads the model and validates again."""

    run_id: str
    model: str
    run: RunConfig
    device: str = "auto"
    dtype: str = "auto"
    steps_per_s: float = 0.0  # 0: as fast as possible
    start_paused: bool = False  # Step from idle: run one lockstep round, then wait
    threads: int | None = None  # torch CPU threads; None leaves torch's choice
    repeat: int = 1  # the comparison run this many times: the summary gives medians (kvviz.records.repeats)


def cached_choices(entries) -> tuple[ModelChoice, ...]:
    """Model-box entries for the checkpoints kvviz.models.hub.list_cached_models found: the id as the name,
    where it is and its size as the description, and for one kvviz cannot open, the reason it gives."""
    from kvviz.format import fmt_bytes

    return tuple(ModelChoice(name=e.model_id, description=f"{e.source}: {e.folder} ({fmt_bytes(e.size_bytes)})",
                             config=e.config if isinstance(e.config, ModelConfig) else None,
                             available=e.openable, reason=f"{e.model_id}: {e.problem}" if e.problem else "")
                 for e in entries)


@dataclass(frozen=True)
class RunStarted:
    """A run set up: its info, the model's choice when it was (re)loaded, notes for the window."""

    info: RunInfo
    loaded: ModelChoice | None
    notes: tuple[str, ...]


# -- the requests an EngineSession answers in the engine process (kvviz.runtime.process.Request) --------------
@dataclass(frozen=True)
class ListEnvironment(Request):
    def apply(self, session) -> Environment:
        return session.environment()


@dataclass(frozen=True)
class StartRun(Request):
    request: RunRequest

    def apply(self, session) -> RunStarted:
        return session.start(self.request)


@dataclass(frozen=True)
class NextRound(Request):
    """Step k of every engine (a list of StepTrace)."""

    def apply(self, session) -> list:
        return session.round()


@dataclass(frozen=True)
class Rounds(Request):
    """A batch of lockstep rounds (EngineSession.rounds): a list of rounds, each a list of StepTrace."""

    most: int
    budget_s: float = 0.0

    def apply(self, session) -> list:
        return session.rounds(self.most, self.budget_s)
