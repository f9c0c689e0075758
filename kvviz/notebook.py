"""kvviz in a notebook: `compare` runs the engines in this process (the app's EngineSession, no Qt) and
returns the saved run; `show` draws a saved run as the interactive page (kvviz.page) in the cell.

No Qt, no window: the same engines, records and page as the app. torch is imported by `compare` only.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kvviz import catalog
from kvviz.kernels import DEFAULT_KERNEL
from kvviz.records.trace import RunInfo, RunSummary, StepTrace

DEFAULT_ENGINES = catalog.DEFAULT_ENGINES
BATCH_S = 60.0  # the seconds of steps each engine runs back to back before the next engine's


@dataclass
class Run:
    """A compare run: its RunInfo and each engine's StepTrace records, as a saved trace holds them. In a
    notebook it draws itself as the page; `save` writes the trace JSON (File > Open trace replays it)."""

    info: RunInfo
    traces: dict[str, list[StepTrace]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what the session said about the run (attention weights left out, ...)

    @property
    def engines(self) -> tuple[str, ...]:
        return tuple(self.traces)

    @property
    def n_steps(self) -> int:
        return max((len(v) for v in self.traces.values()), default=0)

    def summaries(self) -> dict[str, RunSummary]:
        return {k: RunSummary.from_traces(v) for k, v in self.traces.items() if v}

    def tokens(self, engine: str | None = None) -> list[int]:
        """The token ids an engine generated (default: the first)."""
        return [t.token_id for t in self.traces[engine or self.engines[0]]]

    def page(self, **kwargs) -> str:
        """The interactive page as text (kvviz.page.build_page's keywords: step, first, last, lang)."""
        from kvviz.page import build_page

        return build_page(self.info, self.traces, **kwargs)

    def save(self, path: str | Path) -> Path:
        from kvviz.records import traceio

        return traceio.save_run(path, self.info, self.traces)

    def save_html(self, path: str | Path, **kwargs) -> Path:
        from kvviz.page import write_page

        return write_page(path, self.info, self.traces, **kwargs)

    def _repr_html_(self) -> str:
        from kvviz.page import iframe_html

        return iframe_html(self.page(embedded=True))

    def __repr__(self) -> str:
        return (f"Run({self.info.model_name!r}, {', '.join(self.engines)}: {self.n_steps} steps, "
                f"run_id {self.info.run_id!r})")


def as_run(saved) -> Run:
    """A Run from a Run, a traceio.SavedRun, a (info, traces) pair or a path to a trace JSON; ValueError (one
    line) for anything else."""
    if isinstance(saved, Run):
        return saved
    if isinstance(saved, (str, Path)):
        from kvviz.records import traceio

        saved = traceio.load_run(saved)
    if not (isinstance(saved, tuple) and len(saved) == 2 and isinstance(saved[0], RunInfo)
            and isinstance(saved[1], dict)):
        raise ValueError(f"saved must be a Run, a saved run, an (info, traces) pair or a trace file's path, "
                         f"not {type(saved).__name__}")
    info, traces = saved
    return Run(info, {k: list(v) for k, v in traces.items()})


def compare(prompt: str, engines: Iterable[str] = DEFAULT_ENGINES, tokens: int = 40, *, model: str = "tiny",
            device: str = "auto", dtype: str = "auto", block_size: int = 16, window: int = 32, sinks: int = 4,
            residual: int | None = None, layer: int | None = 0, head: int = 0, temperature: float = 0.0,
            seed: int = 0, threads: int | None = None, kernel: str = DEFAULT_KERNEL,
            kernels: Iterable[str] | None = None, repeat: int = 1) -> Run:
    """Run the engines on `prompt` in lockstep, `tokens` new tokens each, in this process, and return the
    run. `layer`/`head`: the attention weights recorded (None: none). `kernel`: what runs every engine's
    decode steps (kvviz.kernels: torch, native, openblas, compiled, cuda-graph); `kernels`: a kernel comparison
    instead, every engine under each ("static@torch", "static@native": the run's lanes, kvviz.kernels.lanes).
    `repeat`: the comparison run that many times, the earlier runs' step times in the run's info
    (kvviz.records.repeats). ValueError (one line, naming the argument) for what a run refuses."""
    from kvviz.config import RunConfig, SamplingConfig, TraceOptions
    from kvviz.kernels import check_kernel, lanes
    from kvviz.options import check_value
    from kvviz.runtime.messages import RunRequest
    from kvviz.runtime.session import EngineSession

    if not isinstance(prompt, str):
        raise ValueError(f"prompt must be text (str), not {type(prompt).__name__}")
    engines = (engines,) if isinstance(engines, str) else engines
    if not isinstance(engines, Iterable) or not all(isinstance(e, str) for e in engines):
        raise ValueError(f"engines must be engine names, e.g. {DEFAULT_ENGINES}, not {engines!r:.80}")
    for name, value in (("tokens", tokens), ("block_size", block_size), ("window", window), ("sinks", sinks),
                        ("seed", seed), ("temperature", temperature), ("head", head)):
        check_value(name, value, name)
    for name, value in (("residual", residual), ("threads", threads), ("layer", layer)):
        if value is not None:
            check_value(name, value, name)
    if not isinstance(kernel, str):
        raise ValueError(f"kernel must be a kernel's name, not {type(kernel).__name__}")
    check_kernel(kernel)
    if kernels is not None:
        kernels = (kernels,) if isinstance(kernels, str) else kernels
        if not isinstance(kernels, Iterable) or not all(isinstance(k, str) for k in kernels):
            raise ValueError(f"kernels must be kernel names, e.g. ('torch', 'native'), not {kernels!r:.80}")
        kernels = tuple(kernels)
        engines, kernel = lanes(tuple(engines), kernels), kernels[0] if kernels else kernel
    check_value("repeat", repeat, "repeat")
    run = RunConfig(prompt=prompt, max_new_tokens=tokens, engines=tuple(engines),
                    sampling=SamplingConfig(temperature=temperature, seed=seed), block_size=block_size,
                    window=window, sinks=sinks, residual=residual, kernel=kernel,
                    trace=TraceOptions(masks=True, weights_layer=layer, weights_head=head))
    session = EngineSession()
    try:
        started = session.start(RunRequest(run_id=uuid.uuid4().hex[:8], model=model, run=run, device=device,
                                           dtype=dtype, threads=threads, repeat=repeat))
        info, notes = started.info, started.notes
        traces: dict[str, list[StepTrace]] = {k: [] for k in info.engines}
        done = 0
        while done < tokens:  # in batches, each engine's steps back to back, as the bench and the window run them
            batch = session.rounds(tokens - done, budget_s=BATCH_S)
            for step in batch:
                for trace in step:
                    traces[trace.engine].append(trace)
            done += len(batch)
    finally:
        session.close()
    return Run(info, traces, tuple(notes))


def show(saved, *, step: int | None = None, lang: str = "en", height: int = 980):
    """Draw a saved run (a Run, a SavedRun, (info, traces) or a trace path) in the notebook cell: the page in
    an iframe. Returns an IPython HTML object where IPython is present, else the HTML text."""
    from kvviz.page import iframe_html

    page = as_run(saved).page(step=step, lang=lang, embedded=True)
    text = iframe_html(page, height)
    try:
        from IPython.display import HTML
    except ImportError:
        return text
    return HTML(text)


def summary_table(saved) -> list[dict]:
    """The summary's rows (kvviz.records.traceio.summary_rows) of a saved run, for a DataFrame or a print."""
    from kvviz.records import traceio

    run = as_run(saved)
    return traceio.summary_rows(run.traces, run.info)


__all__ = ["Run", "as_run", "compare", "show", "summary_table", "DEFAULT_ENGINES"]
