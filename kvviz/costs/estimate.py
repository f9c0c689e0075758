"""How long a run will take, and how much of one is left: from the run's own steps when it has some,
from an earlier run of the same model when there was one, else from the model's config and this
machine: each step's FLOPs at its measured matrix rate and the bytes it must read (kvviz.costs.wall) at its
measured read bandwidth, whichever is slower (a decode step at batch 1 is memory-bound: FLOPs alone
had put a `wide` run under the announced length), plus the Python dispatch of the step's tensor ops.

A step's latency is modelled per engine as a + b*L + c*L^2 in the context length L (the positions a
step attends over): a cached engine's step grows with L through attention, the no-cache engine's
(`naive`, which recomputes every position) much faster. No Qt, no torch: numpy and the traces only.
"""
from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kvviz.config import ModelConfig
from kvviz.costs.wall import WallShape
from kvviz.records.trace import StepTrace

NO_CACHE_ENGINE = "naive"  # the one engine with no cache: every step recomputes the whole sequence
# What a step costs besides its FLOPs and bytes: its tensor ops launched one by one from Python (a
# `wide` decode step is ~240 ops for 8 layers, counted with torch.profiler; docs/architecture.md), plus
# the engine's own bookkeeping. DISPATCH_MS per op was fitted to `kvviz bench` on this 2-core machine
# (docs/lecture-window.md): tiny's steps are almost all dispatch.
OPS_PER_STEP = 20
OPS_PER_LAYER = 30
DISPATCH_MS = 0.004
# A forward's products reach the probe's 64x64 rate from this hidden size on, and a share in proportion
# below it (thin products are dispatch and memory more than arithmetic): `naive` in kvviz bench here ran
# at 0.27 of it for tiny (hidden 128) and 0.86 for wide (512), the load taken out.
FULL_RATE_HIDDEN = 512

Fit = "LatencyFit | tuple[LatencyFit, ...]"  # one fit, or bounds of which a step takes the slowest


@dataclass(frozen=True)
class LatencyFit:
    """One engine's step latency (ms) as a function of the context length L, and its prefill."""

    a_ms: float
    b_ms: float = 0.0  # per position of context
    c_ms: float = 0.0  # per position of context, squared
    prefill_ms: float = 0.0  # measured: one prefill of prefill_positions tokens
    prefill_positions: int = 1
    prefill_coef: tuple[float, float, float] | None = None  # from the config: a + b*P + c*P^2 (ms)
    measured: bool = True  # False: from the config and a throughput probe (no overhead known)

    def decode_ms(self, context: np.ndarray) -> np.ndarray:
        return self.a_ms + self.b_ms * context + self.c_ms * context * context

    def prefill_at(self, positions: int) -> float:
        """The prefill of `positions` prompt tokens: the config's curve, else the one measured scaled
        linearly in length."""
        if self.prefill_coef is not None:
            a, b, c = self.prefill_coef
            return a + b * positions + c * positions * positions
        return self.prefill_ms * positions / max(1, self.prefill_positions)


def fit_traces(steps: Sequence[StepTrace], recent: int | None = None) -> LatencyFit | None:
    """One engine's fit from its recorded steps (None before it has a step); `recent`: from its last
    that many decode steps only (the trend a run is on, at a cost that does not grow with the run)."""
    if not steps:
        return None
    prefill = [t for t in steps[:1] if t.phase == "prefill"]
    decode = [t for t in (steps[-recent:] if recent else steps) if t.phase == "decode"]
    pre_ms = prefill[0].latency_ms if prefill else 0.0
    pre_pos = prefill[0].pos_stop if prefill else 1
    if not decode:  # only the prefill: a decode step costs at least its share of one position
        return LatencyFit(pre_ms / max(1, pre_pos), prefill_ms=pre_ms, prefill_positions=pre_pos)
    context = np.array([t.pos_stop for t in decode], dtype=np.float64)
    ms = np.array([t.latency_ms for t in decode], dtype=np.float64)
    coef = (float(np.median(ms)), 0.0, 0.0)
    spread = np.unique(context).size
    for degree in (2, 1):  # the curve the steps support, never one that falls as L grows
        if spread > 4 * degree:
            fitted = np.polynomial.polynomial.polyfit(context, ms, degree)
            if np.all(fitted[1:] >= 0):
                coef = (*map(float, fitted), 0.0, 0.0)[:3]
                break
    return LatencyFit(*coef, prefill_ms=pre_ms, prefill_positions=pre_pos)


def fit_history(traces: Mapping[str, Sequence[StepTrace]], recent: int | None = None) -> dict[str, LatencyFit]:
    return {key: fit for key, steps in traces.items() if (fit := fit_traces(steps, recent)) is not None}


def dispatch_ms(cfg: ModelConfig) -> float:
    """A forward's ops launched from Python, whatever their size (see DISPATCH_MS)."""
    return DISPATCH_MS * (OPS_PER_STEP + OPS_PER_LAYER * cfg.n_layer)


