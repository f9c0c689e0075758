"""The run-time estimate: latency fits from steps, the rounds' sum with the speed control's floor, and
the config's arithmetic, each checked against figures worked by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kvviz.config import ModelConfig
from kvviz.costs import estimate
from kvviz.records.trace import StepTrace


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
    # Hidden 128 of the full rate's 512: a quarter of the probe's rate; 20 + 30 per layer ops dispatched.
    rate *= 128 / 512
    dispatch = estimate.DISPATCH_MS * (20 + 30 * 2)
    # concat's decode step at L = 100: one position through the weights, the head, 100 pairs.
    concat = (2 * body + 2 * head + pair * 100) / rate * 1e3 + dispatch
    assert fits["concat"].decode_ms(np.float64(100)) == pytest.approx(concat)
    # naive's at L = 100: 100 positions through the weights, the head once, 100 * 100 / 2 pairs.
    naive = (2 * body * 100 + 2 * head + pair * 100 * 100 / 2) / rate * 1e3 + dispatch
    assert fits["naive"].decode_ms(np.float64(100)) == pytest.approx(naive)
    # Either engine's prefill of 50 prompt tokens: the naive step at L = 50.
    assert fits["concat"].prefill_at(50) == pytest.approx(fits["naive"].decode_ms(np.float64(50)))
    assert not fits["concat"].measured


def test_the_machines_matrix_rate_is_measured():
    rate = estimate.probe_flops_per_s(size=64, bursts=3)
    assert math.isfinite(rate) and 1e7 < rate < 1e14


def test_the_memory_wall_bound_by_hand_and_the_slower_bound_wins():
    """wide at 10 GB/s: a cached decode step reading the weights (every matrix once, one embedding row)
    and the K/V of L positions, counted here from the shape; the estimate takes the slower of that and
    the FLOPs at each step."""
    from kvviz.models.presets import PRESETS

    cfg = PRESETS["wide"].config  # 8 layers, hidden 512, 8 KV heads of 64, float32
    kv_per_token = 2 * 8 * 8 * 64 * 4
    # Every parameter is read whole but the token table, of which one row is looked up (a tied head reads it whole).
    whole, row = cfg.param_count() - (0 if cfg.tie_embeddings else cfg.vocab_size * 512), 512
    dispatch = estimate.DISPATCH_MS * (20 + 30 * 8)
    wall = estimate.wall_fits(cfg, ("concat", "naive"), 10.0)
    at_300 = ((whole + row) * 4 + 300 * kv_per_token) / 10e9 * 1e3 + dispatch
    assert wall["concat"].decode_ms(np.float64(300)) == pytest.approx(at_300)
    # naive: a forward over all 300 positions, its K/V written: the weights once, 300 rows and K/Vs.
    assert wall["naive"].decode_ms(np.float64(300)) == pytest.approx(
        (whole * 4 + 300 * (row * 4 + kv_per_token)) / 10e9 * 1e3 + dispatch)
    # At a fast matrix rate the bytes bound the cached steps; the run is the sum of the slower bounds.
    bounds = estimate.bound_fits(cfg, ("concat",), 1e15, 10.0)
    flops = estimate.config_fits(cfg, ("concat",), 1e15)
    assert estimate.run_ms(bounds, 59, 100) == pytest.approx(estimate.run_ms(wall, 59, 100) - estimate.run_ms(
        {"naive": wall["naive"]}, 59, 100))
    assert estimate.run_ms(bounds, 59, 100) > estimate.run_ms(flops, 59, 100)
    assert estimate.bound_fits(cfg, ("concat",), 1e15, None) == flops  # no bandwidth known: FLOPs alone


def test_the_load_slows_an_estimate_down_never_speeds_it_up():
    assert estimate.load_slowdown(0.2, 2) == 1.0
    assert estimate.load_slowdown(7.0, 2) == pytest.approx(4.0)  # 7 others and the run itself on 2 cores
