"""The run-time estimate: latency fits from steps, the rounds' sum with the speed control's floor, and
the config's arithmetic, each checked against figures worked by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kvviz import estimate
from kvviz.config import ModelConfig
from kvviz.trace import StepTrace


def step(k: int, prompt: int, ms: float, engine: str = "x") -> StepTrace:
    stop = prompt + k
    return StepTrace(run_id="r", engine=engine, step=k, phase="prefill" if k == 0 else "decode", token_id=0,
                     token_text="a", pos_start=0 if k == 0 else stop - 1, pos_stop=stop, cache_len=stop,
                     cache_capacity=stop, cache_bytes=0, bytes_copied=0, bytes_written=0, bytes_gathered=0,
                     kv_projections=1, latency_ms=ms)


def test_a_linear_latency_is_recovered_and_summed_by_hand():
    prompt = 10
    steps = [step(0, prompt, 30.0)] + [step(k, prompt, 2.0 + 0.5 * (prompt + k)) for k in range(1, 40)]
    fit = estimate.fit_traces(steps)
    assert fit.a_ms == pytest.approx(2.0) and fit.b_ms == pytest.approx(0.5) and fit.c_ms == pytest.approx(0, abs=1e-9)
    assert fit.prefill_ms == 30.0 and fit.prefill_positions == prompt
    # A run of 4 new tokens with a prompt of 20: prefill 30 * 20/10 = 60; decode at L = 21, 22, 23:
    # 3 * 2 + 0.5 * (21 + 22 + 23) = 39.
    assert estimate.run_ms({"x": fit}, 20, 4) == pytest.approx(99.0)
    # Rounds 2 and 3 only (step 0 and 1 done): 2 + 0.5*22 + 2 + 0.5*23 = 26.5.
    assert estimate.run_ms({"x": fit}, 20, 4, from_step=2) == pytest.approx(26.5)
    # Two engines in lockstep add up; at 10 steps/s a round lasts at least 100 ms.
    assert estimate.run_ms({"x": fit, "y": fit}, 20, 4) == pytest.approx(198.0)
    assert estimate.run_ms({"x": fit}, 20, 4, steps_per_s=10) == pytest.approx(100.0 * 4)


def test_a_quadratic_latency_is_fitted_and_a_falling_one_is_not_trusted():
    prompt = 5
    quad = [step(k, prompt, 1.0 + 0.01 * (prompt + k) ** 2) for k in range(1, 60)]
    fit = estimate.fit_traces([step(0, prompt, 5.0), *quad])
    assert fit.c_ms == pytest.approx(0.01, rel=1e-6)
    falling = [step(k, prompt, 100.0 - k) for k in range(1, 30)]
    fit = estimate.fit_traces(falling)
    assert fit.b_ms == 0 and fit.c_ms == 0 and fit.a_ms == pytest.approx(np.median([100.0 - k for k in range(1, 30)]))


def test_the_configs_arithmetic_by_hand():
    cfg = ModelConfig()  # tiny: vocab 256, d 128, 2 layers, 4 heads of 32, tied embeddings
    rate = 1e9  # FLOP/s: 1 GFLOP takes 1000 ms
    head = 256 * 128
    body = cfg.param_count() - head
    fits = estimate.config_fits(cfg, ("naive", "concat"), rate)
    pair = 4 * 2 * 4 * 32  # FLOPs per (query, key) pair across layers and heads
    # concat's decode step at L = 100: one position through the weights, the head, 100 pairs.
    concat = (2 * body + 2 * head + pair * 100) / rate * 1e3
    assert fits["concat"].decode_ms(np.float64(100)) == pytest.approx(concat)
    # naive's at L = 100: 100 positions through the weights, the head once, 100 * 100 / 2 pairs.
    naive = (2 * body * 100 + 2 * head + pair * 100 * 100 / 2) / rate * 1e3
    assert fits["naive"].decode_ms(np.float64(100)) == pytest.approx(naive)
    # Either engine's prefill of 50 prompt tokens: the naive step at L = 50.
    assert fits["concat"].prefill_at(50) == pytest.approx(fits["naive"].decode_ms(np.float64(50)))
    assert not fits["concat"].measured


def test_the_machines_matrix_rate_is_measured():
    rate = estimate.probe_flops_per_s(size=64, bursts=3)
    assert math.isfinite(rate) and 1e7 < rate < 1e14
