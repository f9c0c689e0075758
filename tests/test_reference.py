"""The bare decode loop computes what the engines compute: same greedy tokens, same cache rule."""
from __future__ import annotations

import pytest
import torch

from kvviz.config import ModelConfig, SamplingConfig, TraceOptions
from kvviz.engines import make_engine
from kvviz.measure.reference import RULES, bare_generate
from kvviz.models.presets import build_model
from kvviz.models.transformer import Transformer

GQA = ModelConfig(name="gqa-qknorm", arch="qwen3", d_model=64, n_layer=2, n_head=4, n_kv_head=2, head_dim=24,
                  d_ff=96, qk_norm=True, qkv_bias=True, tie_embeddings=False)


@pytest.fixture(scope="module")
def models():
    return {"tiny-random": build_model("tiny-random").eval(), "gqa": Transformer(GQA).init_weights(3).eval()}


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("name", ["tiny-random", "gqa"])
def test_bare_tokens_equal_the_engine(models, name, rule):
    model = models[name]
    prompt = [72, 101, 108, 108, 111, 44, 32]
    engine = make_engine(rule, model, block_size=4)
    want = [t.token_id for t in engine.generate(prompt, 24, SamplingConfig(), TraceOptions(masks=False))]
    got, step_ms = bare_generate(model, prompt, 24, rule, block_size=4)
    assert got == want
    assert len(step_ms) == 24 and all(ms > 0 for ms in step_ms)
    assert len(set(want)) > 1  # a model that repeats one token would make this trivial


def test_bf16(models):
    model = build_model("tiny-random").to(torch.bfloat16).eval()
    prompt = [1, 2, 3, 4]
    want = [t.token_id for t in make_engine("concat", model).generate(prompt, 12, SamplingConfig(),
                                                                          TraceOptions(masks=False))]
    assert bare_generate(model, prompt, 12, "concat")[0] == want


def test_bad_rule(models):
    with pytest.raises(ValueError, match="unknown cache rule"):
        bare_generate(models["gqa"], [1], 2, "window")


def test_compare_takes_each_repeats_own_ratio(models, monkeypatch):
    """kvviz/bare is the median over repeats of bare time / kvviz time in the same repeat, and within a
    repeat the sides take their steps in turns: the bare loop and both engines advance together."""
    import kvviz.measure.reference as reference

    progress: list[tuple[str, int]] = []
    real_steps, real_make = reference.bare_steps, None

    def bare_steps(*args, **kw):
        for k, token in enumerate(real_steps(*args, **kw)):
            progress.append(("bare", k))
            yield token

    monkeypatch.setattr(reference, "bare_steps", bare_steps)
    import kvviz.engines as engines

    real_make = engines.make_engine

    def make_engine(*args, **kw):
        engine = real_make(*args, **kw)
        generate = engine.generate

        def traced(*a, **k):
            for t in generate(*a, **k):
                progress.append(("kvviz", t.step))
                yield t

        engine.generate = traced
        return engine

    monkeypatch.setattr(engines, "make_engine", make_engine)
    monkeypatch.setattr(reference, "BURST", 3)
    row = reference.compare(models["tiny-random"], [1, 2, 3], 7, "static", repeat=3)
    walls = row["walls_ms"]
    assert [len(v) for v in walls.values()] == [3, 3, 3]
    for mode in reference.TRACE_MODES:
        per_repeat = sorted(b / k for b, k in zip(walls["bare"], walls[mode]))
        assert row["ratio"][mode] == per_repeat[1]
    assert row["same_tokens"]
    # in turns of 3 steps: every side has taken steps 0-2 before any side takes step 3, and so on
    first_repeat = [k // 3 for _, k in progress[:21]]
    assert first_repeat == sorted(first_repeat) and first_repeat.count(0) == 9 and first_repeat.count(2) == 3


@pytest.mark.parametrize("rule", ["concat", "static", "paged"])
def test_the_bare_loop_decodes_on_the_engines_kernel(models, rule, monkeypatch):
    """--reference holds kvviz to a bare loop of the same kernel: under `kernel="native"` the bare loop's decode
    step is kvviz's C step (kvviz.native) too, over its own buffers; under `kernel="torch"` both run torch's."""
    from kvviz import native

    if native.build_error() is not None:
        pytest.skip(f"kvviz/native/step.c cannot be built here: {native.build_error()}")
    model = models["gqa"]
    prompt = [72, 101, 108, 108, 111, 44, 32]
    calls = []
    real = native.NativeStep.__call__
    monkeypatch.setattr(native.NativeStep, "__call__", lambda self, *a: calls.append(a) or real(self, *a))
    on_c, _ = bare_generate(model, prompt, 24, rule, block_size=4, kernel="native")
    assert len(calls) == 23  # every decode step in C; prefill in torch
    on_torch, _ = bare_generate(model, prompt, 24, rule, block_size=4, kernel="torch")
    assert len(calls) == 23  # none more
    engine = make_engine(rule, model, block_size=4, kernel="torch")
    assert on_c == on_torch == [t.token_id for t in engine.generate(prompt, 24, SamplingConfig(),
                                                                    TraceOptions(masks=False))]
    with pytest.raises(ValueError, match="no bare loop on the 'openblas' kernel; the bare loop runs torch, native"):
        bare_generate(model, prompt, 4, rule, kernel="openblas")
