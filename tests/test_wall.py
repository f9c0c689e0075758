"""The memory wall's byte figures against values worked by hand from published shapes."""
from __future__ import annotations

import math

import pytest

from kvviz.config import ModelConfig
from kvviz.costs.memory import MEMORY_PRESETS
from kvviz.costs.wall import StepRead, WallShape, crossover_length
from kvviz.models.presets import PRESETS, preset_config


def test_tiny_by_hand():
    # tiny: d 128, 2 layers, 4 heads of 32 (4 KV), d_ff 512, vocab 256, tied head, fp32.
    # per layer: q,k,v,o 4 x 128 x 128 = 65,536; MLP 3 x 128 x 512 = 196,608; two norms 256 -> 262,400
    # read whole: 2 x 262,400 + final norm 128 + head 256 x 128 = 557,696 elements = 2,230,784 B
    # one embedding row 128 x 4 = 512 B; K/V per token 2 layers x 2 x 4 x 32 x 4 B = 2,048 B
    w = WallShape.from_config(PRESETS["tiny"].config)
    assert w == WallShape(weights_bytes=2_230_784, row_bytes=512, kv_bytes_per_token=2_048)
    step = w.decode(1000)
    assert step.weights_bytes == 2_231_296 and step.kv_bytes == 2_048_000
    # crossover: 2,231,296 / 2,048 = 1,089.5 -> 1,090 tokens
    assert w.crossover() == 1_090
    assert w.decode(1_089).kv_bytes < w.decode(1_089).weights_bytes <= w.decode(1_090).kv_bytes


def test_shipped_tiny_has_the_preset_shape():
    assert WallShape.from_config(preset_config("tiny")) == WallShape.from_config(PRESETS["tiny"].config)


def test_wide_by_hand():
    # wide: d 512, 8 layers, 8 heads of 64 (8 KV), d_ff 1536, vocab 256, untied head, fp32.
    # per layer: 4 x 512 x 512 = 1,048,576; MLP 3 x 512 x 1536 = 2,359,296; norms 1,024 -> 3,408,896
    # whole: 8 x 3,408,896 + 512 + head 256 x 512 = 27,402,752 elements = 109,611,008 B
    # K/V per token: 8 x 2 x 8 x 64 x 4 = 32,768 B; crossover 109,613,056 / 32,768 = 3,345.06 -> 3,346
    w = WallShape.from_config(PRESETS["wide"].config)
    assert w == WallShape(weights_bytes=109_611_008, row_bytes=2_048, kv_bytes_per_token=32_768)
    assert w.crossover() == 3_346
    assert w.decode(2000) == StepRead(weights_bytes=109_613_056, kv_bytes=65_536_000)
    # fp16 halves every figure
    assert WallShape.from_config(PRESETS["wide"].config, "fp16").weights_bytes == 109_611_008 // 2


def test_qwen3_gqa_by_hand():
    # Qwen3-0.6B's published config.json: hidden 1024, 28 layers, 16 Q / 8 KV heads of 128,
    # intermediate 3072, vocab 151,936, tied, q/k norms, bf16.
    # per layer: q 1024 x 2048 + k, v 2 x 1024 x 1024 + o 2048 x 1024 = 6,291,456; q/k norms 256;
    #   MLP 3 x 1024 x 3072 = 9,437,184; norms 2,048 -> 15,730,944
    # whole: 28 x 15,730,944 + 1,024 + 151,936 x 1,024 = 596,049,920 elements x 2 B = 1,192,099,840 B
    # K/V per token: 28 x 2 x 8 KV heads x 128 x 2 B = 114,688 B (the 16 query heads do not count)
    # crossover: 1,192,101,888 / 114,688 = 10,394.3 -> 10,395 tokens
    cfg = MEMORY_PRESETS["qwen3-0.6b"].config
    w = WallShape.from_config(cfg)
    assert w == WallShape(weights_bytes=1_192_099_840, row_bytes=2_048, kv_bytes_per_token=114_688)
    assert crossover_length(cfg) == 10_395


def test_gpt2_by_hand():
    # GPT-2 small: per layer 1,771,776 (c_attn) + 590,592 (c_proj) + 2,362,368 + 2,360,064 (MLP) + 3,072
    # (two LayerNorms) = 7,087,872; whole 12 x that + 1,536 (ln_f) + 50,257 x 768 (tied head)
    # = 123,653,376 elements x 4 B; one token row and one position row per token
    w = WallShape.from_config(MEMORY_PRESETS["gpt2-small"].config)
    assert w == WallShape(weights_bytes=494_613_504, row_bytes=2 * 768 * 4, kv_bytes_per_token=73_728)


