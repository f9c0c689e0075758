"""The native decode step (kvviz.native): each concat, static and paged decode step as one call of kvviz's C
kernel, the `native` kernel (`--kernel native`, kernel="native"): the same tokens, logits within a rounding, the
same figures and cache contents as torch's path, the traced head's weights from C, the bare loop on the same
kernel, the build cached and written whole, one-line refusals where it does not apply (never timed)."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kvviz import native  # noqa: E402
from kvviz.config import ModelConfig, SamplingConfig, TraceOptions  # noqa: E402
from kvviz.engines import make_engine  # noqa: E402
from kvviz.measure import bandwidth  # noqa: E402
from kvviz.models.transformer import Transformer  # noqa: E402

# Builds go to ~/.cache/kvviz/native; the tests keep the user's own (one build for the session, here)
BUILDS = tempfile.mkdtemp(prefix="kvviz-native-test-")
try:  # a compiler that cannot build it (no OpenMP, say) is refused in one line; the tests that need it skip
    _before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = BUILDS
    native.load()
    WHY_NOT = None
except ValueError as exc:
    WHY_NOT = str(exc)
finally:
    if _before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = _before
needs_cc = pytest.mark.skipif(WHY_NOT is not None, reason=f"kvviz/native/step.c cannot be built here: {WHY_NOT}")

# Every feature the C step covers: grouped-query heads, a QKV bias, q/k norms (Qwen3), an untied head, a
# width (96) not a multiple of the kernel's row blocks, llama3 rope scaling, and widths below and between
# its vectors of 16, 8 or 4 floats (heads of 10, a hidden width of 40, an MLP of 52: the scalar tails of
# every sum at 16, of the heads' and the MLP's at 8 and 4), and a hidden width (42) that step.c's four
# streams a matrix do not divide, so that the rows left over after the quarters are read too, by each thread
CONFIGS = {
    "odd-hidden": ModelConfig(name="f", d_model=42, n_layer=2, n_head=3, n_kv_head=1, head_dim=14, d_ff=58,
                              vocab_size=79, max_seq_len=256, tie_embeddings=False),
    "odd-widths": ModelConfig(name="e", d_model=40, n_layer=2, n_head=4, n_kv_head=2, head_dim=10, d_ff=52,
                              vocab_size=83, max_seq_len=256, tie_embeddings=False),
    "gqa-bias": ModelConfig(name="a", d_model=96, n_layer=2, n_head=6, n_kv_head=2, head_dim=16, d_ff=200,
                            vocab_size=97, max_seq_len=256, tie_embeddings=False, qkv_bias=True),
    "qwen3": ModelConfig(name="b", arch="qwen3", d_model=64, n_layer=3, n_head=4, n_kv_head=2, head_dim=32,
                         d_ff=128, vocab_size=101, max_seq_len=256, qk_norm=True, norm_eps=1e-6, rope_theta=1e6),
    "llama3-rope": ModelConfig(name="c", d_model=128, n_layer=2, n_head=4, n_kv_head=4, head_dim=32, d_ff=384,
                               vocab_size=89, max_seq_len=256, tie_embeddings=False,
                               rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                             "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
}


def _run(engine, n=40, trace=None, prompt=None):
    return list(engine.generate(prompt or list(range(1, 12)), n, SamplingConfig(),
                                trace or TraceOptions(masks=True, logits=True)))


@pytest.fixture(autouse=True)
def _own_cache(monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", BUILDS)


KEYS = ("concat", "static", "paged")  # the caches step.c reads in place
FIGURES = ("bytes_written", "bytes_copied", "bytes_gathered", "cache_len", "cache_capacity", "cache_bytes",
           "block_table", "block_size", "kv_projections", "mask_spec", "pos_start", "pos_stop")


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_native_gives_the_same_tokens_logits_and_figures_as_torch(name, key, threads):
    model = Transformer(CONFIGS[name]).init_weights(7)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        ref = _run(make_engine(key, model, block_size=4))
        engine = make_engine(key, model, block_size=4, kernel="native")
        got = _run(engine)
    finally:
        torch.set_num_threads(before)
    assert engine.kernel == "native" and engine.native is not None and engine.native.threads == threads
    assert [t.token_id for t in got] == [t.token_id for t in ref]
    for a, b in zip(ref, got):
        assert [getattr(a, f) for f in FIGURES] == [getattr(b, f) for f in FIGURES]
        np.testing.assert_allclose(b.logits, a.logits, rtol=0, atol=1e-4)  # sums in another order
        assert np.abs(b.logits).max() > 0.1  # a real result, not a zeroed buffer
    assert not np.array_equal(got[1].logits, got[2].logits)  # each step's logits are its own tensor
    if key == "concat":  # the chapter's copy is made and counted: the whole history, every step
        assert all(t.bytes_copied == 2 * model.cfg.n_layer * (t.pos_start * model.cfg.n_kv_head
                                                              * model.cfg.head_dim * 4) for t in got[1:])
    if key == "paged":
        assert all(t.bytes_gathered > 0 for t in got) and len(set(got[-1].block_table)) == len(got[-1].block_table)


def _kv(engine, layer):
    """(K, V) of every position the run stored, (KV, T, D), whatever the cache's layout."""
    c = engine.cache
    stop = c.seq_len
    if c.key == "paged":
        S = c.block_size
        rows = [c.table[p // S] * S + p % S for p in range(stop)]
        return tuple(pool[layer].reshape(-1, *pool[layer].shape[2:])[rows].transpose(0, 1).numpy()
                     for pool in (c.k_pool, c.v_pool))
    return c.k[layer][0, :, :stop].numpy(), c.v[layer][0, :, :stop].numpy()


@needs_cc
@pytest.mark.parametrize("key", KEYS)
def test_the_cache_holds_the_same_keys_and_values_as_torchs(key):
    model = Transformer(CONFIGS["qwen3"]).init_weights(3)
    ref, got = make_engine(key, model, block_size=4), make_engine(key, model, block_size=4, kernel="native")
    _run(ref, n=20)
    _run(got, n=20)
    stop = ref.cache.seq_len
    assert stop == got.cache.seq_len == 11 + 19 and got.kernel == "native"
    for layer in range(model.cfg.n_layer):
        for a, b in zip(_kv(ref, layer), _kv(got, layer)):
            assert a.shape == b.shape == (model.cfg.n_kv_head, stop, model.cfg.head_dim)
            np.testing.assert_allclose(b, a, rtol=0, atol=1e-4)
    if key == "static":
        assert not got.cache.k[0][:, :, stop:].any()  # nothing written past the run's positions
    if key == "concat":
        assert got.cache.k[0].shape[2] == stop and got.cache.k[0].is_contiguous()  # grown a row a step


@needs_cc
def test_the_native_kernel_is_asked_for_never_chosen_behind_the_users_back():
    model = Transformer(CONFIGS["gqa-bias"]).init_weights(5)
    assert [make_engine(k, model).kernel for k in KEYS] == ["torch"] * 3  # the default: PyTorch's ops
    assert all(make_engine(k, model).native is None for k in KEYS)
    assert [make_engine(k, model, kernel="native").kernel for k in KEYS] == ["native"] * 3


@needs_cc
def test_the_native_pick_is_torchs_argmax_and_a_non_finite_logit_stops_the_run():
    from kvviz.sampling import NonFiniteLogits

    model = Transformer(CONFIGS["llama3-rope"]).init_weights(4)
    engine = make_engine("static", model)
    out = _run(engine, n=3)
    assert all(t.token_id == int(np.argmax(t.logits)) for t in out)
    steps = make_engine("static", model).generate(list(range(1, 12)), 5, SamplingConfig(), TraceOptions())
    assert next(steps).phase == "prefill"  # torch's forward, finite
    with torch.no_grad():  # in place: the C step reads these very weights
        model.lm_head.weight[7].fill_(float("inf"))  # +inf and -inf summed: a non-finite logit 7
    with pytest.raises(NonFiniteLogits):
        next(steps)  # the first decode step, in C
    step = native.NativeStep.for_cache(model, engine.cache, 1)
    logits, _, greedy = step(3, 2)
    assert greedy is None and not np.isfinite(logits[0, 7].item())  # the C pick declines; Python's check refuses


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("layer, head", [(0, 0), (1, 3), (1, 5)])
def test_a_traced_step_gives_the_heads_weights_from_c(layer, head, threads, monkeypatch):
    """The traced head's softmax comes out of the C step (grouped heads: 3 and 5 share KV head 1 and 2)."""
    model = Transformer(CONFIGS["gqa-bias"]).init_weights(5)
    trace = TraceOptions(masks=True, logits=True, weights_layer=layer, weights_head=head)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        ref = _run(make_engine("static", model), n=12, trace=trace)
        engine = make_engine("static", model, kernel="native")
        calls = []
        real = native.NativeStep.__call__
        monkeypatch.setattr(native.NativeStep, "__call__", lambda self, *a: calls.append(a) or real(self, *a))
        got = _run(engine, n=12, trace=trace)
    finally:
        torch.set_num_threads(before)
    assert len(calls) == 11 and all(c[2:] == (layer, head) for c in calls)  # every decode step, in C
    assert [t.token_id for t in got] == [t.token_id for t in ref]
    np.testing.assert_array_equal(got[0].attn_weights, ref[0].attn_weights)  # prefill: torch's
    for a, b in zip(ref[1:], got[1:]):
        assert b.attn_weights.shape == a.attn_weights.shape == (1, a.pos_stop)
        np.testing.assert_allclose(b.attn_weights, a.attn_weights, rtol=0, atol=1e-5)
        np.testing.assert_allclose(b.attn_weights.sum(), 1.0, atol=1e-5)
    assert not np.array_equal(got[3].attn_weights[0, :3], got[4].attn_weights[0, :3])  # each step its own


@needs_cc
def test_a_long_run_grows_nothing_mid_run():
    """The rotary tables are made long enough for the whole run before the C step reads their address."""
    cfg = ModelConfig(name="d", d_model=64, n_layer=1, n_head=4, n_kv_head=4, head_dim=16, d_ff=128, vocab_size=61,
                      max_seq_len=6000, tie_embeddings=False)
    model = Transformer(cfg).init_weights(2)
    ref = _run(make_engine("static", model), n=4200 - 11, trace=TraceOptions(masks=False, logits=True))
    model = Transformer(cfg).init_weights(2)
    got = _run(make_engine("static", model, kernel="native"), n=4200 - 11, trace=TraceOptions(masks=False, logits=True))
    assert [t.token_id for t in got] == [t.token_id for t in ref]
    np.testing.assert_allclose(got[-1].logits, ref[-1].logits, rtol=0, atol=1e-4)


@needs_cc
def test_the_build_is_cached_and_written_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(native, "_LIB", None)
    lib = native.load()
    path = native.library_path(native.compiler())
    assert path.is_file() and path.parent == tmp_path / "kvviz" / "native"
    assert os.listdir(path.parent) == [path.name]  # the temporary name renamed, nothing else left
    assert lib.kv_workspace_floats is not None
    stamp = path.stat().st_mtime_ns
    monkeypatch.setattr(native, "_LIB", None)
    native.load()
    assert path.stat().st_mtime_ns == stamp  # built once per source, flags and CPU


@needs_cc
def test_a_build_that_fails_says_why_in_one_line(tmp_path, monkeypatch):
    broken = tmp_path / "step.c"
    broken.write_text("int kv_decode( {\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(native, "_LIB", None)
    monkeypatch.setattr(native, "SOURCE", broken)
    with pytest.raises(ValueError, match=r"could not build step\.c: .*error") as err:
        native.load()
    assert "\n" not in str(err.value)
    assert not list((tmp_path / "cache" / "kvviz" / "native").iterdir())  # no half-written library left


def test_native_is_refused_in_one_line_where_it_does_not_apply(monkeypatch):
    model = Transformer(CONFIGS["gqa-bias"]).init_weights(5)
    with pytest.raises(ValueError, match=r"^window cannot decode with the C step kernel \(--kernel native\); "
                                         r"window decodes with torch, openblas$"):
        make_engine("window", model, kernel="native")
    with pytest.raises(ValueError, match="^naive cannot decode with the C step kernel"):
        make_engine("naive", model, kernel="native")
    gpt2 = Transformer(CONFIGS["gqa-bias"])
    gpt2.cfg = ModelConfig(name="g", arch="gpt2", d_model=64, n_layer=2, n_head=4, n_kv_head=4, head_dim=16,
                           d_ff=128, vocab_size=97, max_seq_len=256)
    with pytest.raises(ValueError, match="covers Llama-family models only, not gpt2"):
        make_engine("static", gpt2, kernel="native")
    half = Transformer(CONFIGS["gqa-bias"]).init_weights(5).to(torch.bfloat16)
    with pytest.raises(ValueError, match="is for float32 on a CPU, not bfloat16 on cpu"):
        make_engine("static", half, kernel="native")
    monkeypatch.setattr(native, "_LIB", None)
    monkeypatch.setattr(native, "compiler", lambda: None)
    with pytest.raises(ValueError, match=r"needs a C compiler \(cc or \$CC\), and none was found"):
        make_engine("static", model, kernel="native")


@needs_cc
def test_native_read_ceiling_is_a_figure():
    gbps = bandwidth.read_ceiling_native(1, buffer_bytes=4 << 20, bursts=2)
    assert 0.01 < gbps < 1e5


@needs_cc
def test_an_unwritable_build_folder_is_one_line_and_torch_still_runs(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.setattr(native, "_LIB", None)
    monkeypatch.setattr(native, "_WHY_NOT", {})
    with pytest.raises(ValueError, match=r"^--kernel native: could not build or load step\.c: \w+Error: ") as err:
        native.load()
    assert "\n" not in str(err.value)
    model = Transformer(CONFIGS["gqa-bias"]).init_weights(5)
    assert native.why_not(model, "static") == str(err.value)
    with pytest.raises(ValueError, match=r"could not build or load step\.c"):
        make_engine("static", model, kernel="native")
    assert len(_run(make_engine("static", model), n=5)) == 5  # the default kernel needs no build


@needs_cc
def test_the_bench_times_the_step_beside_the_probe_in_turns(tmp_path, capsys):
    import json

    from kvviz.cli import main
    from kvviz.costs.wall import WallShape
    from kvviz.models.presets import preset_config

    out = tmp_path / "beside.json"
    assert main(["bench", "--model", "tiny", "--prompt", "KV", "--tokens", "5", "--engines", "concat,static,paged",
                 "--repeat", "1", "--threads", "1", "--beside", "4", "--kernel", "native", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    rows = {b["engine"]: b for b in doc["beside"]}
    assert sorted(rows) == ["paged", "static"]  # concat's copy is torch.cat, outside the C step
    wall = WallShape.from_config(preset_config("tiny"), "float32")
    for b in rows.values():
        assert b["position"] == doc["prompt_tokens"] + 5 - 1  # the step after the run's last
        assert b["step_bytes"] == wall.decode(b["position"] + 1).total_bytes
        assert b["steps"] == 4 and b["probe_layout"] in ("row-major", "column-major")
        assert b["step_ms"] > 0 and b["probe_gbps"] > 0
        assert abs(b["step_gbps"] - b["step_bytes"] / b["step_ms"] / 1e6) < 1e-6 * b["step_gbps"]
        assert abs(b["share"] - b["step_gbps"] / b["probe_gbps"]) < 1e-9
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("side by side"))
    assert "static's decode step at position" in line and "paged's decode step" in line
    assert main(["bench", "--model", "tiny", "--prompt", "KV", "--tokens", "3", "--engines", "static",
                 "--repeat", "1", "--threads", "1", "--beside", "2", "--kernel", "torch"]) == 0
    assert "--beside: no static or paged row decodes on the C step here" in capsys.readouterr().err


def _cpu_has(flag: str) -> bool:
    line = next((ln for ln in open("/proc/cpuinfo").read().splitlines() if ln.startswith("flags")), "")
    return flag in line.split()


X86_LINUX = os.path.exists("/proc/cpuinfo") and _cpu_has("sse2")
X86_GCC = pytest.mark.skipif(
    not (X86_LINUX and native.compiler() and os.path.basename(native.compiler()) in ("cc", "gcc", "clang")),
    reason="the narrower builds need gcc or clang on an x86-64 Linux CPU")


@needs_cc
@pytest.mark.skipif(not X86_LINUX, reason="the CPU's vector width is read from an x86 /proc/cpuinfo")
def test_the_build_sums_on_vectors_of_the_cpus_own_width():
    # GCC keeps a vector wider than the CPU's registers in memory: step.c's 16-float vectors on an AVX2 CPU
    # read the row-major matrices at 0.58 of the column-major ones (docs/figures.md, "the C step's vectors at the
    # CPU's width")
    assert native.vector_floats() == (16 if _cpu_has("avx512f") else 8 if _cpu_has("avx") else 4)


@needs_cc
@X86_GCC
@pytest.mark.parametrize("extra, width", [(("-mno-avx512f",), None), (("-mno-avx",), 4)])
def test_a_narrower_build_gives_the_same_tokens_and_logits_as_torch(extra, width, tmp_path, monkeypatch):
    # every width's code runs here, whatever this CPU's own is: a build told not to use AVX-512 (8 floats on
    # an AVX CPU) and one told not to use AVX at all (SSE, 4 floats), each against torch's path
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(native, "FLAGS", native.FLAGS + extra)
    monkeypatch.setattr(native, "_LIB", None)
    assert native.vector_floats() == (width or (8 if _cpu_has("avx") else 4))
    for name in ("odd-widths", "qwen3"):
        model = Transformer(CONFIGS[name]).init_weights(11)
        for key in ("static", "paged"):
            ref = _run(make_engine(key, model, kernel="torch", block_size=4))
            engine = make_engine(key, model, block_size=4, kernel="native")
            got = _run(engine)
            assert engine.kernel == "native"
            assert [t.token_id for t in got] == [t.token_id for t in ref]
            np.testing.assert_allclose(got[-1].logits, ref[-1].logits, rtol=0, atol=1e-4)


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("out, n_in", [(96, 64), (70, 42), (3, 19), (1536, 512)])
def test_the_multi_row_product_equals_f_linear(out, n_in, threads):
    # kv_gemm (the serving step's product of many rows): every row count around its groups of four, widths
    # below and between its vectors, fewer output rows than its four streams, with and without a bias
    lib = native.load()
    gen = torch.Generator().manual_seed(out + n_in)
    w = torch.randn(out, n_in, generator=gen)
    bias = torch.randn(out, generator=gen)
    for rows in (1, 2, 3, 4, 5, 8, 9, 17):
        x = torch.randn(rows, n_in, generator=gen)
        for b in (None, bias):
            y = torch.full((rows, out), float("nan"))
            lib.kv_gemm(w.data_ptr(), x.data_ptr(), y.data_ptr(), n_in, out, rows,
                        None if b is None else b.data_ptr(), threads)
            want = torch.nn.functional.linear(x, w, b)
            torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5 * want.abs().max().item())


@needs_cc
def test_the_parts_harness_builds_on_this_step_c_and_prints_its_figures(tmp_path):
    # scripts/native_parts.c (docs/figures.md's four streams) includes step.c and calls its kernels:
    # a rename there must not leave the harness unbuildable. Figures are printed, not judged (never timed)
    import re
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    exe = tmp_path / "native_parts"
    subprocess.run([native.compiler(), *[f for f in native.FLAGS if f not in ("-shared", "-fPIC")], "-o", str(exe),
                    str(root / "scripts" / "native_parts.c"), "-lm"], check=True, capture_output=True, timeout=300)
    out = subprocess.run([str(exe), "40"], check=True, capture_output=True, text=True, timeout=300).stdout
    assert re.search(r"the model's 33 matrices, 104\.5 MiB: [\d.]+ ms, [\d.]+ GB/s; one 128 MiB", out), out
    assert len(re.findall(r"^  .+: [\d.]+ GB/s$", out, re.M)) == 5, out
    m = re.search(r"attention at 40 positions, ([\d.]+) MiB of K/V: [\d.]+ ms, ([\d.]+) GB/s", out)
    assert m and float(m[1]) == round(2 * 8 * 8 * 40 * 64 * 4 / 2**20, 1) and float(m[2]) > 0, out
    bad = subprocess.run([str(exe), "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip() == "native_parts: positions must be 1-4096, not 0"


@needs_cc
def test_the_in_turns_script_times_two_builds_of_step_c_on_one_run(capsys):
    # scripts/native_ab.py (the figures docs/figures.md gives for it): two builds of this step.c
    # give the same logits bit for bit, and the line names both with their figures (never timed)
    import importlib.util
    import re
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "native_ab.py"
    spec = importlib.util.spec_from_file_location("native_ab", path)
    ab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ab)
    src = str(Path(native.__file__).with_name("step.c"))
    threads = torch.get_num_threads()
    try:
        assert ab.main([src, src, "--steps", "2", "--positions", "1"]) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert re.search(r"position \d+: \S+ [\d.]+ ms, [\d.]+ GB/s; \S+ [\d.]+ ms, [\d.]+ GB/s; .+ [\d.]+x; "
                     r"logits the same bit for bit: True", out), out
    with pytest.raises(SystemExit):
        ab.main([src, "--threads", "0"])
    assert "--threads must be 1 or more" in capsys.readouterr().err
