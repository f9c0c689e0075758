"""`--blas openblas` (kvviz.kernels, issue 26 item 2): every projection of a cached engine through numpy's
OpenBLAS, an option beside the default: the same tokens and figures, torch's threads restored, one-line
refusals (never timed)."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("threadpoolctl")

from kvviz import kernels  # noqa: E402
from kvviz.cli import main  # noqa: E402
from kvviz.config import ModelConfig, SamplingConfig, TraceOptions  # noqa: E402
from kvviz.engines import make_engine  # noqa: E402
from kvviz.models.transformer import Transformer  # noqa: E402

CFG = ModelConfig(name="t", d_model=64, n_layer=2, n_head=4, n_kv_head=2, head_dim=16, d_ff=128, vocab_size=97,
                  max_seq_len=256, tie_embeddings=False, qkv_bias=True)

try:
    kernels.openblas()
    HAVE_OPENBLAS = True
except ValueError:
    HAVE_OPENBLAS = False
needs_openblas = pytest.mark.skipif(not HAVE_OPENBLAS, reason="numpy here is not built on OpenBLAS")


def _run(engine, n=40, trace=None):
    return list(engine.generate(list(range(1, 12)), n, SamplingConfig(), trace or TraceOptions(masks=True, logits=True,
                                                                                                weights_layer=1)))


@needs_openblas
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("key", ["static", "concat", "paged", "window"])
def test_openblas_gives_the_same_tokens_and_figures_and_restores_torchs_threads(key, threads):
    model = Transformer(CFG).init_weights(5)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        ref = _run(make_engine(key, model, window=24))
        got = _run(make_engine(key, model, window=24, blas="openblas"))
        assert torch.get_num_threads() == threads  # held at one thread only while a step runs
    finally:
        torch.set_num_threads(before)
    assert [t.token_id for t in got] == [t.token_id for t in ref]
    for a, b in zip(ref, got):
        assert (a.bytes_written, a.bytes_copied, a.bytes_gathered, a.cache_len, a.kv_projections, a.mask_spec) == (
            b.bytes_written, b.bytes_copied, b.bytes_gathered, b.cache_len, b.kv_projections, b.mask_spec)
        np.testing.assert_allclose(b.logits, a.logits, rtol=0, atol=1e-4)  # another kernel: a rounding apart
        np.testing.assert_allclose(b.attn_weights, a.attn_weights, rtol=0, atol=1e-5)
        assert not np.array_equal(b.logits, np.zeros_like(b.logits))
    # the logits are the trace's own: a later step did not overwrite an earlier one's
    assert not np.array_equal(got[1].logits, got[2].logits)


@needs_openblas
def test_openblas_sets_its_own_threads_to_the_runs():
    model = Transformer(CFG).init_weights(5)
    before = torch.get_num_threads()
    blas = kernels.openblas()
    blas.set_num_threads(1)
    torch.set_num_threads(2)
    try:
        engine = make_engine("static", model, blas="openblas")
        _run(engine, n=3)
        assert engine.kernel.threads == 2 and blas.num_threads == 2
    finally:
        torch.set_num_threads(before)


@needs_openblas
def test_openblas_read_ceiling_is_a_figure():
    gbps = kernels.read_ceiling_openblas(1, buffer_bytes=4 << 20, bursts=2)
    assert 0.01 < gbps < 1e5


def test_openblas_is_refused_in_one_line_where_it_does_not_apply():
    model = Transformer(CFG).init_weights(5)
    with pytest.raises(ValueError, match="eager cached engines alone, not 'naive'"):
        make_engine("naive", model, blas="openblas")
    with pytest.raises(ValueError, match="compiled"):
        make_engine("static", model, blas="openblas", compiled=True)
    with pytest.raises(ValueError, match="unknown --blas 'mkl'"):
        make_engine("static", model, blas="mkl")
    gpt2 = Transformer(CFG)
    gpt2.cfg = ModelConfig(name="g", arch="gpt2", d_model=64, n_layer=2, n_head=4, n_kv_head=4, head_dim=16,
                           d_ff=128, vocab_size=97, max_seq_len=256)
    with pytest.raises(ValueError, match="covers Llama-family models only, not gpt2"):
        make_engine("static", gpt2, blas="openblas")
    if HAVE_OPENBLAS:
        half = Transformer(CFG).init_weights(5).to(torch.bfloat16)
        with pytest.raises(ValueError, match="is for float32 on a CPU, not bfloat16 on cpu"):
            make_engine("static", half, blas="openblas")


@pytest.mark.parametrize("blas", ["openblas", "native"])
def test_bench_refuses_a_kernel_option_below_float32_before_any_run(capsys, blas):
    rc = main(["bench", "--model", "tiny", "--tokens", "3", "--engines", "static", "--repeat", "1", "--dtype",
               "bfloat16", "--blas", blas])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and f"--blas {blas} is for float32 on a CPU, not bfloat16 on cpu" in err[0]


def bench_beside_static(tmp_path, capsys, blas: str, row: str, gbps: float, tokens: int = 4):
    """`kvviz bench --blas BLAS` on tiny beside concat, then `kvviz memory --measured` of its file: the checks
    every kernel option's row shares (static added beside it, the same tokens, its share against its own
    ceiling `gbps`, the other rows against the probe's). Returns (bench text, bench doc, memory lines)."""
    out = tmp_path / "b.json"
    rc = main(["bench", "--model", "tiny", "--prompt", "KV", "--tokens", str(tokens), "--engines", "concat",
               "--repeat", "1", "--threads", "1", "--blas", blas, "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    doc = json.loads(out.read_text())
    cells = {c["engine"]: c for c in doc["results"]}
    assert set(cells) == {"concat", "static", row}  # static added beside the option's row
    assert cells[row]["token_ids"] == cells["static"]["token_ids"]
    assert cells[row]["bytes_written"] == cells["static"]["bytes_written"] > 0
    assert doc["blas"] == blas
    assert cells[row]["read_share"] == pytest.approx(cells[row]["read_gbps"] / gbps)
    assert cells["static"]["read_share"] == pytest.approx(cells["static"]["read_gbps"] /
                                                          doc["wall"]["read_fastest_gbps"])
    assert "tokens identical across engines: yes" in text
    # the roofline's measured lines hold the row against the same ceiling
    assert main(["memory", "--model", "tiny", "--tokens", "10", "--measured", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    line = next(x for x in lines if x.lstrip().startswith(row))
    assert f"{gbps:,.1f} GB/s" in line and "% of the ceiling" in line
    plain = next(x for x in lines if x.lstrip().startswith("static (4 tokens)" if tokens == 4 else "static ("))
    assert "against" not in plain
    return text, doc, line


@needs_openblas
def test_bench_puts_the_openblas_row_beside_static_against_its_own_ceiling(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(kernels, "read_ceiling_openblas", lambda threads: 123.0)
    text, doc, line = bench_beside_static(tmp_path, capsys, "openblas", "static+openblas", 123.0)
    assert doc["openblas_read_gbps"] == 123.0
    assert "OpenBLAS's own read ceiling (numpy.matmul, the same matrix, both layouts, fastest of 9): 123.0 GB/s" in text
    assert "against OpenBLAS's 123.0 GB/s" in line
