"""The approximate caches (window, sinks, int8), each against a reference implementation of its own
rule written here without the cache: the same tokens and logits, step by step."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvviz.caches import CACHES, ConcatCache
from kvviz.caches.int8 import dequantise, quantise
from kvviz.config import ModelConfig, SamplingConfig, TraceOptions
from kvviz.engines import APPROXIMATE_KEYS, EXACT_KEYS, make_engine
from kvviz.models.transformer import Transformer
from kvviz.records.trace import MaskSpec


def run(model, key, ids, n, **kw):
    return list(make_engine(key, model, **kw).generate(ids, n, None, TraceOptions(logits=True, weights_layer=0),
                                                      run_id="t"))


class Recompute:
    """No cache: the whole sequence every step, with a mask of the rule's own (window W, S sinks) over
    absolute positions (Mistral's sliding-window attention, recomputed naively)."""

    def __init__(self, window, sinks=0):
        self.seq_len, self.window, self.sinks = 0, window, sinks

    def kv_positions(self, T):
        return np.arange(T)

    def mask_spec(self, T):
        return MaskSpec(T, T, 0, window=self.window - self.sinks, sinks=self.sinks)

    def update(self, layer, k, v):
        return k, v


def reference(model, ids, n, **rule):
    """Greedy generation, recomputing everything each step under the rule. Returns tokens and logits."""
    ids, toks, logits = list(ids), [], []
    with torch.inference_mode():
        for _ in range(n):
            out = model(torch.tensor([ids]), cache=Recompute(**rule))
            logits.append(out.logits[0].numpy().copy())
            toks.append(int(out.logits[0].argmax()))
            ids.append(toks[-1])
    return toks, logits


def assert_same(traces, ref):
    toks, logits = ref
    assert [t.token_id for t in traces] == toks
    for t, lg in zip(traces, logits):
        np.testing.assert_allclose(t.logits, lg, atol=2e-5, rtol=0)


def test_registry_tells_exact_from_approximate():
    from kvviz import catalog

    assert {"window", "sinks", "int8"} <= set(APPROXIMATE_KEYS)
    assert catalog.settings_of("sinks") == ("window", "sinks") and catalog.settings_of("int8") == ("residual",)
    assert {"naive", "concat", "static", "paged"} <= set(EXACT_KEYS)
    assert not set(EXACT_KEYS) & set(APPROXIMATE_KEYS)


@pytest.mark.parametrize("prompt_len", [5, 20])  # shorter and longer than the window
@pytest.mark.parametrize("W", [1, 3, 8])
def test_window_equals_banded_recompute(tiny_random, prompt_len, W):
    ids = list(range(70, 70 + prompt_len))
    traces = run(tiny_random, "window", ids, 16, window=W)
    assert_same(traces, reference(tiny_random, ids, 16, window=W))
    for t in traces:
        assert t.cache_len == min(W, t.pos_stop)
        assert len(t.evicted) == t.pos_stop - min(W, t.pos_stop)


@pytest.mark.parametrize("S,W", [(1, 4), (4, 8), (2, 3)])
@pytest.mark.parametrize("prompt_len", [3, 12])
def test_sinks_equal_recompute_with_sinks(tiny_random, S, W, prompt_len):
    ids = list(range(80, 80 + prompt_len))
    traces = run(tiny_random, "sinks", ids, 16, window=W, sinks=S)
    assert_same(traces, reference(tiny_random, ids, 16, window=W, sinks=S))
    last = traces[-1]
    assert list(last.held[:S]) == list(range(S)) and last.cache_len == W


class At:
    """No past, but positions start at `offset`: the model run over a tail of the sequence."""

    def __init__(self, offset):
        self.seq_len = offset

    def kv_positions(self, T):
        return np.arange(self.seq_len, self.seq_len + T)

    def mask_spec(self, T):
        return MaskSpec(T, self.seq_len + T, self.seq_len)

    def update(self, layer, k, v):
        return k, v


def test_window_of_one_layer_is_recompute_over_the_last_W_tokens():
    """With one layer a rolling window is literally the model re-run over the last W tokens at their
    own absolute positions (deeper layers' K/V carry context from before the window, so only the
    banded recompute above is the rule for them)."""
    model = Transformer(ModelConfig(name="one", n_layer=1, tie_embeddings=False)).init_weights(3).eval()
    ids, W, toks = list(range(65, 85)), 6, []
    for _ in range(12):
        tail = ids[-W:]
        offset = len(ids) - len(tail)

        with torch.inference_mode():
            toks.append(int(model(torch.tensor([tail]), cache=At(offset)).logits[0].argmax()))
        ids.append(toks[-1])
    assert [t.token_id for t in run(model, "window", list(range(65, 85)), 12, window=W)] == toks


def test_window_of_one_hand_case():
    """W = 1: each decode query sees only its own key, so attention returns its own V and the weights are
    one-hot on the newest position; the sampled token then depends on the last token and its position only."""
    model = Transformer(ModelConfig(name="one", n_layer=1, tie_embeddings=False)).init_weights(5).eval()
    traces = run(model, "window", [65, 66, 67], 6, window=1)
    for t in traces[1:]:
        w = t.attn_weights[-1]
        assert w[t.pos_stop - 1] == pytest.approx(1.0) and w[: t.pos_stop - 1].sum() == 0
        assert list(t.held) == [t.pos_stop - 1]
    # the same last token at the same position gives the same output whatever came before
    a = run(model, "window", [10, 11, 67], 1, window=1)[0]
    b = run(model, "window", [99, 42, 67], 1, window=1)[0]
    np.testing.assert_allclose(a.logits, b.logits, atol=1e-6)


class QuantisedConcat(ConcatCache):
    """The chapter's concat cache holding exact K/V, handing attention dequantise(quantise(.)) of all
    but the newest R: the int8 rule without the int8 layout (payload, scales, ring, migration). It
    computes K/V step by step as the int8 cache does: a full recompute differs by float noise of 1e-7,
    and a rounding that noise flips moves a value by a whole quantisation step."""

    residual = 0

    def update(self, layer, k, v):
        k, v = super().update(layer, k, v)
        n = k.shape[2] - min(self.residual, k.shape[2])
        return tuple(torch.cat([dequantise(*quantise(x[:, :, :n]), x.dtype), x[:, :, n:]], dim=2) for x in (k, v))


@pytest.mark.parametrize("residual", [None, 1, 5])
def test_int8_equals_attention_over_dequantised_kv(tiny_random, residual):
    ids = list(range(90, 102))
    traces = run(tiny_random, "int8", ids, 16, residual=residual)
    ref = make_engine("concat", tiny_random, kernel="torch")  # the cache class swapped in: torch's path reads it
    ref.cache_cls = type("Ref", (QuantisedConcat,), {"residual": residual or 0})
    expected = list(ref.generate(ids, 16, None, TraceOptions(logits=True)))
    assert_same(traces, ([t.token_id for t in expected], [t.logits for t in expected]))


def test_int8_round_trip_hand_cases():
    x = torch.tensor([[1.0, -0.5, 0.25, 0.0]])
    q, s = quantise(x)
    assert s.item() == pytest.approx(1 / 127)
    assert q.tolist() == [[127, -64, 32, 0]]  # -63.5 rounds to even -64; 31.75 -> 32
    np.testing.assert_allclose(dequantise(q, s, torch.float32).numpy(), [[1.0, -64 / 127, 32 / 127, 0.0]], rtol=1e-6)
    zero_q, zero_s = quantise(torch.zeros(1, 3))
    assert zero_q.tolist() == [[0, 0, 0]] and dequantise(zero_q, zero_s, torch.float32).abs().sum() == 0
    gen = torch.Generator().manual_seed(0)
    y = torch.randn(64, 128, generator=gen) * torch.logspace(-3, 3, 64)[:, None]
    err = (dequantise(*quantise(y), torch.float32) - y).abs()
    bound = y.abs().amax(-1, keepdim=True) / 254  # half a step of absmax / 127
    assert (err <= bound * (1 + 1e-5)).all()


def test_int8_bytes_count_payload_scales_and_residual(tiny_random):
    cfg = tiny_random.cfg
    per_token_q = cfg.n_layer * 2 * cfg.n_kv_head * (cfg.head_dim * 1 + 4)  # int8 payload + a float32 scale
    assert per_token_q == 576
    per_token_fp = cfg.n_layer * 2 * cfg.n_kv_head * cfg.head_dim * 4
    eng = make_engine("int8", tiny_random, residual=3)
    traces = list(eng.generate(list(range(65, 75)), 20))
    c = eng.cache
    held = sum(x.numel() * x.element_size() for x in c.kq + c.vq + c.ks + c.vs + c.kr + c.vr)
    assert traces[-1].cache_bytes == held == 30 * per_token_q + 3 * per_token_fp  # preallocated: 10 + 20
    # prefill: 7 quantised at once, 3 into the residual; each decode: one token leaves the residual
    assert traces[0].bytes_written == 7 * per_token_q + 3 * per_token_fp and traces[0].bytes_copied == 0
    for t in traces[1:]:
        assert (t.bytes_written, t.bytes_copied) == (per_token_fp, per_token_q)
        assert t.bytes_gathered == t.pos_stop * per_token_fp  # the dequantised history, every step


def test_window_bytes_stop_growing(tiny_random):
    cfg = tiny_random.cfg
    per_token = cfg.n_layer * 2 * cfg.n_kv_head * cfg.head_dim * 4
    eng = make_engine("window", tiny_random, window=8)
    traces = list(eng.generate(list(range(65, 85)), 10))
    assert {t.cache_bytes for t in traces} == {8 * per_token}
    assert traces[-1].cache_bytes == sum(x.numel() * x.element_size() for x in eng.cache.k + eng.cache.v)
    assert traces[0].bytes_written == 8 * per_token  # a 20-token prompt: only its last 8 are stored
    assert all(t.bytes_written == per_token and t.bytes_copied == t.bytes_gathered == 0 for t in traces[1:])


@pytest.mark.parametrize("kw,match", [
    (dict(key="window", window=0), "at least 1"),
    (dict(key="sinks", window=4, sinks=4), "fewer than the window"),
    (dict(key="sinks", window=4, sinks=0), "at least 1"),
    (dict(key="int8", residual=0), "at least 1"),
])
def test_bad_settings_refused_by_the_cache(tiny_random, kw, match):
    key = kw.pop("key")
    with pytest.raises(ValueError, match=match):
        list(make_engine(key, tiny_random, **kw).generate([65, 66], 2))


def test_int8_refuses_a_dtype_it_cannot_serve(tiny_random):
    with pytest.raises(ValueError, match="cannot quantise a float64"):
        CACHES["int8"](tiny_random.cfg, max_len=4, device=torch.device("cpu"), dtype=torch.float64)


def test_sampling_runs(tiny_random):
    for key in APPROXIMATE_KEYS:
        traces = list(make_engine(key, tiny_random, window=6, sinks=2, residual=2).generate(
            list(range(65, 75)), 12, SamplingConfig(temperature=1.0, seed=1)))
        assert len(traces) == 12


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prompt_len=st.integers(1, 24), n=st.integers(1, 12), window=st.integers(2, 16), sinks=st.integers(1, 8),
       key=st.sampled_from(["window", "sinks"]))
