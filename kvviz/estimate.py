"""How long a run will take, and how much of one is left: from the run's own steps when it has some,
from an earlier run of the same model when there was one, else from the model's config and this
machine's measured matrix throughput (then a lower bound: it knows no per-step overhead).

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
from kvviz.trace import StepTrace

NO_CACHE_ENGINE = "naive"  # the one engine with no cache: every step recomputes the whole sequence


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


def config_fits(cfg: ModelConfig, engines: Iterable[str], flops_per_s: float) -> dict[str, LatencyFit]:
    """Each engine's arithmetic alone, from the config: 2 FLOPs per weight per computed position
    (the output head once per step), attention's 4*n_layer*n_head*head_dim per pair of positions."""
    head = cfg.vocab_size * cfg.d_model
    body = max(0, cfg.param_count() - head * (1 if cfg.tie_embeddings else 2))
    per_pos = 2.0 * body / flops_per_s * 1e3  # ms per computed position
    per_step = 2.0 * head / flops_per_s * 1e3
    attn = 4.0 * cfg.n_layer * cfg.n_head * cfg.head_dim / flops_per_s * 1e3  # ms per (query, key) pair
    prefill = (per_step, per_pos, attn / 2)  # every prompt position, attending over P/2 on average
    return {key: LatencyFit(*(prefill if key == NO_CACHE_ENGINE else (per_step + per_pos, attn, 0.0)),
                            prefill_coef=prefill, measured=False)
            for key in engines}


def run_ms(fits: Mapping[str, LatencyFit], prompt_len: int, new_tokens: int, *, from_step: int = 0,
           steps_per_s: float = 0.0) -> float:
    """Milliseconds for lockstep rounds from_step .. new_tokens-1 of these engines (step 0 is the
    prefill; decode step k attends over prompt_len + k positions). A speed limit makes a round last at
    least 1/steps_per_s."""
    if not fits or from_step >= new_tokens:
        return 0.0
    steps = np.arange(max(from_step, 1), new_tokens, dtype=np.float64)
    rounds = sum(fit.decode_ms(prompt_len + steps) for fit in fits.values())
    floor = 1000.0 / steps_per_s if steps_per_s > 0 else 0.0
    total = float(np.maximum(rounds, floor).sum()) if steps.size else 0.0
    if from_step == 0:
        total += max(floor, sum(fit.prefill_at(prompt_len) for fit in fits.values()))
    return total


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
