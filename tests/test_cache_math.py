"""The memory arithmetic of the cache strategies and of MLA, against hand-worked figures and against
the bytes the engines' caches really hold."""
from __future__ import annotations

import pytest

from kvviz.config import ModelConfig
from kvviz.costs.cache_math import MLA_PRESETS, mla_figures, strategy_figures
from kvviz.engines import make_engine

QWEN3_06B = ModelConfig(name="q", arch="qwen3", d_model=1024, n_layer=28, n_head=16, n_kv_head=8, head_dim=128,
                        d_ff=3072, dtype="bfloat16")


def test_hand_worked_rows_qwen3_06b_bf16():
    # full: 28 layers x K,V x 8 heads x 128 x 2 B = 114,688 B per token (112 KiB)
    f = strategy_figures(QWEN3_06B, "full", 1000)
    assert f.bytes_per_token == 114_688 and f.bytes == 114_688_000
    # window 256: stops at 256 tokens: 256 x 114,688 = 29,360,128 B (28 MiB) however long the run
    w = strategy_figures(QWEN3_06B, "window", 1000, window=256)
    assert (w.held_tokens, w.bytes, w.stops_growing_at) == (256, 29_360_128, 256)
    assert strategy_figures(QWEN3_06B, "window", 100, window=256).bytes == 100 * 114_688  # still growing
    # int8: 28 x 2 x 8 x (128 + 4) = 59,136 B per token, 51.6% of bf16 (a 4 B scale per 128 values)
    q = strategy_figures(QWEN3_06B, "int8", 1000)
    assert q.bytes_per_token == 59_136 and q.bytes == 59_136_000
    # with R = 64: kvviz keeps a payload slot for every position and a ring of 64 bf16 tokens
    assert strategy_figures(QWEN3_06B, "int8", 1000, residual=64).bytes == 1000 * 59_136 + 64 * 114_688


def test_hand_worked_score_caches_qwen3_06b_bf16():
    # tova, h2o, knorm at W = 256: window's 256 slots, 256 x 114,688 = 29,360,128 B, however long the run
    for key in ("tova", "h2o", "knorm"):
        f = strategy_figures(QWEN3_06B, key, 1000, window=256)
        assert (f.held_tokens, f.bytes, f.stops_growing_at, f.once_bytes) == (256, 29_360_128, 256, 0)
    # tova and knorm carry no score from step to step; h2o one float64 per held position: 256 x 8 = 2,048 B
    assert strategy_figures(QWEN3_06B, "tova", 1000, window=256).total_bytes == 29_360_128
    assert strategy_figures(QWEN3_06B, "knorm", 1000, window=256).score_bytes == 0
    h2o = strategy_figures(QWEN3_06B, "h2o", 1000, window=256)
    assert (h2o.score_bytes, h2o.total_bytes) == (2_048, 29_362_176)
    # still filling: 100 positions held, 800 B of h2o scores
    assert strategy_figures(QWEN3_06B, "h2o", 100, window=256).total_bytes == 100 * 114_688 + 800
    # snapkv: a 900-token prompt cut to 256 once (900 x 8 = 7,200 B of scores while it cuts), then 100 new
    # tokens kept: 356 x 114,688 = 40,828,928 B, and it grows on
    s = strategy_figures(QWEN3_06B, "snapkv", 1000, window=256, prompt=900)
    assert (s.held_tokens, s.bytes, s.stops_growing_at, s.once_bytes, s.score_bytes) == (
        356, 40_828_928, None, 7_200, 0)
    # a prompt within W is never cut: every token held, nothing scored
    s = strategy_figures(QWEN3_06B, "snapkv", 1000, window=256, prompt=200)
    assert (s.held_tokens, s.once_bytes) == (1000, 0)
    assert strategy_figures(QWEN3_06B, "snapkv", 1000, window=256).held_tokens == 256  # all prompt


def test_mla_hand_worked_deepseek():
    v3 = MLA_PRESETS["deepseek-v3"]
    # (kv_lora_rank 512 + rope 64) x 2 B = 1,152 B per layer; 61 layers: 70,272 B per token
    assert v3.bytes_per_token_per_layer() == 1152 and v3.bytes_per_token() == 70_272
    # without compression: 128 heads x (128 + 64 + 128) x 2 B = 81,920 B per layer, x 61 = 4,997,120 B
    assert v3.mha_bytes_per_token() == 4_997_120
    assert v3.bytes_per_token() / v3.mha_bytes_per_token() == pytest.approx(0.01406, abs=1e-5)
    assert MLA_PRESETS["deepseek-v2"].bytes_per_token() == 60 * 1152 == 69_120
    assert mla_figures(MLA_PRESETS["deepseek-v2-lite"], 4096).bytes == 4096 * 27 * 1152