@pytest.mark.parametrize("name", ["tiny-random", "wide"])
def test_against_the_built_model(name):
    """An independent count: the tensors a forward reads, summed from the model itself."""
    from kvviz.models.presets import build_model

    model = build_model(name)
    tables = model.embed_tokens.weight
    whole = sum(p.numel() for p in model.parameters() if p is not tables)
    if model.lm_head is None:
        whole += tables.numel()
    w = WallShape.from_config(model.cfg)
    assert w.weights_bytes == whole * 4
    assert w.row_bytes == tables.shape[1] * 4


def test_prefill_reads_the_weights_once():
    w = WallShape(weights_bytes=1000, row_bytes=10, kv_bytes_per_token=100)
    assert w.step(0, 7) == StepRead(weights_bytes=1070, kv_bytes=700)
    assert w.step(6, 7) == StepRead(weights_bytes=1010, kv_bytes=700)
    assert w.decode(7).total_bytes == 1710


def test_bandwidth_and_bad_input():
    assert StepRead(weights_bytes=1_000_000, kv_bytes=1_000_000).gbps(1.0) == pytest.approx(2.0)
    assert math.isnan(StepRead(1, 1).gbps(0.0))
    w = WallShape(weights_bytes=1000, row_bytes=10, kv_bytes_per_token=100)
    for start, stop in ((0, 0), (5, 5), (-1, 3), (4, 3)):
        with pytest.raises(ValueError, match="positions"):
            w.step(start, stop)
    with pytest.raises(ValueError, match="no weight"):
        WallShape(0, 0, 0).crossover()
    assert not WallShape(0, 0, 0).known
    assert WallShape.from_config(ModelConfig(), "bf16").kv_bytes_per_token == 1024


def test_a_run_reads_the_sum_of_its_steps():
    from types import SimpleNamespace as Step

    from kvviz.costs.wall import achieved_gbps, bytes_read

    w = WallShape(weights_bytes=1000, row_bytes=10, kv_bytes_per_token=100)
    # a concat-like cache: prefill of 3 (1030 + 300), then decodes at 4 and 5 (1010 + 400, 1010 + 500)
    steps = [Step(pos_start=a, pos_stop=b, cache_len=b, cache_capacity=b, cache_bytes=100 * b)
             for a, b in ((0, 3), (3, 4), (4, 5))]
    assert bytes_read(w, steps) == 1330 + 1410 + 1510
    # naive keeps nothing: it read what it computed, 5 rows and 5 positions
    assert w.read(Step(pos_start=0, pos_stop=5, cache_len=0, cache_capacity=0, cache_bytes=0)).total_bytes == 1550
    # a static cache of 16 slots holding 5: it reads the 5 it holds
    assert w.read(Step(pos_start=4, pos_stop=5, cache_len=5, cache_capacity=16, cache_bytes=1600)).kv_bytes == 500
    # a window of 4 at position 100, stored as int8 with scales (30 B a token): 4 x 30
    assert w.read(Step(pos_start=99, pos_stop=100, cache_len=4, cache_capacity=4, cache_bytes=120)).kv_bytes == 120
    assert achieved_gbps(4250, 0.001) == pytest.approx(4.25) and math.isnan(achieved_gbps(1, 0))


def test_a_speculative_rounds_later_steps_read_nothing():
    """A round's first step carries the target's one forward over every verified row; the accepted drafts after it
    ran none, so they read nothing (no spike of hundreds of GB/s on a step of microseconds)."""
    from types import SimpleNamespace as Step

    w = WallShape(weights_bytes=1000, row_bytes=10, kv_bytes_per_token=100)
    first = Step(pos_start=4, pos_stop=9, cache_len=9, cache_capacity=16, cache_bytes=1600, spec_index=0)
    later = Step(pos_start=5, pos_stop=6, cache_len=9, cache_capacity=16, cache_bytes=1600, spec_index=1)
    assert w.read(first).total_bytes == 1000 + 5 * 10 + 900
    assert w.read(later) == StepRead(weights_bytes=0, kv_bytes=0)
