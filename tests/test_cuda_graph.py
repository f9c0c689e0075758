"""The static engine's static-shape decode step (kvviz.engines.graph) against the eager static engine.

On a CPU the step runs eagerly: the same greedy tokens for 45 steps, logits within 1e-5, the same trace
figures. The capture itself needs CUDA: those tests skip without it (`scripts/gpu_check.sh` runs them).
That replay is faster than eager at batch 1 is a benchmark (`kvviz bench --cuda-graph`), not a test.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from kvviz.config import ModelConfig, SamplingConfig, TraceOptions

STEPS = 45
PROMPT = "The cache changes no math."
# What the trace must carry unchanged: the cache's figures and the mask attention applied.
FIELDS = ("step", "phase", "pos_start", "pos_stop", "kv_projections", "cache_len", "cache_capacity", "cache_bytes",
          "bytes_copied", "bytes_written", "bytes_gathered", "block_table", "block_size", "window", "sinks",
          "residual", "mask_spec", "weights_layer", "weights_head", "engine")
# The step attends over the whole preallocated buffer with the keys after the position masked; eager
# static attends over the valid slice with no mask. Masked keys add exact zeros, but SDPA sums in another
# order over the longer row: about 1e-6 apart on tiny-random (float32, logits of order 1-10), hence 1e-5.
ATOL = 1e-5

CONFIGS = {
    # grouped-query attention (4 query heads over 2 KV heads) with Qwen3's q/k norms
    "gqa-qknorm": dict(arch="qwen3", n_head=4, n_kv_head=2, qk_norm=True, rope_theta=1e6, norm_eps=1e-6,
                       tie_embeddings=False),
    # Qwen2: biases on the fused QKV projection, 4 query heads over 1 KV head
    "mqa-bias": dict(arch="qwen2", n_head=4, n_kv_head=1, qkv_bias=True, tie_embeddings=False),
}


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


needs_cuda = pytest.mark.skipif(not _cuda(), reason="needs a CUDA device")


def _model(name, torch_cpu, device="cpu"):
    if name == "tiny-random":
        from kvviz.models.presets import load_model

        return load_model("tiny-random", torch_cpu.device(device))
    from kvviz.models.transformer import Transformer

    cfg = ModelConfig(name=name, vocab_size=256, d_model=64, n_layer=3, head_dim=16, d_ff=96, max_seq_len=256,
                      **CONFIGS[name])
    model = Transformer(cfg).init_weights(5)
    if cfg.qkv_bias:  # init_weights zeroes biases: give them values, or the bias path tests nothing
        gen = torch_cpu.Generator().manual_seed(9)
        with torch_cpu.no_grad():
            for block in model.layers:
                block.self_attn.qkv_proj.bias.copy_(torch_cpu.randn(block.self_attn.qkv_proj.bias.shape,
                                                                    generator=gen) * 0.5)
    return model.to(device)


def _runs(model, ids, n, trace, sampling=None, graph=False):
    from kvviz.engines import make_engine
    from kvviz.engines.graph import GraphStaticEngine

    eager = list(make_engine("static", model).generate(ids, n, sampling, trace, run_id="t"))
    engine = GraphStaticEngine(model, graph=graph)
    return eager, list(engine.generate(ids, n, sampling, trace, run_id="t")), engine


def _assert_same(eager, shaped, atol=ATOL):
    assert [t.token_id for t in shaped] == [t.token_id for t in eager]
    for a, b in zip(eager, shaped):
        for field in FIELDS:
            assert getattr(b, field) == getattr(a, field), (a.step, field)
        np.testing.assert_allclose(b.logits, a.logits, atol=atol, rtol=0)
        if a.attn_weights is not None:
            assert b.attn_weights.shape == a.attn_weights.shape == (a.pos_stop - a.pos_start, a.pos_stop)
            np.testing.assert_allclose(b.attn_weights, a.attn_weights, atol=atol, rtol=0)


@pytest.mark.parametrize("name", ["tiny-random", *CONFIGS])
def test_static_shape_step_matches_eager_static(torch_cpu, byte_tokenizer, name):
    model = _model(name, torch_cpu)
    ids = byte_tokenizer.encode(PROMPT)
    trace = TraceOptions(logits=True, weights_layer=1, weights_head=3)
    eager, shaped, _ = _runs(model, ids, STEPS, trace)
    assert len(set(t.token_id for t in eager)) > 3, "a model that always says the same thing tests little"
    _assert_same(eager, shaped)
    # the figures as StaticCache counts them: one position's K and V in every layer per decode step
    row = 2 * model.cfg.n_kv_head * model.cfg.head_dim * 4 * model.cfg.n_layer
    assert all(t.bytes_written == row for t in shaped[1:])
    assert shaped[-1].cache_len == len(ids) + STEPS - 1


def test_static_shape_step_matches_under_sampling(tiny_random, byte_tokenizer):
    ids = byte_tokenizer.encode("Sampling with a seed")
    sampling = SamplingConfig(temperature=1.0, top_k=20, seed=4)
    eager, shaped, _ = _runs(tiny_random, ids, 40, TraceOptions(logits=True), sampling)
    _assert_same(eager, shaped)


def test_step_buffers_stay_in_place(tiny_random, byte_tokenizer):
    """What a capture relies on: the step's inputs and the cache's buffers are the same tensors all run."""
    from kvviz.engines.graph import GraphStaticEngine

    engine = GraphStaticEngine(tiny_random, graph=False)
    gen = engine.generate(byte_tokenizer.encode(PROMPT), 12, None, TraceOptions(masks=False))
    next(gen)
    step = engine.step_fn
    held = [t.data_ptr() for t in (step.token, step.pos, *step.k, *step.v)]
    assert step.k[0].shape[2] == engine.cache.max_len  # attention's keys: the whole preallocated buffer
    for _ in gen:
        assert [t.data_ptr() for t in (step.token, step.pos, *step.k, *step.v)] == held
        assert step.k is engine.cache.k and step.v is engine.cache.v


def test_step_reads_no_value_on_the_host(torch_cpu):
    """A CUDA graph cannot record a step that reads a tensor's value on the host (`.item()`, `int(pos)`,
    a slice by it, a shape from data). On the meta device tensors have shapes and no values, so any
    such read raises: the step running there is the CPU's check that it is capturable."""
    from kvviz.caches.static import StaticCache
    from kvviz.engines.graph import StaticStep

    model = _model("gqa-qknorm", torch_cpu)
    model.rope_tables(64, torch_cpu.device("cpu"))
    model = model.to("meta")
    cache = StaticCache(model.cfg, max_len=40, device=torch_cpu.device("meta"), dtype=torch_cpu.float32)
    step = StaticStep(model, cache)
    with torch_cpu.inference_mode():
        step.run()
    assert step.logits.shape == (1, model.cfg.vocab_size) and step.logits.device.type == "meta"
    assert [tuple(q.shape) for q in step.queries] == [(1, 4, 1, 16)] * model.cfg.n_layer


