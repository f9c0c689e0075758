"""The native decode step: a whole `static` decode step as one C call (step.c), an option beside torch's.

A decode step of a model like `wide` is some hundred small ops: each projection a 1-6 MiB matrix that torch
reads below the read ceiling, each op a Python dispatch and a thread-pool wake-up. step.c runs the step in
one OpenMP parallel region at the run's thread count: every matrix split into contiguous row ranges, one
sequential read per thread, a barrier between stages, no allocation. `make_engine("static", model,
blas="native")` decodes so, a traced head's attention weights included (prefill stays in torch);
`kvviz bench --blas native` runs it beside the default (row `static+native`), and `read_ceiling_native`
probes what its own matrix-vector product reads over the probe's buffer.

The C file is compiled at first use with the system's C compiler (`$CC`, else `cc`; `-O3 -march=native
-fopenmp`) into ~/.cache/kvviz/native/, named by a hash of the source, the flags and the CPU, written to a
temporary name and renamed. Where there is no compiler the option is refused in one line. CPU float32,
Llama-family models only (not GPT-2). The numbers differ from torch's by a rounding (sums in another
order); the tests hold the tokens and the logits to the torch path's. No Qt.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("step.c")
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")
ROW = "static+native"  # the bench's row for it, which `kvviz memory --measured` reads back
_LIB = None


def compiler() -> str | None:
    cc = os.environ.get("CC") or "cc"
    return shutil.which(cc) or shutil.which("gcc")


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("flags"):
                return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def library_path(cc: str) -> Path:
    """Beside kvviz's other cached figures (kvviz.bandwidth.cache_path: $XDG_CACHE_HOME or ~/.cache, kvviz/)."""
    from kvviz.bandwidth import cache_path

    key = hashlib.sha256(SOURCE.read_bytes() + " ".join((cc, *FLAGS, _cpu_flags())).encode()).hexdigest()[:16]
    return cache_path().parent / "native" / f"step-{key}.so"


def load():
    """The compiled step.c (compiled now if this CPU has no build yet); ValueError (one line) where it cannot be."""
    global _LIB
    if _LIB is not None:
        return _LIB
    import torch  # noqa: F401  (torch's OpenMP runtime first: step.c then shares its thread pool)

    cc = compiler()
    if cc is None:
        raise ValueError("--blas native needs a C compiler (cc or $CC), and none was found")
    path = library_path(cc)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=path.parent)
        os.close(fd)
        try:
            run = subprocess.run([cc, *FLAGS, "-o", tmp, str(SOURCE), "-lm"], capture_output=True, text=True,
                                 timeout=300)
            if run.returncode != 0:
                first = next((ln for ln in run.stderr.splitlines() if "error" in ln), run.stderr.strip()[:200])
                raise ValueError(f"--blas native: {Path(cc).name} could not build {SOURCE.name}: {first}")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    lib = ctypes.CDLL(str(path))
    P, I64 = ctypes.c_void_p, ctypes.c_int64
    lib.kv_workspace_floats.argtypes = [P]
    lib.kv_workspace_floats.restype = I64
    lib.kv_decode.argtypes = [P, P, P, P, ctypes.c_float, I64, I64, P, I64, I64, P]
    lib.kv_decode.restype = ctypes.c_int
    lib.kv_gemv_best.argtypes = [P, ctypes.c_int, P, P, ctypes.c_int, ctypes.c_int, P, ctypes.c_int, ctypes.c_int]
    lib.kv_gemv_best.restype = ctypes.c_double
    _LIB = lib
    return lib


def check_supported(model) -> None:
    """ValueError (one line) for a model the native step does not cover: off a CPU, not float32, GPT-2,
    or no C compiler. The engine and the bench both ask it before any run."""
    from kvviz.kernels import check_cpu_llama

    check_cpu_llama(model, "native")
    cfg = model.cfg
    if cfg.n_head % cfg.n_kv_head or cfg.head_dim % 2:
        raise ValueError(f"--blas native needs query heads a multiple of KV heads and an even head size, "
                         f"not {cfg.n_head}/{cfg.n_kv_head} heads of {cfg.head_dim}")
    load()


def _matrix(w, keep: list):
    """(pointer, column-major flag) of an (out, in) weight as stored: row-major, or column-major as
    Transformer._read_layout lays the wide ones out; any other strides are copied once."""
    if w.is_contiguous():
        return w.data_ptr(), 0
    if w.t().is_contiguous():
        return w.data_ptr(), 1
    w = w.contiguous()
    keep.append(w)
    return w.data_ptr(), 0


def _vector(v, keep: list) -> int:
    if v is None:
        return 0
    v = v.contiguous()
    keep.append(v)
    return v.data_ptr()


