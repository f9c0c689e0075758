"""The roofline of a decode step: bytes, FLOP per byte at batch 1 and batch B, the tokens/s
a ceiling allows, and a bench run's measured tokens/s beside them; figures worked by hand on the chapter's
tiny shape (2 layers, 4 heads of 32, hidden 128, d_ff 512, 256-token vocabulary, tied head, fp32)."""
from __future__ import annotations

import json

import pytest

from kvviz.cli import main
from kvviz.config import ModelConfig
from kvviz.costs.memory import decode_point, measured_decode, measured_from_bench, roofline
from kvviz.costs.wall import WallShape

# Per layer: 128 (norm) + 128 x 384 (qkv) + 128 x 128 (o) + 128 (norm) + 128 x 1024 (gate/up) + 512 x 128
# (down) = 262,400; two layers, the final norm's 128 and the tied head's 256 x 128: 557,696 elements, 4 B each
WEIGHTS = 557_696 * 4
ROW, KV = 128 * 4, 2 * 2 * 4 * 32 * 4  # one embedding row; K and V of one position, 2 layers, 4 heads of 32


def test_decode_point_by_hand():
    cfg = ModelConfig(name="chapter-tiny")
    one = decode_point(cfg, 100, 1, 10.0)
    assert one.bytes_per_step == WEIGHTS + ROW + 100 * KV == 2_436_096
    # a multiply-add per weight, and q.k plus weights.v: 2 x 2 x 4 heads x 32 x 100 positions x 2 layers
    assert one.flops_per_step == 2 * 557_696 + 4 * 4 * 32 * 100 * 2 == 1_217_792
    assert one.intensity == pytest.approx(1_217_792 / 2_436_096)  # ~0.5 FLOP a byte: fp32 at batch 1
    assert one.tokens_per_s == pytest.approx(10e9 / 2_436_096)  # 4,104.9 steps a second at 10 GB/s
    assert one.step_ms == pytest.approx(2_436_096 / 10e9 * 1e3)
    four = decode_point(cfg, 100, 4, 10.0)
    assert four.bytes_per_step == WEIGHTS + 4 * (ROW + 100 * KV) == 3_052_032  # the weights read once
    assert four.flops_per_step == 4 * 1_217_792
    assert four.tokens_per_s == pytest.approx(4 * 10e9 / 3_052_032)  # 13,106 tokens a second in all
    assert four.intensity == pytest.approx(4 * 1_217_792 / 3_052_032)
    with pytest.raises(ValueError, match="batch"):
        decode_point(cfg, 100, 0, 10.0)
    with pytest.raises(ValueError, match="bandwidth"):
        decode_point(cfg, 100, 1, 0.0)


def test_roofline_pairs_batch_one_with_batch_b():
    roof = roofline(ModelConfig(name="chapter-tiny"), (100, 1000), ceiling_gbps=10.0, ceiling="read ceiling", batch=4)
    assert [(a.kv_len, a.batch, b.kv_len, b.batch) for a, b in roof.points] == [(100, 1, 100, 4), (1000, 1, 1000, 4)]
    # at 1000 positions the K/V (2,048,000 B a sequence) is almost the weights: batching gains less
    assert roof.points[1][1].bytes_per_step == WEIGHTS + 4 * (ROW + 1000 * KV)
    assert json.loads(json.dumps(roof.to_dict()))["points"][0][1]["batch"] == 4


def test_measured_beside_allowed():
    shape = WallShape.from_config(ModelConfig(name="chapter-tiny"))
    # two decode steps, to 5 and to 6 positions, 1 ms each: 2,231,296 + 5 x 2,048 and 2,231,296 + 6 x 2,048 B
    m = measured_decode("concat", shape, [(5, 1.0), (6, 1.0)], 10.0)
    assert m.steps == 2 and m.bytes_read == 2 * 2_231_296 + 11 * 2_048 and m.ms == 2.0
    assert m.tokens_per_s == pytest.approx(1000.0)
    assert m.allowed_tokens_per_s == pytest.approx(2 / (m.bytes_read / 10e9))
    assert m.share == pytest.approx(1000.0 / m.allowed_tokens_per_s)
    assert measured_decode("none", shape, [], 10.0) is None


def test_measured_from_a_bench_file():
    doc = {"model": ModelConfig(name="chapter-tiny").to_dict(), "dtype": "float32", "prompt_tokens": 4,
           "wall": {"read_gbps": 10.0, "copy_gbps": 25.0},
           "results": [{"engine": "static", "new_tokens": 3, "step_ms": [9.0, 1.0, 1.0]}]}
    rows, gbps, kind = measured_from_bench(doc)
    assert (gbps, kind) == (10.0, "read ceiling")
    # the prefill (9 ms) left out; the decodes attend over 5 and 6 positions
    assert rows[0].steps == 2 and rows[0].bytes_read == 2 * 2_231_296 + 11 * 2_048 and rows[0].ms == 2.0
    del doc["wall"]["read_gbps"]
    assert measured_from_bench(doc)[1:] == (25.0, "copy bandwidth (a file from before the read ceiling)")
    with pytest.raises(ValueError, match="bench"):
        measured_from_bench({"results": []})


def test_memory_command_prints_the_roofline(tmp_path, capsys):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"model": ModelConfig(name="chapter-tiny").to_dict(), "dtype": "float32",
                                 "prompt_tokens": 4, "wall": {"read_gbps": 10.0},
                                 "results": [{"engine": "static", "new_tokens": 3, "step_ms": [9.0, 1.0, 1.0]}]}))
    out = tmp_path / "m.json"
    assert main(["memory", "--model", "chapter-tiny", "--tokens", "100", "--bandwidth-gbps", "10", "--batch", "4",
                 "--measured", str(bench), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "roofline of a decode step at 10.0 GB/s (--bandwidth-gbps), float32" in text
    assert "    100    2.3 MiB     0.5   4,104.9      2.9 MiB     1.6  13,106.0" in text
    assert "static (3 tokens)" in text and "1,000.0 tok/s measured" in text
    doc = json.loads(out.read_text())
    assert doc["roofline"]["points"][0][0]["bytes_per_step"] == 2_436_096
    assert doc["measured"][0]["steps"] == 2
    assert main(["memory", "--model", "chapter-tiny", "--threads", "1"]) == 2  # --threads needs --device
    assert "--threads needs --device cpu" in capsys.readouterr().err
