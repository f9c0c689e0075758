"""Every exact engine in the registry against the naive engine: same tokens, logits within 1e-4. The
approximate ones (window, sinks, int8) are checked against their own rules in test_approx_caches.py
and share the structural tests here."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvviz.config import SamplingConfig, TraceOptions
from kvviz.engines import APPROXIMATE_KEYS, ENGINE_KEYS, EXACT_KEYS, make_engine

CACHED = [k for k in EXACT_KEYS if k != "naive"]


def run(model, key, ids, n, sampling=None, trace=None, **kw):
    trace = trace or TraceOptions(logits=True)
    return list(make_engine(key, model, **kw).generate(ids, n, sampling, trace, run_id="t"))


@pytest.mark.parametrize("key", CACHED)
def test_greedy_tokens_and_logits_match_naive(tiny_random, byte_tokenizer, key):
    ids = byte_tokenizer.encode("The cache changes no math.")
    ref = run(tiny_random, "naive", ids, 30)
    got = run(tiny_random, key, ids, 30)
    assert [t.token_id for t in got] == [t.token_id for t in ref]
    assert len(set(t.token_id for t in ref)) > 3, "a test model that always says the same thing tests little"
    for a, b in zip(ref, got):
        np.testing.assert_allclose(b.logits, a.logits, atol=1e-4, rtol=0)


@pytest.mark.parametrize("key", CACHED)
@pytest.mark.parametrize("sampling", [
    SamplingConfig(temperature=0.8, seed=3),
    SamplingConfig(temperature=1.0, top_k=5, seed=11),
    SamplingConfig(temperature=1.3, top_p=0.9, seed=7),
    SamplingConfig(temperature=0.7, top_k=20, top_p=0.5, seed=1),
])
def test_seeded_sampling_matches_naive(tiny_random, byte_tokenizer, key, sampling):
    ids = byte_tokenizer.encode("Sampling with a seed")
    ref = [t.token_id for t in run(tiny_random, "naive", ids, 25, sampling)]
    assert [t.token_id for t in run(tiny_random, key, ids, 25, sampling)] == ref


def test_seed_changes_samples(tiny_random, byte_tokenizer):
    ids = byte_tokenizer.encode("Seeds")
    a = [t.token_id for t in run(tiny_random, "concat", ids, 30, SamplingConfig(temperature=1.0, seed=1))]
    b = [t.token_id for t in run(tiny_random, "concat", ids, 30, SamplingConfig(temperature=1.0, seed=2))]
    assert a != b


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prompt=st.text(min_size=1, max_size=40), n=st.integers(1, 24),
       temperature=st.sampled_from([0.0, 0.6, 1.0, 1.5]), top_k=st.one_of(st.none(), st.integers(1, 50)),
       top_p=st.one_of(st.none(), st.floats(0.05, 1.0)), seed=st.integers(0, 2**31 - 1),
       block_size=st.integers(1, 20))
def test_property_all_engines_agree(tiny_random, byte_tokenizer, prompt, n, temperature, top_k, top_p, seed,
                                    block_size):
    ids = byte_tokenizer.encode(prompt)  # any Unicode text, non-ASCII included, is bytes
    sampling = SamplingConfig(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
    trace = TraceOptions(masks=False)
    results = {k: [t.token_id for t in run(tiny_random, k, ids, n, sampling, trace, block_size=block_size)]
               for k in EXACT_KEYS}
    assert all(len(v) == n for v in results.values())
    assert all(v == results["naive"] for v in results.values()), results


@pytest.mark.parametrize("key", ENGINE_KEYS)
def test_step_structure(tiny_random, byte_tokenizer, key):
    ids = byte_tokenizer.encode("abcdefg")  # 7 tokens
    traces = run(tiny_random, key, ids, 5, trace=TraceOptions(weights_layer=1, weights_head=2))
    assert [t.step for t in traces] == [0, 1, 2, 3, 4]
    assert [t.phase for t in traces] == ["prefill"] + ["decode"] * 4
    n_layer = tiny_random.cfg.n_layer
    for t in traces:
        L = 7 + t.step  # tokens fed to the model so far
        if key == "naive":
            assert (t.pos_start, t.pos_stop) == (0, L)
            assert t.kv_projections == L * n_layer
            assert t.cache_len == 0 and t.cache_bytes == 0
            assert t.mask.shape == (L, L)
        else:
            q = 7 if t.step == 0 else 1
            assert (t.pos_start, t.pos_stop) == (L - q, L)
            assert t.kv_projections == q * n_layer
            held = L if key not in ("window", "sinks") else min(L, t.window)
            assert t.cache_len == held and len(t.evicted) == L - held
            assert t.mask.shape == (q, L)
        assert t.attn_weights.shape == t.mask.shape
        np.testing.assert_allclose(t.attn_weights.sum(-1), 1.0, atol=1e-5)
        assert np.all(t.attn_weights[~t.mask] == 0)
        assert t.weights_layer == 1 and t.weights_head == 2
        assert t.latency_ms > 0


def chapter_mask(seq_len: int, total_len: int) -> np.ndarray:
    """The chapter's loop, verbatim in numpy: True = blocked. kvviz stores True = allowed."""
    past_len = total_len - seq_len
    mask = np.ones((seq_len, total_len), dtype=bool)
    for i in range(seq_len):
        mask[i, : past_len + i + 1] = False
    return mask


