"""The decode kernel, one per run (kvviz.kernels): every engine of a run decodes with it, the same tokens under
every kernel, one-line refusals naming the engine and the kernels it can use, and the OpenBLAS kernel's own
figures (never timed)."""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kvviz import kernels  # noqa: E402
from kvviz.cli import main  # noqa: E402
from kvviz.config import ModelConfig, SamplingConfig, TraceOptions  # noqa: E402
from kvviz.engines import ENGINE_KEYS, EXACT_KEYS, make_engine  # noqa: E402
from kvviz.kernels import openblas as openblas_kernel  # noqa: E402
from kvviz.models.transformer import Transformer  # noqa: E402

CFG = ModelConfig(name="t", d_model=64, n_layer=2, n_head=4, n_kv_head=2, head_dim=16, d_ff=128, vocab_size=97,
                  max_seq_len=256, tie_embeddings=False, qkv_bias=True)

try:
    openblas_kernel.openblas()
    HAVE_OPENBLAS = True
except ValueError:
    HAVE_OPENBLAS = False
needs_openblas = pytest.mark.skipif(not HAVE_OPENBLAS, reason="numpy here is not built on OpenBLAS")
needs_native = pytest.mark.skipif(kernels.unavailable("native", "cpu") is not None,
                                  reason=str(kernels.unavailable("native", "cpu")))


def _run(engine, n=40, trace=None):
    return list(engine.generate(list(range(1, 12)), n, SamplingConfig(), trace or TraceOptions(masks=True, logits=True,
                                                                                                weights_layer=1)))


def test_the_catalog_names_what_each_kernel_runs():
    from kvviz import native

    assert kernels.DEFAULT_KERNEL == "torch" and kernels.KERNEL_KEYS[0] == "torch"
    assert set(kernels.KERNELS["native"].engines) == set(native.MODES)  # the C step's own list of cache rules
    assert kernels.kernels_for("naive") == ("torch", "openblas")
    assert kernels.kernels_for("static") == kernels.KERNEL_KEYS
    assert kernels.row_name("static", "native") == "static · C step"
    assert all(kernels.covers("torch", k) for k in ENGINE_KEYS)


@pytest.mark.parametrize("kernel", ["native", "compiled"])
def test_every_engine_the_kernel_covers_decodes_with_it_and_gives_the_torch_tokens(tiny_random, kernel,
                                                                                   own_interpreter):
    if kernels.unavailable(kernel, "cpu"):
        pytest.skip(kernels.unavailable(kernel, "cpu"))
    if kernel == "compiled" and not own_interpreter():  # torch.compile: in a child interpreter
        return
    ref = [t.token_id for t in make_engine("naive", tiny_random).generate([1, 5, 9, 23], 12)]
    covered = [k for k in EXACT_KEYS if kernels.covers(kernel, k)]
    assert covered
    for key in covered:
        engine = make_engine(key, tiny_random, kernel=kernel)
        assert engine.kernel == kernel
        assert [t.token_id for t in engine.generate([1, 5, 9, 23], 12)] == ref, key


@needs_openblas
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("key", ["naive", "static", "concat", "paged", "window"])
def test_openblas_gives_the_same_tokens_and_figures_and_restores_torchs_threads(key, threads):
    model = Transformer(CFG).init_weights(5)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        ref = _run(make_engine(key, model, window=24))
        engine = make_engine(key, model, window=24, kernel="openblas")
        got = _run(engine)
        assert torch.get_num_threads() == threads  # held at one thread only while a step runs
    finally:
        torch.set_num_threads(before)
    assert engine.kernel == "openblas" and engine._linear is not None
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
    blas = openblas_kernel.openblas()
    blas.set_num_threads(1)
    torch.set_num_threads(2)
    try:
        engine = make_engine("static", model, kernel="openblas")
        _run(engine, n=3)
        assert engine._linear.threads == 2 and blas.num_threads == 2
    finally:
        torch.set_num_threads(before)


@needs_openblas
def test_openblas_read_ceiling_is_a_figure():
    gbps = openblas_kernel.read_ceiling_openblas(1, buffer_bytes=4 << 20, bursts=2)
    assert 0.01 < gbps < 1e5


def test_a_kernel_that_cannot_run_an_engine_is_refused_in_one_line_naming_the_engines_kernels():
    model = Transformer(CFG).init_weights(5)
    with pytest.raises(ValueError, match=r"^naive cannot decode with the C step kernel \(--kernel native\); "
                                         r"naive decodes with torch, openblas$"):
        make_engine("naive", model, kernel="native")
    with pytest.raises(ValueError, match=r"^window cannot decode with the CUDA graph kernel .*window decodes with "
                                         r"torch, openblas$"):
        make_engine("window", model, kernel="cuda-graph")
    with pytest.raises(ValueError, match=r"^concat cannot decode with the torch.compile kernel"):
        make_engine("concat", model, kernel="compiled")
    with pytest.raises(ValueError, match="^unknown kernel 'mkl'; choose from torch, native, openblas"):
        make_engine("static", model, kernel="mkl")
    with pytest.raises(ValueError, match="^the CUDA graph kernel runs on CUDA only, not on a CPU$"):
        make_engine("static", model, kernel="cuda-graph")
    gpt2 = Transformer(CFG)
    gpt2.cfg = ModelConfig(name="g", arch="gpt2", d_model=64, n_layer=2, n_head=4, n_kv_head=4, head_dim=16,
                           d_ff=128, vocab_size=97, max_seq_len=256)
    if HAVE_OPENBLAS:
        with pytest.raises(ValueError, match="covers Llama-family models only, not gpt2"):
            make_engine("static", gpt2, kernel="openblas")
        half = Transformer(CFG).init_weights(5).to(torch.bfloat16)
        with pytest.raises(ValueError, match="is for float32 on a CPU, not bfloat16 on cpu"):
            make_engine("static", half, kernel="openblas")