class NativeStep:
    """Decode steps of `model` through a StaticCache `cache` at `threads` threads, in C. One per run: it holds
    the pointers of the cache's tensors, the model's weights and a workspace, and the tensors themselves."""

    def __init__(self, model, cache, threads: int) -> None:
        import numpy as np
        import torch

        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        check_supported(model)
        lib = self._lib = load()
        cfg = model.cfg
        model.rope_tables(cache.max_len, cache.device)  # long enough for the whole run, before the plan is read
        plan = model.plan()
        keep: list = [plan]
        H, KV, D, eps = plan.shape
        C, F, L = cfg.d_model, plan.layers[0].gate_up.shape[0] // 2, len(plan.layers)
        V = plan.head.shape[0]
        head_ptr, head_cm = _matrix(plan.head, keep)
        self.V = V
        ints = [C, H, KV, D, F, V, L, cache.max_len, threads, int(plan.layers[0].qkv_bias is not None),
                int(plan.layers[0].q_norm is not None), head_cm]
        self._ip = np.array(ints, dtype=np.int64)
        flags, ptrs = [], []
        for layer, k, v in zip(plan.layers, cache.k, cache.v):
            if not (k.is_contiguous() and v.is_contiguous()):
                raise ValueError("--blas native needs the static cache's own contiguous tensors")
            row = []
            for name in ("qkv", "o", "gate_up", "down"):
                ptr, cm = _matrix(getattr(layer, name), keep)
                row.append((ptr, cm))
            (qkv, qkv_cm), (o, o_cm), (gu, gu_cm), (down, down_cm) = row
            flags += [qkv_cm, o_cm, gu_cm, down_cm]
            ptrs += [_vector(layer.ln1, keep), qkv, _vector(layer.qkv_bias, keep), _vector(layer.q_norm, keep),
                     _vector(layer.k_norm, keep), o, _vector(layer.ln2, keep), gu, down, k.data_ptr(), v.data_ptr()]
        keep += list(cache.k) + list(cache.v)
        self._lf = np.array(flags, dtype=np.int64)
        self._lp = np.array(ptrs, dtype=np.uint64)
        self._ws = torch.empty(int(lib.kv_workspace_floats(self._ip.ctypes.data)), dtype=torch.float32)
        embed = _vector(plan.embed, keep)
        self._gp = np.array([embed, _vector(plan.final_norm, keep), head_ptr, _vector(plan.cos, keep),
                             _vector(plan.sin_signed, keep), self._ws.data_ptr()], dtype=np.uint64)
        self._keep = keep
        self._eps = ctypes.c_float(eps)
        self._args = (self._ip.ctypes.data, self._lf.ctypes.data, self._gp.ctypes.data, self._lp.ctypes.data)
        self._empty = torch.empty
        self.threads = threads

    def __call__(self, token: int, pos: int, weights_layer: int | None = None, weights_head: int = 0):
        """(logits (1, V), weights) of `token` at position `pos`, fresh tensors (the trace keeps them); the
        cache's K/V rows at `pos` are written in every layer (the caller counts them and commits). weights:
        None, or with `weights_layer` given, that layer's query head `weights_head` over positions 0..pos,
        (1, 1, pos + 1), as Transformer.forward returns them."""
        logits = self._empty((1, self.V), dtype=self._ws.dtype)
        if weights_layer is None:
            self._lib.kv_decode(*self._args, self._eps, token, pos, logits.data_ptr(), -1, 0, None)
            return logits, None
        weights = self._empty((1, 1, pos + 1), dtype=self._ws.dtype)
        self._lib.kv_decode(*self._args, self._eps, token, pos, logits.data_ptr(), weights_layer, weights_head,
                            weights.data_ptr())
        return logits, weights


def read_ceiling_native(threads: int, buffer_bytes: int | None = None, bursts: int | None = None) -> float:
    """What step.c's matrix-vector product reads at `threads` threads, in GB/s: the fastest of `bursts`
    products against the same matrix kvviz.bandwidth's probe uses (beyond the last-level cache), in both
    layouts, as the other kernels' ceilings are probed."""
    import numpy as np

    from kvviz import bandwidth

    lib = load()
    n = buffer_bytes or bandwidth.read_buffer_bytes()
    bursts = bursts or bandwidth.READ_BURSTS
    cols = bandwidth.READ_COLUMNS
    rows = max(1, n // (4 * cols))
    matrix = np.full((rows, cols), 1.0 / cols, dtype=np.float32)
    best = float("inf")
    for cm, (inn, out) in ((0, (cols, rows)), (1, (rows, cols))):
        x = np.ones(inn, np.float32)
        y = np.empty(out, np.float32)
        part = np.empty(threads * out, np.float32)
        args = (matrix.ctypes.data, cm, x.ctypes.data, y.ctypes.data, inn, out, part.ctypes.data, threads)
        lib.kv_gemv_best(*args, 2)  # pages touched
        best = min(best, lib.kv_gemv_best(*args, bursts))
    return matrix.nbytes / best / 1e9