@pytest.mark.parametrize("key", EXACT_KEYS)
def test_mask_is_the_chapters(tiny_random, byte_tokenizer, key):
    ids = byte_tokenizer.encode("mask!")
    for t in run(tiny_random, key, ids, 4):
        q, kv = t.mask.shape
        np.testing.assert_array_equal(t.mask, ~chapter_mask(q, kv))


@pytest.mark.parametrize("key", APPROXIMATE_KEYS)
def test_bounded_masks_are_the_chapters_less_what_was_evicted(tiny_random, key):
    """W=5, S=2 on a 9-token prompt, by hand: the last query row sees 0, 1 (sinks) and 6, 7, 8."""
    traces = run(tiny_random, key, list(range(65, 74)), 4, window=5, sinks=2)
    for t in traces:
        q, kv = t.mask.shape
        chapter = ~chapter_mask(q, kv)
        assert not (t.mask & ~chapter).any()  # never more than the chapter's
        if key == "int8":
            np.testing.assert_array_equal(t.mask, chapter)  # approximates values, drops nothing
    last_row = {"window": [4, 5, 6, 7, 8], "sinks": [0, 1, 6, 7, 8], "int8": list(range(9)),
                # a prompt is attended to whole, then cut to the W its rule ranks highest
                "tova": list(range(9)), "h2o": list(range(9)), "knorm": list(range(9)), "snapkv": list(range(9))}[key]
    assert list(np.flatnonzero(traces[0].mask[-1])) == last_row


def test_trace_arrays_are_the_traces_own(tiny_random, byte_tokenizer):
    """No copy is made on the CPU (the model's output tensors are fresh every step), so what must hold
    is that no two traces, and no trace and the model or cache, share memory."""
    ids = byte_tokenizer.encode("copies")
    engine = make_engine("static", tiny_random)
    traces = list(engine.generate(ids, 6, trace=TraceOptions(weights_layer=0, logits=True)))
    arrays = [a for t in traces for a in (t.attn_weights, t.logits)]
    held = [p.detach().numpy() for p in tiny_random.parameters()]
    held += [b.numpy() for b in (*engine.cache.k, *engine.cache.v)]
    for i, a in enumerate(arrays):
        assert a.dtype == np.float32
        assert not any(np.shares_memory(a, b) for b in arrays[i + 1:] + held)
    first = traces[1].attn_weights.copy()
    assert np.array_equal(traces[1].attn_weights, first)  # later steps did not overwrite it


def test_paged_block_table(tiny_random, byte_tokenizer):
    ids = byte_tokenizer.encode("x" * 10)
    traces = run(tiny_random, "paged", ids, 30, block_size=8)
    for t in traces:
        assert len(t.block_table) == -(-t.cache_len // 8)  # a new block only when the last is full
        assert t.cache_capacity == len(t.block_table) * 8
        assert len(set(t.block_table)) == len(t.block_table)
        assert t.block_size == 8
    assert traces[-1].block_table[: len(traces[0].block_table)] == traces[0].block_table


@pytest.mark.parametrize("bad", [
    dict(ids=[], n=5, match="empty"),
    dict(ids=[65], n=0, match="at least 1"),
    dict(ids=[65] * 2000, n=100, match="context"),
])
def test_bad_requests(tiny_random, bad):
    with pytest.raises(ValueError, match=bad["match"]):
        run(tiny_random, "concat", bad["ids"], bad["n"])


def test_runs_to_the_full_context(torch_cpu):
    from kvviz.models.presets import load_model

    model = load_model("tiny-random", torch_cpu.device("cpu"))
    n_ctx = model.cfg.max_seq_len
    traces = run(model, "static", [65] * (n_ctx - 3), 3, trace=TraceOptions(masks=False))
    assert traces[-1].cache_len == n_ctx - 1


@pytest.mark.parametrize("width", [32, 64, 128, 512, 1024, 4096])
def test_the_models_norm_is_torchs_rms_norm_bit_for_bit(width):
    """kvviz.models.transformer.rms_norm may take torch's fused CPU kernel: it must equal F.rms_norm exactly."""
    import torch
    import torch.nn.functional as F

    from kvviz.models.transformer import rms_norm

    gen = torch.Generator().manual_seed(width)
    for rows in (1, 7, 64):
        x = torch.randn(2, rows, width, generator=gen) * 3
        w = torch.randn(width, generator=gen)
        assert torch.equal(rms_norm(x, w, 1e-6), F.rms_norm(x, (width,), w, 1e-6))


def test_rotate_is_the_chapters_rope():
    """RoPE in three ops (roll, and the sign in the sin table) against x*cos + rotate_half(x)*sin."""
    import torch

    from kvviz.models.transformer import rotate, signed_sin

    def rotate_half(x):  # the chapter's (and transformers') rotation: the halves swapped, the first negated
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    gen = torch.Generator().manual_seed(1)
    x = torch.randn(1, 6, 9, 64, generator=gen)
    angle = torch.randn(9, 64, generator=gen)
    cos, sin = angle.cos(), angle.sin()
    want = x * cos + rotate_half(x) * sin
    got = rotate(x, cos, signed_sin(sin))
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    assert not torch.allclose(rotate(x, cos, sin), want, atol=1e-3)  # the sign table matters