def test_refusals(torch_cpu, tiny_random):
    from kvviz.engines import make_engine
    from kvviz.engines.graph import GraphStaticEngine
    from kvviz.models.gpt2 import GPT2

    gpt2 = GPT2(ModelConfig(name="g", arch="gpt2", vocab_size=256, d_model=64, n_layer=2, n_head=4, n_kv_head=4,
                            head_dim=16, d_ff=96, max_seq_len=64)).init_weights(0)
    with pytest.raises(ValueError, match="Llama-family models only, not gpt2"):
        GraphStaticEngine(gpt2, graph=False)
    with pytest.raises(ValueError, match="^concat cannot decode with the CUDA graph kernel"):
        make_engine("concat", tiny_random, kernel="cuda-graph")
    if not _cuda():
        with pytest.raises(ValueError, match="^the CUDA graph kernel runs on CUDA only, not on a CPU$"):
            make_engine("static", tiny_random, kernel="cuda-graph")
    with pytest.raises(ValueError, match="needs a CUDA device, not cpu"):
        GraphStaticEngine(tiny_random, graph=True)
    assert type(make_engine("static", tiny_random)).__name__ == "CachedEngine"  # eager unless asked


@pytest.mark.skipif(_cuda(), reason="the refusal is for a machine without CUDA")
def test_bench_refuses_cuda_graph_without_cuda(capsys):
    from kvviz.cli import main

    assert main(["bench", "--model", "tiny-random", "--device", "cpu", "--engines", "static", "--kernel",
                 "cuda-graph", "--tokens", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["kvviz bench: error: the CUDA graph kernel runs on CUDA only, not on a CPU"]


def _bench_on_cpu(monkeypatch, tmp_path, shift=0):
    """`kvviz bench --kernels torch,cuda-graph` on a CPU: the CUDA check waived and the graph engine's step run
    eagerly (shifted by `shift` positions, to break it), so the row, the table and the JSON are tested."""
    import kvviz.engines
    import kvviz.kernels
    from kvviz.engines.graph import GraphStaticEngine

    class Shifted(GraphStaticEngine):
        def _begin(self, *args):
            super()._begin(*args)
            step, run = self.step_fn, self.step_fn.run
            if shift:  # each decode step writes its K/V `shift` rows late and attends up to there
                step.run = lambda: (step.pos.add_(shift), run())

    real = kvviz.engines.make_engine

    def make(key, model, *, kernel="torch", **kw):
        if kernel == "cuda-graph":
            assert key == "static"
            return Shifted(model, block_size=kw.get("block_size", 16), graph=False)
        return real(key, model, kernel=kernel, **kw)

    monkeypatch.setattr(kvviz.kernels, "check_model", lambda kernel, model: None)
    monkeypatch.setattr(kvviz.engines, "make_engine", make)
    out = tmp_path / "b.json"
    from kvviz.cli import main

    rc = main(["bench", "--model", "tiny-random", "--engines", "static", "--tokens", "4", "12", "--repeat", "1",
               "--threads", "1", "--kernels", "torch,cuda-graph", "--json", str(out)])
    return rc, json.loads(out.read_text()) if out.exists() else None


def test_bench_cuda_graph_row(monkeypatch, tmp_path, capsys):
    rc, doc = _bench_on_cpu(monkeypatch, tmp_path)
    text = capsys.readouterr().out
    assert rc == 0 and doc["identical"] is True and doc["kernels"] == ["torch", "cuda-graph"]
    assert "tokens identical across engines and kernels: yes" in text
    rows = [r["row"] for r in doc["results"]]
    assert rows == ["static · PyTorch", "static · CUDA graph"] * 2  # eager static beside the graph
    for n in (4, 12):
        rows = {r["kernel"]: r for r in doc["results"] if r["new_tokens"] == n}
        assert rows["cuda-graph"]["token_ids"] == rows["torch"]["token_ids"]
        for field in ("bytes_written", "peak_cache_bytes", "bytes_read", "kv_projections"):
            assert rows["cuda-graph"][field] == rows["torch"][field], field
    assert any("static · CUDA graph" in line for line in text.splitlines())


def test_bench_cuda_graph_row_exits_1_when_the_step_is_wrong(monkeypatch, tmp_path, capsys):
    rc, doc = _bench_on_cpu(monkeypatch, tmp_path, shift=1)
    assert rc == 1 and doc["identical"] is False
    assert "static · CUDA graph differs from static · PyTorch first at step" in capsys.readouterr().out


# -- the capture itself: CUDA only -------------------------------------------------------------------------

@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("name", ["tiny-random", "gqa-qknorm"])
def test_cuda_graph_gives_eager_static_tokens(torch_cpu, byte_tokenizer, name):
    """float32 on the GPU: the eager step uses SDPA on the valid slice (no mask), the graph the masked
    whole buffer, possibly another SDPA kernel: the logits are held to 1e-4, the tokens exactly."""
    import torch

    model = _model(name, torch_cpu, "cuda")
    ids = byte_tokenizer.encode(PROMPT)
    trace = TraceOptions(logits=True, weights_layer=1, weights_head=1)
    eager, graphed, engine = _runs(model, ids, 60, trace, graph=True)
    assert engine.graph and isinstance(engine.step_fn.graph, torch.cuda.CUDAGraph)
    assert engine.capture_ms > 0
    _assert_same(eager, graphed, atol=1e-4)
    assert all(t.device_mem_bytes and t.device_mem_bytes > 0 for t in graphed)


@pytest.mark.gpu
@needs_cuda
def test_cuda_graph_from_make_engine_and_repeated_runs(torch_cpu, byte_tokenizer):
    """make_engine(kernel="cuda-graph") captures by default; a second run on the same engine captures again
    over its own cache and gives the same tokens."""
    from kvviz.engines import make_engine

    model = _model("tiny-random", torch_cpu, "cuda")
    ids = byte_tokenizer.encode(PROMPT)
    engine = make_engine("static", model, kernel="cuda-graph")
    first = [t.token_id for t in engine.generate(ids, 30, None, TraceOptions(masks=False))]
    second = [t.token_id for t in engine.generate(ids, 50, None, TraceOptions(masks=False))]
    ref = [t.token_id for t in make_engine("static", model).generate(ids, 50, None, TraceOptions(masks=False))]
    assert first == ref[:30] and second == ref
