"""The one record that crosses the thread: StepTrace (one per engine step) and RunSummary.

Stdlib and numpy only: no torch, no Qt. Engines build these; the worker forwards them; panels,
exports and the bench read them. Arrays here are owned by the record (no one else holds them).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import MISSING, dataclass, field, fields

import numpy as np

from kvviz.costs.wall import WallShape

PHASES = ("prefill", "decode")


def _one_update_init(cls):
    """Give a frozen dataclass an __init__ that fills the instance's __dict__ in one update.

    The generated one sets each field through object.__setattr__: 33 calls for StepTrace, 10.7 us
    against 3 us on the 2-core test machine, a quarter of what an engine adds to a step beyond the
    model (`kvviz bench --reference`). Same signature (positional or keyword), defaults and
    __post_init__; still frozen. MaskSpec, built every forward, takes it too."""
    params, names = [], []
    defaults = {}
    for f in fields(cls):
        if f.default_factory is not MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: a default factory needs the generated __init__")
        names.append(f.name)
        if f.default is MISSING:
            params.append(f.name)
        else:
            defaults[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
    body = ", ".join(f"{n}={n}" for n in names)
    src = (f"def __init__(self, {', '.join(params)}):\n"
           f"    self.__dict__.update({body})\n"
           f"    self.__post_init__()\n")
    scope = dict(defaults)
    exec(src, scope)  # as dataclasses itself builds __init__
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init
    every = frozenset(names)
    # The fields only some engines fill (the class's OMITTABLE, the speculative ones'): a dict may leave all
    # of them out and gets their defaults
    omittable = {n: defaults[f"_d_{n}"] for n in getattr(cls, "OMITTABLE", ())}
    rest = every - omittable.keys()

    def of(values: dict):
        """An instance from a dict that names every field, checked as __init__ checks it, without binding
        some thirty keyword arguments: 0.5 us against 2-3 (an engine builds one a step, and a tiny model's
        native decode step is 0.1 ms, held to 5% by `kvviz bench --reference`)."""
        obj = object.__new__(cls)
        keys = values.keys()
        if keys != every:
            if keys != rest:
                raise TypeError(f"{cls.__name__}: fields {sorted(every ^ keys)} missing or unknown")
            obj.__dict__.update(omittable)
        obj.__dict__.update(values)
        obj.__post_init__()
        return obj

    cls.of = staticmethod(of)
    return cls


@_one_update_init
@dataclass(frozen=True)
class MaskSpec:
    """The causal mask attention applied: `q_len` query rows over `kv_len` keys, offset by `past_len`.

    Row i may see columns 0 .. past_len + i (the chapter's rule). The model builds its mask from this
    record, so the array returned by `to_numpy()` is exactly what attention used; keeping the three
    integers instead of the matrix keeps a 2048-step naive run from holding gigabytes of masks.
    """

    q_len: int
    kv_len: int
    past_len: int
    # A bounded cache's rule (window / sinks caches): a query at position i also needs j > i - window,
    # unless j is one of the first `sinks` positions. None: the chapter's mask, nothing evicted.
    window: int | None = None
    sinks: int = 0
    # A cache that keeps chosen positions (tova, h2o, knorm): the positions before past_len it still holds, in
    # order. None: every one, or the window's rule.
    held: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.past_len + self.q_len != self.kv_len:
            raise ValueError(f"mask: past_len {self.past_len} + q_len {self.q_len} != kv_len {self.kv_len}")
        if self.window is not None and (self.window < 1 or self.sinks < 0):
            raise ValueError(f"mask: window {self.window} must be >= 1 and sinks {self.sinks} >= 0")

    def to_numpy(self) -> np.ndarray:
        """Bool [q_len, kv_len] over absolute positions: True where query row i may attend to key j."""
        rows = np.arange(self.q_len)[:, None] + self.past_len
        cols = np.arange(self.kv_len)[None, :]
        allowed = cols <= rows
        if self.window is not None:
            allowed &= (rows - cols < self.window) | (cols < self.sinks)
        if self.held is not None:
            allowed &= (cols >= self.past_len) | np.isin(cols, self.held)
        return allowed

    @property
    def bounded(self) -> bool:
        """Whether a cache dropped positions by this rule (a window, or positions it chose to keep)."""
        return self.window is not None or self.held is not None

    def evicted(self) -> np.ndarray:
        """Positions before kv_len that the cache no longer holds after this step (never read again)."""
        if self.held is not None:
            return np.setdiff1d(np.arange(self.past_len), self.held)
        if self.window is None:
            return np.zeros(0, dtype=np.int64)
        held = held_positions(self.kv_len, self.window, self.sinks)
        return np.setdiff1d(np.arange(self.kv_len), held)


def held_positions(n: int, window: int, sinks: int = 0) -> np.ndarray:
    """Positions a window cache holds once n tokens are stored: the first `sinks`, then the last `window`."""
    first = np.arange(min(sinks, n))
    last = np.arange(max(sinks, n - window), n)
    return np.concatenate([first, last]).astype(np.int64)


@_one_update_init
@dataclass(frozen=True)
class StepTrace:
    """What one engine did in one step (prefill is step 0)."""

    run_id: str
    engine: str
    step: int
    phase: str  # "prefill" | "decode"
    token_id: int  # the token sampled at this step
    token_text: str
    pos_start: int  # positions whose Q/K/V were computed this step: [pos_start, pos_stop)
    pos_stop: int
    cache_len: int  # tokens held after the step (0 for naive: it keeps nothing)
    cache_capacity: int  # tokens the cache can hold without allocating
    cache_bytes: int  # resident K/V bytes after the step, all layers
    bytes_copied: int  # existing cache content moved to a new place by cache maintenance
    bytes_written: int  # new K/V stored this step
    bytes_gathered: int  # copies made only to feed attention (paged gather)
    kv_projections: int  # token x layer K/V computations this step
    latency_ms: float  # forward + cache update + sampling, device synchronised
    mask_spec: MaskSpec | None = None
    attn_weights: np.ndarray | None = None  # float32 [q_len, kv_len] of (weights_layer, weights_head)
    weights_layer: int | None = None
    weights_head: int | None = None
    logits: np.ndarray | None = None  # float32 [vocab] of the sampled position, when asked for
    block_table: tuple[int, ...] | None = None
    block_size: int | None = None
    device_mem_bytes: int | None = None  # allocator's view, where the device reports one
    window: int | None = None  # W of a window/sinks cache: the slots it holds, sinks included
    sinks: int = 0  # S of a sinks cache: the first S positions, kept for ever
    residual: int | None = None  # R of an int8 cache: the newest R tokens kept in full precision
    # Quality beside cost (kvviz.measure.quality): KL(exact || this) of the next-token distributions at this
    # step, teacher-forced on the exact engine's tokens, and whether their top-1 tokens agree
    kl_to_exact: float | None = None
    top1_agrees: bool | None = None
    # A speculative engine's round (kvviz.engines.spec), None for every other engine. A round is one target
    # forward over the last token and the p drafted ones; it yields a + 1 tokens (the a accepted drafts and the
    # target's own next pick), one step each. The round's first step (spec_index 0) carries the forward's cost
    # (its latency, the bytes written for every drafted slot, the rollback); each later step of the round
    # is one accepted draft whose row that forward computed. kv_projections counts the kept rows; a round's
    # rejected rows are spec_rolled_back x n_layer more projections, thrown away.
    spec_k: int | None = None  # drafts asked for per round (the engine's k)
    spec_proposed: int | None = None  # p: tokens the draft proposed this round (0 at prefill or when it had none)
    spec_accepted: int | None = None  # a: of them, the leading ones the target picked too
    spec_rolled_back: int | None = None  # p - a: slots of rejected drafts whose K/V the rollback undid
    spec_index: int | None = None  # this step's token's place in its round: 0 .. a
    target_forwards: int | None = None  # target forwards so far, this round's and the prefill included
    draft_forwards: int | None = None  # draft-model forwards so far (0: a draft with no model, prompt lookup)
    bytes_undone: int | None = None  # K/V bytes the rollback removed from the cache (crop / free)
    bytes_overwritten: int | None = None  # K/V bytes this step wrote over a rejected slot left in place
    spec_stale: int | None = None  # slots past the sequence still holding rejected K/V (advance-and-overwrite)
    OMITTABLE = ("spec_k", "spec_proposed", "spec_accepted", "spec_rolled_back", "spec_index", "target_forwards",
                 "draft_forwards", "bytes_undone", "bytes_overwritten", "spec_stale")  # StepTrace.of's

    @property
    def spec_slots(self) -> tuple[int, int, int] | None:
        """(first, accepted end, proposed end) absolute positions of this round's drafted slots at its first
        step: accepted drafts are first..accepted end - 1, rejected ones accepted end..proposed end - 1; None
        at any other step or engine."""
        if self.spec_index != 0 or not self.spec_proposed:
            return None
        return self.pos_stop, self.pos_stop + self.spec_accepted, self.pos_stop + self.spec_proposed

    @property
    def held(self) -> np.ndarray | None:
        """Absolute positions the cache holds after this step (None: every position it has seen)."""
        spec = self.mask_spec
        if spec is not None and spec.held is not None:
            return np.concatenate([np.asarray(spec.held, dtype=np.int64), np.arange(self.pos_start, self.pos_stop)])
        if self.window is None:
            return None
        return held_positions(self.pos_stop, self.window - self.sinks, self.sinks)

    @property
    def evicted(self) -> np.ndarray:
        """Positions dropped by this step or earlier: evicted, never read again."""
        held = self.held
        return np.zeros(0, dtype=np.int64) if held is None else np.setdiff1d(np.arange(self.pos_stop), held)

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, got {self.phase!r}")
        if self.window is not None and not 0 <= self.sinks < self.window:
            raise ValueError(f"sinks {self.sinks} must be at least 0 and fewer than the window {self.window}")

    @property
    def new_tokens(self) -> int:
        """Tokens generated so far, this one included."""
        return self.step + 1

    @property
    def computed_positions(self) -> int:
        return self.pos_stop - self.pos_start

    def recomputed_positions(self, prev_stop: int) -> int:
        """Of the positions computed this step, those an earlier step had computed already (naive's
        waste); `prev_stop` is the end of the positions the engine's earlier steps computed."""
        return max(0, min(prev_stop, self.pos_stop) - self.pos_start)

    @property
    def mask(self) -> np.ndarray | None:
        """The bool mask attention applied this step, [q_len, kv_len]."""
        return None if self.mask_spec is None else self.mask_spec.to_numpy()


@dataclass(frozen=True)
class RunSummary:
    """One engine's totals over a run, summed from its traces."""

    engine: str
    new_tokens: int
    total_ms: float  # sum of step latencies
    kv_projections: int
    bytes_copied: int
    bytes_written: int
    bytes_gathered: int
    peak_cache_bytes: int
    token_ids: tuple[int, ...] = field(default_factory=tuple)
    step_ms: tuple[float, ...] = field(default_factory=tuple)
    mean_kl: float | None = None  # mean KL(exact || this) per step, where the steps were measured
    top1_agreement: float | None = None  # share of steps whose top-1 token is the exact engine's

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / (self.total_ms / 1000.0) if self.total_ms > 0 else float("nan")

    @classmethod
    def from_traces(cls, traces: Sequence[StepTrace]) -> RunSummary:
        if not traces:
            raise ValueError("no traces to summarise")
        engines = {t.engine for t in traces}
        if len(engines) != 1:
            raise ValueError(f"traces of several engines: {sorted(engines)}")
        kl = [t.kl_to_exact for t in traces if t.kl_to_exact is not None]
        return cls(
            engine=traces[0].engine,
            new_tokens=len(traces),
            total_ms=float(sum(t.latency_ms for t in traces)),
            kv_projections=sum(t.kv_projections for t in traces),
            bytes_copied=sum(t.bytes_copied for t in traces),
            bytes_written=sum(t.bytes_written for t in traces),
            bytes_gathered=sum(t.bytes_gathered for t in traces),
            peak_cache_bytes=max(t.cache_bytes for t in traces),
            token_ids=tuple(t.token_id for t in traces),
            step_ms=tuple(t.latency_ms for t in traces),
            mean_kl=float(np.mean(kl)) if kl else None,
            top1_agreement=float(np.mean([t.top1_agrees for t in traces if t.top1_agrees is not None])) if kl else None,
        )


def speedup(summary: RunSummary, baseline: RunSummary | None) -> float | None:
    """baseline time / this time, or None without a baseline."""
    if baseline is None or summary.total_ms <= 0:
        return None
    return baseline.total_ms / summary.total_ms


def first_divergence(token_lists: Iterable[Sequence[int]]) -> int | None:
    """Index of the first step at which the sequences differ (over their common length), else None."""
    lists = [list(t) for t in token_lists]
    if len(lists) < 2:
        return None
    for i in range(min(len(t) for t in lists)):
        if len({t[i] for t in lists}) > 1:
            return i
    return None


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
    # k and the rollback rule ("overwrite" or "crop") the speculative engines were asked for (0, "": not set)
    spec_k: int = 0
    rollback: str = ""
    # The memory wall (kvviz.costs.wall, kvviz.measure.bandwidth); zero where unknown, as in traces saved before them.
    weights_read_bytes: int = 0  # read whole by every forward: every matrix once
    embed_row_bytes: int = 0  # embedding rows looked up per computed position
    copy_gbps: float = 0.0  # copy bandwidth (read + written) of the machine and device that ran it
    peak_gbps: float = 0.0  # the device's nominal peak, where it reports one (CUDA)
    read_gbps: float = 0.0  # the read ceiling a decode step runs against at the run's threads (measure.bandwidth)
    read_threads: int = 0  # the torch CPU threads it was measured with
    cache_bytes: int = 0  # the CPU's last-level cache (a step that reads less can pass the read ceiling); 0: unknown
    # What ran each engine's decode step, in `engines` order (kvviz.kernels: "torch", "native", "openblas",
    # "compiled", "cuda-graph"); one kernel for every engine of a run, except in older traces, which
    # could mix the C step with torch's ops; () in traces saved before it was recorded.
    decode_kernels: tuple[str, ...] = ()
    # A comparison run `repeat` times (kvviz.records.repeats): earlier_ms[engine] holds that engine's step times in
    # each of the repeat - 1 runs before the one whose steps the trace holds, every run of the same length.
    repeat: int = 1
    earlier_ms: dict[str, tuple[tuple[float, ...], ...]] = field(default_factory=dict)

    @property
    def kernel(self) -> str | None:
        """The run's decode kernel; None where the trace does not say or its engines ran different ones."""
        kernels = set(self.decode_kernels)
        return kernels.pop() if len(kernels) == 1 else None

    def wall(self) -> WallShape | None:
        """The figures a step's bytes read are built from, or None where the run did not record them."""
        shape = WallShape(self.weights_read_bytes, self.embed_row_bytes, self.kv_bytes_per_token)
        return shape if shape.known and self.embed_row_bytes >= 0 else None

    def bandwidth_gbps(self) -> float | None:
        """The ceiling the wall is drawn at: the read ceiling where the run recorded one, else (a trace saved
        before it was measured) the copy bandwidth; None where neither is a measurement's (0, NaN, inf).
        `ceiling_kind` says which."""
        return _gbps(self.read_gbps) or _gbps(self.copy_gbps)

    def ceiling_kind(self) -> str | None:
        """"read" (the read ceiling), "copy" (an older trace's copy bandwidth) or None: what
        bandwidth_gbps() is."""
        return "read" if _gbps(self.read_gbps) else "copy" if _gbps(self.copy_gbps) else None


def _gbps(value) -> float | None:
    return value if isinstance(value, (int, float)) and 0 < value < float("inf") else None