def test_the_form_path_refuses_a_kernel_that_cannot_run_a_ticked_engine():
    from kvviz.config import RunConfig

    with pytest.raises(ValueError, match="^naive cannot decode with the C step kernel"):
        RunConfig(prompt="hi", engines=("naive", "static"), kernel="native")
    assert RunConfig(prompt="hi", engines=("concat", "static"), kernel="native").kernel == "native"


def test_every_engine_of_a_session_run_records_the_runs_kernel(tiny_random):
    import kvviz

    run = kvviz.compare("Hello", engines=("naive", "concat", "static", "paged", "window"), tokens=20,
                        model="tiny-random", threads=1, window=8)
    assert run.info.decode_kernels == ("torch",) * 5 and run.info.kernel == "torch"
    with pytest.raises(ValueError, match="^naive cannot decode with the C step kernel"):
        kvviz.compare("Hello", engines=("naive", "static"), tokens=3, model="tiny-random", kernel="native")


def bench(tmp_path, capsys, *args):
    out = tmp_path / "b.json"
    rc = main(["bench", "--model", "tiny", "--prompt", "KV cache", "--repeat", "1", "--threads", "1",
               "--json", str(out), *args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err, (json.loads(out.read_text()) if out.exists() else None)


def test_the_chapters_table_runs_every_engine_on_the_default_kernel(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    rc, out, _, doc = bench(tmp_path, capsys, "--tokens", "10", "30", "50")
    assert rc == 0 and doc["kernels"] == ["torch"]
    assert {r["kernel"] for r in doc["results"]} == {"torch"}
    for n in (10, 30, 50):
        rows = [r for r in doc["results"] if r["new_tokens"] == n]
        assert [r["engine"] for r in rows] == ["naive", "concat", "static", "paged"]
        assert len({tuple(r["token_ids"]) for r in rows}) == 1
    assert "decode kernel, every engine alike: PyTorch (torch)" in out
    assert "tokens identical across engines: yes" in out
    # one short line about the machine, the probe's details under --verbose only
    machine = next(line for line in out.splitlines() if "read ceiling" in line)
    assert len(machine) < 200 and "fastest of" not in out and "median" not in machine


@needs_native
def test_a_kernel_comparison_gives_two_rows_per_engine_with_the_same_tokens(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    rc, out, _, doc = bench(tmp_path, capsys, "--tokens", "12", "--engines", "concat,static,paged",
                            "--kernels", "torch,native")
    assert rc == 0
    names = [r["row"] for r in doc["results"]]
    assert names == ["concat · PyTorch", "concat · C step", "static · PyTorch", "static · C step",
                     "paged · PyTorch", "paged · C step"]
    assert [r["kernel"] for r in doc["results"]] == ["torch", "native"] * 3
    assert len({tuple(r["token_ids"]) for r in doc["results"]}) == 1
    torch_rows = {r["engine"]: r for r in doc["results"] if r["kernel"] == "torch"}
    for r in doc["results"]:  # each row against its engine under the first kernel
        assert r["speedup"] == pytest.approx(torch_rows[r["engine"]]["total_ms"] / r["total_ms"])
    assert "tokens identical across engines and kernels: yes" in out and "static · C step" in out
    # the roofline's measured lines name each row with its kernel, every one against the machine's ceiling
    assert main(["memory", "--model", "tiny", "--tokens", "10", "--measured", str(tmp_path / "b.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    ceiling = f"{doc['wall']['read_fastest_gbps']:,.1f} GB/s"
    assert any(ceiling in line for line in lines)
    for name in ("static · PyTorch (12 tokens)", "static · C step (12 tokens)"):
        assert any(line.lstrip().startswith(name) and "against" not in line for line in lines), name


@pytest.mark.parametrize("args, message", [
    (["--kernel", "native"], "naive cannot decode with the C step kernel (--kernel native); naive decodes with "
                             "torch, openblas"),
    (["--kernels", "torch,compiled"], "naive cannot decode with the torch.compile kernel"),
    (["--kernels", "torch,torch"], "a kernel is named twice"),
    (["--engines", "static", "--kernel", "cuda-graph"], "the CUDA graph kernel runs on CUDA only, not on a CPU"),
])
def test_bench_refuses_a_kernel_an_engine_cannot_use_in_one_line(tmp_path, capsys, args, message):
    rc, out, err, doc = bench(tmp_path, capsys, "--tokens", "3", *args)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and message in lines[0] and doc is None


@pytest.mark.parametrize("kernel", ["openblas", "native"])
def test_bench_refuses_a_cpu_kernel_below_float32_before_any_run(capsys, kernel):
    rc = main(["bench", "--model", "tiny", "--tokens", "3", "--engines", "static", "--repeat", "1", "--dtype",
               "bfloat16", "--kernel", kernel])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and f"--kernel {kernel} is for float32 on a CPU, not bfloat16 on cpu" in err[0]