@pytest.mark.parametrize("key,strategy", [("static", "full"), ("window", "window"), ("sinks", "sinks"),
                                          ("int8", "int8")])
def test_figures_equal_the_bytes_the_caches_hold(tiny_random, key, strategy):
    """A run stores prompt + new - 1 tokens; static and int8 preallocate prompt + new (their capacity)."""
    eng = make_engine(key, tiny_random, window=8, sinks=2, residual=3)
    traces = list(eng.generate(list(range(65, 75)), 12))
    cap = 10 + 12
    tokens = cap if key in ("static", "int8") else traces[-1].pos_stop
    f = strategy_figures(tiny_random.cfg, strategy, tokens, window=8, sinks=2, residual=3)
    assert traces[-1].cache_bytes == f.bytes


@pytest.mark.parametrize("key", ["tova", "h2o", "knorm", "snapkv"])
def test_score_cache_figures_equal_what_the_caches_hold(tiny_random, key):
    """W = 8, a 10-token prompt, 12 new tokens: tova, h2o and knorm allocate W slots; snapkv the cut prompt and
    a slot for every new token. h2o's scores are the float64 array its cache keeps for the positions held."""
    eng = make_engine(key, tiny_random, window=8)
    traces = list(eng.generate(list(range(65, 75)), 12))
    tokens = traces[-1].pos_stop if key != "snapkv" else 10 + 12  # snapkv allocates the run's length
    f = strategy_figures(tiny_random.cfg, key, tokens, window=8, prompt=10)
    assert traces[-1].cache_bytes == f.bytes and traces[-1].cache_len == f.held_tokens - (key == "snapkv")
    cache = eng.cache
    kept = cache.score[:cache.used].nbytes if key == "h2o" else 0
    assert f.score_bytes == kept
    assert f.once_bytes == (10 * 8 if key == "snapkv" else 0)


def test_bad_strategy_settings():
    with pytest.raises(ValueError, match="sinks"):
        strategy_figures(QWEN3_06B, "sinks", 10, window=4, sinks=4)
    with pytest.raises(ValueError, match="unknown strategy"):
        strategy_figures(QWEN3_06B, "mla", 10)
    with pytest.raises(ValueError, match="snapkv: the prompt"):
        strategy_figures(QWEN3_06B, "snapkv", 10, prompt=11)


def test_memory_command_prints_the_strategies_and_mla(capsys):
    import json

    from kvviz.cli import main

    assert main(["memory", "--model", "qwen3-0.6b", "--tokens", "100", "1000", "--window", "256",
                 "--mla", "deepseek-v3", "--json", "/tmp/caches_memory_test.json"]) == 0
    out = capsys.readouterr().out
    assert "int8 59,136 B per token (51.6% of 114,688" in out
    # hand rows above, in MiB: full, window, sinks, tova, h2o, knorm (W slots; h2o's 2 KiB of scores round away),
    # snapkv (no prompt to cut: every token), int8
    assert "   1000  109.4 MiB" + "   28.0 MiB" * 5 + "  109.4 MiB   56.4 MiB" in out
    assert "window and sinks stop growing at 256 tokens: 28.0 MiB" in out
    assert "= 70,272 B per token" in out and "(1.4%)" in out
    doc = json.load(open("/tmp/caches_memory_test.json"))
    assert doc["strategies"][1]["window"]["bytes"] == 29_360_128 and doc["mla"]["bytes_per_token"] == 70_272
    assert doc["strategies"][1]["h2o"]["score_bytes"] == 256 * 8 and doc["strategies"][1]["tova"]["score_bytes"] == 0


def test_memory_command_cuts_snapkvs_prompt(capsys):
    """--prompt-tokens 900 at 1,000 tokens: snapkv holds W + 100 = 356 tokens (hand: 356 x 114,688 B = 38.9 MiB)."""
    from kvviz.cli import main

    assert main(["memory", "--model", "qwen3-0.6b", "--tokens", "1000", "--window", "256",
                 "--prompt-tokens", "900"]) == 0
    row = [line for line in capsys.readouterr().out.splitlines() if line.startswith("   1000 ")][-1]  # the strategies
    assert row.split()[-4:] == ["38.9", "MiB", "56.4", "MiB"] and 356 * 114_688 == 40_828_928


@pytest.mark.parametrize("argv", [["--window", "0"], ["--sinks", "32", "--window", "32"], ["--residual", "-1"],
                                  ["--mla", "nope"]])
def test_memory_command_refuses_bad_settings(argv, capsys):
    from kvviz.cli import main

    with pytest.raises(SystemExit) as exc:
        assert main(["memory", *argv]) == 2
        raise SystemExit(2)
    assert exc.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) <= 2  # usage + one line