def test_property_bounded_caches_equal_their_rule(tiny_random, prompt_len, n, window, sinks, key):
    """Any prompt length against any W (shorter, equal, longer), any S < W: token for token."""
    sinks = min(sinks, window - 1) if key == "sinks" else 0
    ids = [(37 * i + 11) % 256 for i in range(prompt_len)]
    traces = run(tiny_random, key, ids, n, window=window, sinks=sinks or None)
    toks, logits = reference(tiny_random, ids, n, window=window, sinks=sinks)
    assert [t.token_id for t in traces] == toks
    assert max(float(np.abs(t.logits - lg).max()) for t, lg in zip(traces, logits)) < 1e-4


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prompt_len=st.integers(1, 20), n=st.integers(1, 10), residual=st.one_of(st.none(), st.integers(1, 12)))
def test_property_int8_equals_its_rule(tiny_random, prompt_len, n, residual):
    ids = [(53 * i + 7) % 256 for i in range(prompt_len)]
    traces = run(tiny_random, "int8", ids, n, residual=residual)
    ref = make_engine("concat", tiny_random, kernel="torch")  # the cache class swapped in: torch's path reads it
    ref.cache_cls = type("Ref", (QuantisedConcat,), {"residual": residual or 0})
    expected = list(ref.generate(ids, n, None, TraceOptions(logits=True)))
    assert [t.token_id for t in traces] == [t.token_id for t in expected]
    assert max(float(np.abs(a.logits - b.logits).max()) for a, b in zip(traces, expected)) < 1e-5
