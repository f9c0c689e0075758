"""Quality beside cost: exact engines score 0, approximate ones against hand-computed cases."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kvviz.config import ModelConfig, TraceOptions
from kvviz.engines import APPROXIMATE_KEYS, EXACT_KEYS, make_engine
from kvviz.measure.quality import annotate, kl_divergence, measure
from kvviz.models.transformer import Transformer

PROMPT = list(range(70, 82))


def exact_run(model, n):
    return list(make_engine("concat", model).generate(PROMPT, n, trace=TraceOptions(masks=False, logits=True)))


def test_kl_hand_cases():
    assert kl_divergence(np.zeros(4), np.zeros(4)) == 0.0
    # P = (1/2, 1/2), Q = softmax(0, ln 3) = (1/4, 3/4): KL = 1/2 ln 2 + 1/2 ln(2/3)
    assert kl_divergence(np.array([0.0, 0.0]), np.array([0.0, math.log(3)])) == pytest.approx(
        0.5 * math.log(2) + 0.5 * math.log(2 / 3))
    assert kl_divergence(np.array([1000.0, 0.0]), np.array([1000.0, 0.0])) == 0.0  # no overflow


@pytest.mark.parametrize("key", [k for k in EXACT_KEYS if k != "concat"])
def test_exact_engines_score_zero(tiny_random, key):
    exact = exact_run(tiny_random, 12)
    eng = make_engine(key, tiny_random)
    own = list(eng.generate(PROMPT, 12))
    q = measure(eng, PROMPT, exact, own)
    assert max(q.kl) < 1e-8 and all(q.top1) and q.first_divergence is None
    assert q.mean_kl < 1e-8 and q.top1_agreement == 1.0


@pytest.mark.parametrize("key", APPROXIMATE_KEYS)
def test_approximate_engines_measured_teacher_forced(tiny_random, key):
    n = 20
    exact = exact_run(tiny_random, n)
    eng = make_engine(key, tiny_random, window=4, sinks=1)
    own = list(eng.generate(PROMPT, n, trace=TraceOptions(masks=False, logits=True)))
    q = measure(eng, PROMPT, exact, own)
    assert len(q.kl) == n and all(k >= 0 for k in q.kl) and max(q.kl) > 0
    mine = [t.token_id for t in own]
    ref = [t.token_id for t in exact]
    assert q.first_divergence == next((i for i, (a, b) in enumerate(zip(ref, mine)) if a != b), None)
    # before its own output parts, teacher forcing feeds it its own tokens: the same logits as its run
    stop = n if q.first_divergence is None else q.first_divergence + 1
    for k, t in zip(q.kl[:stop], own[:stop]):
        assert k == pytest.approx(kl_divergence(exact[t.step].logits, t.logits), abs=1e-9)
    marked = annotate(own, q)
    assert [t.kl_to_exact for t in marked] == list(q.kl) and [t.top1_agrees for t in marked] == list(q.top1)


def test_window_of_one_on_a_known_input():
    """One layer, W = 1: the window engine's next-token distribution is the model applied to the last
    token alone at its own position, so the KL at each step equals KL(exact || that), computed here by
    hand from the model run on one token."""
    import torch

    from tests.test_approx_caches import At

    model = Transformer(ModelConfig(name="one", n_layer=1, tie_embeddings=False)).init_weights(7).eval()
    exact = list(make_engine("concat", model).generate(PROMPT, 6, trace=TraceOptions(masks=False, logits=True)))
    q = measure(make_engine("window", model, window=1), PROMPT, exact, exact)
    ids = PROMPT + [t.token_id for t in exact]
    for step, kl in enumerate(q.kl):
        pos = len(PROMPT) - 1 + step
        with torch.inference_mode():
            alone = model(torch.tensor([[ids[pos]]]), cache=At(pos)).logits[0].numpy()
        assert kl == pytest.approx(kl_divergence(exact[step].logits, alone), rel=1e-5, abs=1e-7)
    assert q.kl[0] > 0.01  # the prompt matters to the exact model; a window of 1 drops it


def test_int8_kl_is_small_but_not_zero(tiny_random):
    exact = exact_run(tiny_random, 16)
    eng = make_engine("int8", tiny_random)
    q = measure(eng, PROMPT, exact, list(eng.generate(PROMPT, 16)))
    assert 0 < q.mean_kl < 1e-3 and q.top1_agreement >= 0.9


def test_summary_and_trace_file_carry_quality(tiny_random, tmp_path):
    from kvviz.records import traceio
    from kvviz.records.trace import RunSummary

    exact = exact_run(tiny_random, 8)
    eng = make_engine("window", tiny_random, window=3)
    own = list(eng.generate(PROMPT, 8, trace=TraceOptions(masks=True)))
    q = measure(eng, PROMPT, exact, own)
    marked = annotate(own, q)
    s = RunSummary.from_traces(marked)
    assert s.mean_kl == pytest.approx(np.mean(q.kl)) and s.top1_agreement == pytest.approx(np.mean(q.top1))
    assert RunSummary.from_traces(exact).mean_kl is None
    back = [traceio.decode_step(traceio.encode_step(t), "window") for t in marked]
    assert [t.kl_to_exact for t in back] == list(q.kl) and [t.top1_agrees for t in back] == list(q.top1)
    assert [t.mask_spec for t in back] == [t.mask_spec for t in marked]


def test_shadows_in_lockstep_equal_the_separate_measure(tiny_random):
    from kvviz.engines import EXACT_KEYS
    from kvviz.measure.quality import EXACT_ENGINES, Shadows, reference_key

    assert set(EXACT_ENGINES) == set(EXACT_KEYS)
    assert reference_key(("window", "static", "concat")) == "static"
    assert reference_key(("concat", "paged")) is None and reference_key(("int8",)) is None
    n, keys = 10, ("window", "concat", "int8")
    streams = {k: make_engine(k, tiny_random, window=5).generate(
        PROMPT, n, trace=TraceOptions(masks=False, logits=k == "concat")) for k in keys}
    shadows = Shadows({k: make_engine(k, tiny_random, window=5) for k in ("window", "int8")}, PROMPT, n,
                      "concat", keep_logits=False)
    rounds = [shadows.annotate([next(streams[k]) for k in keys]) for _ in range(n)]
    exact = exact_run(tiny_random, n)
    for j, key in ((0, "window"), (2, "int8")):
        eng = make_engine(key, tiny_random, window=5)
        q = measure(eng, PROMPT, exact, list(eng.generate(PROMPT, n)))
        np.testing.assert_allclose([r[j].kl_to_exact for r in rounds], q.kl, rtol=1e-6, atol=1e-12)
        assert [r[j].top1_agrees for r in rounds] == list(q.top1)
    assert all(r[1].logits is None and r[1].kl_to_exact is None for r in rounds)


def test_engine_session_fills_quality_and_passes_w_s_r(torch_cpu):
    from kvviz.config import RunConfig
    from kvviz.runtime.messages import RunRequest
    from kvviz.runtime.session import EngineSession

    session = EngineSession()
    run = RunConfig(prompt="The cache holds what it holds, no more.", max_new_tokens=6,
                    engines=("concat", "window", "sinks", "int8"), window=8, sinks=2, residual=2)
    session.start(RunRequest(run_id="s", model="tiny-random", run=run, device="cpu", dtype="auto", threads=1))
    rounds = [session.round() for _ in range(6)]
    session.end()
    by = {t.engine: t for t in rounds[-1]}
    assert by["concat"].logits is None and by["concat"].kl_to_exact is None  # logits not asked for: dropped
    assert (by["window"].window, by["sinks"].window, by["sinks"].sinks, by["int8"].residual) == (8, 8, 2, 2)
    assert by["window"].cache_len == 8 and all(r[1].kl_to_exact > 0 for r in rounds)
    assert all(isinstance(r[3].top1_agrees, bool) for r in rounds)
    with pytest.raises(ValueError, match="larger than the run"):
        session.start(RunRequest(run_id="t", model="tiny-random", device="cpu", threads=1,
                                 run=RunConfig(prompt="ab", max_new_tokens=3, engines=("window",), window=9)))


def test_export_carries_w_r_and_quality_into_the_trace_file(tmp_path):
    import os
    import subprocess
    import sys

    from kvviz.records import traceio

    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    out = tmp_path / "exp"
    proc = subprocess.run([sys.executable, "-m", "kvviz", "export", "--out", str(out), "--engines",
                           "concat,window,int8", "--window", "8", "--residual", "2", "--tokens", "12", "--model",
                           "tiny-random", "--json", "--threads", "1"], capture_output=True, text=True, timeout=600,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    run = traceio.load_run(out / "trace.json")
    window, int8 = run.traces["window"][-1], run.traces["int8"][-1]
    assert (window.window, window.cache_len, int8.residual) == (8, 8, 2)
    assert (run.info.window, run.info.sinks, run.info.residual) == (8, 4, 2)  # the run info too
    assert window.kl_to_exact > 0 and 0 < int8.kl_to_exact < window.kl_to_exact
    assert run.traces["concat"][-1].logits is None  # the reference's logits were only for the measure
