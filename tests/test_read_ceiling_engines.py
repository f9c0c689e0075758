"""The engines at the read limit: the weight layout a decode step reads fastest on a CPU
(Transformer._read_layout) keeps every weight's shape, values and Parameter, and the tokens (never timed)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kvviz.config import ModelConfig, SamplingConfig, TraceOptions  # noqa: E402
from kvviz.engines import make_engine  # noqa: E402
from kvviz.models.transformer import Transformer  # noqa: E402

# wide's shape, smaller: qkv (3 x 4 x 16 = 192) x 64 and gate/up 256 x 64 have more outputs than inputs,
# o 64 x 64 and down 64 x 128 do not
CFG = ModelConfig(name="t", d_model=64, n_layer=2, n_head=4, n_kv_head=4, head_dim=16, d_ff=128, vocab_size=97,
                  max_seq_len=256, tie_embeddings=False)


def _model() -> Transformer:
    return Transformer(CFG).init_weights(3)


def test_wide_projections_go_column_major_and_nothing_else_changes():
    model = _model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    params = {k: p for k, p in model.named_parameters()}
    model.plan()
    after = model.state_dict()
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)  # the same values under the same keys
    assert {k: p for k, p in model.named_parameters()} == params  # the same Parameter objects
    for block in model.layers:
        qkv, gu = block.self_attn.qkv_proj.weight, block.mlp.gate_up_proj.weight
        assert qkv.shape == (192, 64) and qkv.stride() == (1, 192)  # (out, in), stored (in, out)
        assert gu.shape == (256, 64) and gu.stride() == (1, 256)
        assert block.self_attn.o_proj.weight.is_contiguous() and block.mlp.down_proj.weight.is_contiguous()
        assert not qkv.is_inference()  # usable for training after a plan built under inference_mode


def test_the_layout_moves_logits_by_a_rounding_only():
    ids = torch.tensor([[5, 17, 3, 88, 41, 2]])
    row_major, laid_out_model = _model(), _model()
    with torch.inference_mode():
        made_inside = _model()  # a model made under inference_mode: inference tensors, laid out the same
        assert torch.equal(made_inside.forward(ids).logits, laid_out_model.forward(ids).logits)
        want = row_major.forward(ids, all_logits=True).logits  # plan() lays out this model too: undo it
    row_major.__dict__.pop("_plan")
    for block in row_major.layers:
        for w in (block.self_attn.qkv_proj.weight, block.mlp.gate_up_proj.weight):
            w.data = w.data.contiguous()
    row_major._read_layout = lambda: None
    with torch.inference_mode():
        plain = row_major.forward(ids, all_logits=True).logits
        laid_out = laid_out_model.forward(ids, all_logits=True).logits
    assert torch.allclose(plain, laid_out, atol=1e-5, rtol=0) and torch.equal(want, laid_out)


def test_low_precision_and_a_trained_model_keep_their_layout(tmp_path):
    bf16 = _model().to(torch.bfloat16)
    bf16.plan()
    assert all(p.is_contiguous() for p in bf16.parameters())
    # training through the laid-out weights, then saving, works (saving makes tensors contiguous)
    model = _model()
    model.plan()
    loss = model.forward(torch.tensor([[1, 2, 3, 4]]), all_logits=True).logits.square().mean()
    loss.backward()
    assert model.layers[0].self_attn.qkv_proj.weight.grad is not None
    from kvviz.models.io import load_model_folder, save_model

    save_model(model, tmp_path / "m")
    loaded = load_model_folder(tmp_path / "m")
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values()))


def test_every_engine_gives_naives_tokens_on_the_laid_out_model():
    model = _model()
    ids = [5, 17, 3, 88, 41, 2]
    off = TraceOptions(masks=False)
    runs = {k: [t.token_id for t in make_engine(k, model).generate(ids, 40, SamplingConfig(), off)]
            for k in ("naive", "concat", "static", "paged")}
    assert len({tuple(v) for v in runs.values()}) == 1, runs


@pytest.mark.slow
def test_the_compiled_static_step_gives_eager_statics_tokens_and_figures(own_interpreter):
    """`make_engine("static", model, kernel="compiled")`: the static-shape step under torch.compile (an option
    beside eager, kvviz bench --kernels torch,compiled). Same tokens, same trace figures, the compile outside the
    steps."""
    if not own_interpreter():  # torch.compile: in a child interpreter
        return
    model = _model()
    ids = [5, 17, 3, 88, 41, 2]
    off = TraceOptions(masks=False)
    eager = list(make_engine("static", model).generate(ids, 12, SamplingConfig(), off))
    engine = make_engine("static", model, kernel="compiled")
    compiled = list(engine.generate(ids, 12, SamplingConfig(), off))
    assert [t.token_id for t in compiled] == [t.token_id for t in eager]
    for a, b in zip(eager, compiled):
        assert (a.cache_len, a.cache_bytes, a.bytes_written, a.pos_start, a.pos_stop) == (
            b.cache_len, b.cache_bytes, b.bytes_written, b.pos_start, b.pos_stop)
    assert engine.capture_ms > 0  # the compile, timed apart from every step
    with pytest.raises(ValueError, match="^concat cannot decode with the torch.compile kernel"):
        make_engine("concat", model, kernel="compiled")