def config_fits(cfg: ModelConfig, engines: Iterable[str], flops_per_s: float) -> dict[str, LatencyFit]:
    """Each engine's arithmetic alone, from the config: 2 FLOPs per weight per computed position
    (the output head once per step), attention's 4*n_layer*n_head*head_dim per pair of positions;
    plus the step's dispatch."""
    head = cfg.vocab_size * cfg.d_model
    body = max(0, cfg.param_count() - head * (1 if cfg.tie_embeddings else 2))
    flops_per_s *= min(1.0, cfg.d_model / FULL_RATE_HIDDEN)
    per_pos = 2.0 * body / flops_per_s * 1e3  # ms per computed position
    per_step = 2.0 * head / flops_per_s * 1e3 + dispatch_ms(cfg)
    attn = 4.0 * cfg.n_layer * cfg.n_head * cfg.head_dim / flops_per_s * 1e3  # ms per (query, key) pair
    prefill = (per_step, per_pos, attn / 2)  # every prompt position, attending over P/2 on average
    return {key: LatencyFit(*(prefill if key == NO_CACHE_ENGINE else (per_step + per_pos, attn, 0.0)),
                            prefill_coef=prefill, measured=False)
            for key in engines}


def wall_fits(cfg: ModelConfig, engines: Iterable[str], read_gbps: float, dtype: str | None = None
              ) -> dict[str, LatencyFit]:
    """Each engine's memory floor, from the config: the bytes a step must read (kvviz.costs.wall: every
    weight once, the computed positions' embedding rows, the K/V attended over or written) at
    `read_gbps`, plus the step's dispatch. A cached decode step reads the K/V of every position; the
    no-cache engine's step is a prefill of the whole sequence, writing each position's K/V."""
    if not read_gbps > 0:
        raise ValueError(f"a read bandwidth must be positive, got {read_gbps!r} GB/s")
    shape = WallShape.from_config(cfg, dtype)
    per_byte = 1e3 / (read_gbps * 1e9)  # ms per byte
    overhead = dispatch_ms(cfg)
    prefill = (shape.weights_bytes * per_byte + overhead, (shape.row_bytes + shape.kv_bytes_per_token) * per_byte, 0.0)
    cached = ((shape.weights_bytes + shape.row_bytes) * per_byte + overhead, shape.kv_bytes_per_token * per_byte, 0.0)
    return {key: LatencyFit(*(prefill if key == NO_CACHE_ENGINE else cached), prefill_coef=prefill, measured=False)
            for key in engines}


def bound_fits(cfg: ModelConfig, engines: Sequence[str], flops_per_s: float, read_gbps: float | None,
               dtype: str | None = None) -> dict[str, Fit]:
    """Each engine's (FLOPs, bytes) bounds, of which run_ms takes the slower at every step; the FLOPs
    alone where no read bandwidth is known."""
    flops = config_fits(cfg, engines, flops_per_s)
    if read_gbps is None or not read_gbps > 0:
        return dict(flops)
    wall = wall_fits(cfg, engines, read_gbps, dtype)
    return {key: (flops[key], wall[key]) for key in engines}


def _bounds(fit) -> tuple[LatencyFit, ...]:
    return fit if isinstance(fit, tuple) else (fit,)


def run_ms(fits: Mapping[str, Fit], prompt_len: int, new_tokens: int, *, from_step: int = 0,
           steps_per_s: float = 0.0) -> float:
    """Milliseconds for lockstep rounds from_step .. new_tokens-1 of these engines (step 0 is the
    prefill; decode step k attends over prompt_len + k positions). An engine given several fits (its
    bounds) takes the slowest at each step. A speed limit makes a round last at least 1/steps_per_s."""
    if not fits or from_step >= new_tokens:
        return 0.0
    steps = np.arange(max(from_step, 1), new_tokens, dtype=np.float64)
    rounds = sum(np.maximum.reduce([f.decode_ms(prompt_len + steps) for f in _bounds(fit)]) for fit in fits.values())
    floor = 1000.0 / steps_per_s if steps_per_s > 0 else 0.0
    total = float(np.maximum(rounds, floor).sum()) if steps.size else 0.0
    if from_step == 0:
        total += max(floor, sum(max(f.prefill_at(prompt_len) for f in _bounds(fit)) for fit in fits.values()))
    return total


def load_slowdown(load: float | None = None, cores: int | None = None) -> float:
    """How much slower a single-threaded run goes on this machine now than on an idle one: the runnable
    processes (the 1-minute load average, plus the run itself) over the cores, at least 1. A machine
    other work keeps busy (load 7.8 on 2 cores here) runs every step ~4x slower than its probes say."""
    import os

    if load is None:
        try:
            load = os.getloadavg()[0]
        except (OSError, AttributeError):
            return 1.0
    cores = cores or os.cpu_count() or 1
    return max(1.0, (load + 1.0) / cores)


def probe_flops_per_s(size: int = 64, bursts: int = 7, per_burst: int = 8) -> float:
    """This machine's float32 matrix-multiply rate on one core: the fastest of a few short bursts of
    64x64 products (OpenBLAS spreads 96x96 ones over threads: on a busy 2-core machine that took
    30 ms a product, 0.06 GFLOP/s, against 0.02 ms on one thread); the fastest burst, so one the
    scheduler interrupted does not count. About 2 ms in all."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    np.matmul(a, b)  # warm
    best = math.inf
    for _ in range(bursts):
        start = time.perf_counter()
        for _ in range(per_burst):
            np.matmul(a, b)
        best = min(best, time.perf_counter() - start)
    return 2.0 * size ** 3 * per_burst / max(best, 1e-9)
