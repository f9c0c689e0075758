"""The native decode step: a whole concat, static or paged decode step as one C call (step.c), the exact
cached engines' `native` kernel on a CPU in float32 (kvviz.engines.cached, kernel="native", `--kernel native`).
step.c is a deliberate second implementation of the forward (Transformer.forward is the first), held to its
tokens and logits by the tests.

A decode step of a model like `wide` is some hundred small ops: each projection a 1-6 MiB matrix that torch
reads below the read ceiling, each op a Python dispatch and a thread-pool wake-up. step.c runs the step in
one OpenMP parallel region at the run's thread count: every matrix split into contiguous row ranges, one
sequential read per thread, a barrier between stages, no allocation. The engines decode so, a traced head's
attention weights and the greedy pick included (prefill stays in torch); `why_not` says where it does not
apply; `kvviz bench --kernels torch,native` puts it beside torch's ops, engine by engine; `gemv_seconds` times
its own matrix-vector product (kvviz.measure.bandwidth probes the read ceiling with it); `kv_gemm` is its
product of many rows, the serving step's projections (kvviz.serving.model_runner.NativeLinear). It imports
nothing of kvviz above it (no kernels catalog, no measure).

The C file is compiled at first use with the system's C compiler (`$CC`, else `cc`; `-O3 -march=native
-fopenmp`) into ~/.cache/kvviz/native/, named by a hash of the source, the flags and the CPU, written to a
temporary name and renamed, within BUILD_SECONDS. A cached build is used only where it is a regular file that
loads and holds step.c's symbols; anything else under its name (a FIFO, a link, a truncated or foreign
library) is removed and built again. Where there is no compiler, or the build fails, asking for it is
refused in one line and the default engines run on torch's ops. CPU float32,
Llama-family models only (not GPT-2). The numbers differ from torch's by a rounding (sums in another
order); the tests hold the tokens and the logits to the torch path's. No Qt.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import os
import platform
import shutil
import signal
import stat
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("step.c")
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")
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
    """In kvviz's folder of the user's cache ($XDG_CACHE_HOME or ~/.cache, kvviz/native/), beside the bandwidth
    figures (kvviz.measure.bandwidth.cache_path)."""
    key = hashlib.sha256(SOURCE.read_bytes() + " ".join((cc, *FLAGS, _cpu_flags())).encode()).hexdigest()[:16]
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kvviz" / "native" / f"step-{key}.so"


def load():
    """The compiled step.c (compiled now if this CPU has no build yet); ValueError (one line) where it cannot be."""
    global _LIB
    if _LIB is not None:
        return _LIB
    import torch  # noqa: F401  (torch's OpenMP runtime first: step.c then shares its thread pool)

    cc = compiler()
    if cc is None:
        raise ValueError("--kernel native needs a C compiler (cc or $CC), and none was found")
    try:
        lib = _build_and_open(cc)
    except (OSError, subprocess.SubprocessError) as e:  # an unwritable cache, a library that will not load
        raise ValueError(f"--kernel native: could not build or load {SOURCE.name}: "
                         f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else e!r}") from None
    P, I64 = ctypes.c_void_p, ctypes.c_int64
    lib.kv_workspace_floats.argtypes = [P]
    lib.kv_workspace_floats.restype = I64
    lib.kv_decode.argtypes = [P, P, P, P, ctypes.c_float, I64, I64, P, I64, I64, P]
    lib.kv_decode.restype = I64
    lib.kv_gemv_best.argtypes = [P, ctypes.c_int, P, P, ctypes.c_int, ctypes.c_int, P, ctypes.c_int, ctypes.c_int]
    lib.kv_gemv_best.restype = ctypes.c_double
    lib.kv_gemm.argtypes = [P, P, P, ctypes.c_int, ctypes.c_int, ctypes.c_int, P, ctypes.c_int]
    lib.kv_gemm.restype = None
    lib.kv_vector_floats.argtypes = []
    lib.kv_vector_floats.restype = I64
    _LIB = lib
    return lib


BUILD_SECONDS = 60.0  # a compiler that runs longer is stopped (its whole process group) and refused
SYMBOLS = ("kv_workspace_floats", "kv_decode", "kv_gemv_best", "kv_vector_floats", "kv_gemm")  # what load() binds


def _build_and_open(cc: str):
    """step.c's build from the cache folder where a sound one is there, else compiled into it (once per
    source, flags and CPU, by kvviz.fileio's output rule: a temporary name, then a rename), opened."""
    path = library_path(cc)
    lib = _open_cached(path)
    if lib is not None:
        return lib
    from kvviz.fileio import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: _compile(cc, tmp))
    lib = ctypes.CDLL(str(path))
    missing = [name for name in SYMBOLS if not hasattr(lib, name)]
    if missing:
        raise ValueError(f"--kernel native: {Path(cc).name} built {SOURCE.name} without {', '.join(missing)}")
    return lib


def _open_cached(path: Path):
    """The build at `path` where it is a regular file (a link, a FIFO or a device is never opened) that
    loads and holds SYMBOLS; else None, with whatever held the build's name removed (kvviz's own cache
    entry: a truncated build, another library, a node) so that a fresh build takes it."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "a folder holds the build's name", str(path))
    if stat.S_ISREG(mode) and _whole_elf(path):
        try:
            lib = ctypes.CDLL(str(path))
        except OSError:  # not a shared library, another machine's
            lib = None
        if lib is not None:
            if all(hasattr(lib, name) for name in SYMBOLS):
                return lib
            _close(lib)  # else the loader hands the same stale library back for the rebuilt file's name
    path.unlink()
    return None


_ELF_HEADER = {1: ("16sHHIIIIIHHHHHH", "IIIIIIII", 1, 4), 2: ("16sHHIQQQIHHHHHH", "IIQQQQQQ", 2, 5)}  # by class:
# (file header, program header, the program header's p_offset and p_filesz fields)


def _whole_elf(path: Path) -> bool:
    """False for an ELF file shorter than its own headers say (a build cut short: the loader maps the
    missing pages and the process dies of SIGBUS on the first touch); True for any other file (the loader
    itself refuses what is not a library)."""
    import struct

    with open(path, "rb") as fh:
        head = fh.read(64)
        if head[:4] != b"\x7fELF":
            return True
        size = os.fstat(fh.fileno()).st_size
        if len(head) < 52 or head[4] not in _ELF_HEADER or head[5] not in (1, 2):
            return False
        file_fmt, prog_fmt, at_offset, at_size = _ELF_HEADER[head[4]]
        order = "<" if head[5] == 1 else ">"
        if len(head) < struct.calcsize(order + file_fmt):
            return False
        fields = struct.unpack_from(order + file_fmt, head)
        phoff, shoff, phentsize, phnum, shentsize, shnum = fields[5], fields[6], *fields[9:13]
        if phentsize < struct.calcsize(order + prog_fmt) or phoff + phnum * phentsize > size \
                or shoff + shnum * shentsize > size:
            return False
        fh.seek(phoff)
        table = fh.read(phnum * phentsize)
        for i in range(phnum):
            entry = struct.unpack_from(order + prog_fmt, table, i * phentsize)
            if entry[at_offset] + entry[at_size] > size:
                return False
    return True


def _close(lib) -> None:
    """Unload a library ctypes opened (ctypes itself never does)."""
    import _ctypes

    _ctypes.dlclose(lib._handle)


def _compile(cc: str, out: Path) -> None:
    """`cc` building step.c into `out` within BUILD_SECONDS, in its own process group (a compiler that
    hangs is killed with whatever it started); ValueError (one line) on a failure or the deadline."""
    proc = subprocess.Popen([cc, *FLAGS, "-o", str(out), str(SOURCE), "-lm"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=BUILD_SECONDS)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            pipe.close()
        raise ValueError(f"--kernel native: {Path(cc).name} did not build {SOURCE.name} within "
                         f"{BUILD_SECONDS:g} s") from None
    if proc.returncode != 0:
        first = next((ln for ln in err.splitlines() if "error" in ln), err.strip()[:200])
        raise ValueError(f"--kernel native: {Path(cc).name} could not build {SOURCE.name}: {first}")


def vector_floats() -> int:
    """The floats in one vector of the build (16 with AVX-512, 8 with AVX/AVX2, 4 elsewhere): step.c's sums
    are written at the CPU's own width, which `-march=native` decides; ValueError where it cannot be built."""
    return int(load().kv_vector_floats())


def check_supported(model) -> None:
    """ValueError (one line) for a model the native step does not cover: off a CPU, not float32, GPT-2,
    or no C compiler. The engine and the bench both ask it before any run."""
    _check_model(model)
    load()


def check_cpu_llama(model, kernel: str) -> None:
    """ValueError (one line) unless `model` is a float32 Llama-family model on a CPU, what the CPU kernels
    (openblas, native) cover: GPT-2's forward takes no kernel."""
    import torch

    param = next(model.parameters())
    if param.device.type != "cpu" or param.dtype != torch.float32:
        raise ValueError(f"--kernel {kernel} is for float32 on a CPU, not {str(param.dtype).replace('torch.', '')} "
                         f"on {param.device.type}")
    if model.cfg.arch == "gpt2":
        raise ValueError(f"--kernel {kernel} covers Llama-family models only, not gpt2")


def _check_model(model) -> None:
    """What step.c computes: a float32 Llama-family model on a CPU, query heads a multiple of KV heads, an
    even head size; ValueError (one line) otherwise."""
    check_cpu_llama(model, "native")
    cfg = model.cfg
    if cfg.n_head % cfg.n_kv_head or cfg.head_dim % 2:
        raise ValueError(f"--kernel native needs query heads a multiple of KV heads and an even head size, "
                         f"not {cfg.n_head}/{cfg.n_kv_head} heads of {cfg.head_dim}")


_WHY_NOT: dict = {}  # the build's refusal, asked once per process (a failed build is not retried per engine)


def why_not(model, key: str) -> str | None:
    """None where the native step runs `key`'s decode steps for `model` (an exact cached engine, a float32
    Llama-family model on a CPU, a C compiler that built step.c); else the one-line reason. Never raises:
    the engines ask it to choose their default kernel ("auto")."""
    if key not in MODES:
        return _not_read(key)
    try:
        _check_model(model)
    except ValueError as e:
        return str(e)
    return build_error()


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


MODES = {"static": 0, "concat": 1, "paged": 2}  # the cache rules step.c reads in place (its I_MODE)
P_NPTR, P_K, P_V = 11, 9, 10  # step.c's per-layer pointers: how many, and where K and V are


def _not_read(key: str) -> str:
    return f"the native step reads {', '.join(MODES)} caches, not {key!r}"


class NativeStep:
    """Decode steps of `model` at `threads` threads, in C, over one sequence's K/V in one of the exact rules:

    - "static": `k`, `v` one (1, KV, max_len, D) tensor a layer, written in place at each step's position;
    - "concat": `k`, `v` lists the caller's torch.cat has just made one position longer (the whole history
      copied, as the chapter's cache does): `rebind()` hands step.c the new tensors before each step;
    - "paged": `k`, `v` one (N, block_size, KV, D) pool a layer and `table` the block table (a list the
      caller grows as the sequence takes blocks): step.c writes each new row into its block's slot and
      gathers the sequence's blocks into one buffer for attention, the copy kvviz.caches.paged makes.

    One per run: it holds the pointers of the K/V tensors, the model's weights and a workspace, and the
    tensors themselves. The engine (kvviz.engines.cached) and the bare loop (kvviz.measure.reference) both use it."""

    def __init__(self, model, threads: int, *, mode: str, k, v, max_len: int, table: list | None = None,
                 block_size: int = 0) -> None:
        import numpy as np
        import torch

        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        if mode not in MODES:
            raise ValueError(_not_read(mode))
        check_supported(model)  # it loads the build
        lib = self._lib = load()
        cfg = model.cfg
        device = next(model.parameters()).device
        model.rope_tables(max_len, device)  # long enough for the whole run, before the plan is read
        plan = model.plan()
        keep: list = [plan]
        H, KV, D, eps = plan.shape
        C, F, L = cfg.d_model, plan.layers[0].gate_up.shape[0] // 2, len(plan.layers)
        V = plan.head.shape[0]
        head_ptr, head_cm = _matrix(plan.head, keep)
        self.V, self.L = V, L
        ints = [C, H, KV, D, F, V, L, max_len, threads, int(plan.layers[0].qkv_bias is not None),
                int(plan.layers[0].q_norm is not None), head_cm, MODES[mode], block_size]
        self._ip = np.array(ints, dtype=np.int64)
        flags, ptrs = [], []
        for layer in plan.layers:
            row = []
            for name in ("qkv", "o", "gate_up", "down"):
                ptr, cm = _matrix(getattr(layer, name), keep)
                row.append((ptr, cm))
            (qkv, qkv_cm), (o, o_cm), (gu, gu_cm), (down, down_cm) = row
            flags += [qkv_cm, o_cm, gu_cm, down_cm]
            ptrs += [_vector(layer.ln1, keep), qkv, _vector(layer.qkv_bias, keep), _vector(layer.q_norm, keep),
                     _vector(layer.k_norm, keep), o, _vector(layer.ln2, keep), gu, down, 0, 0]
        self._lf = np.array(flags, dtype=np.int64)
        self._lp = np.array(ptrs, dtype=np.uint64)
        self._k, self._v = k, v  # the caller's lists (concat replaces their tensors every step)
        if mode != "concat":
            for i in range(L):
                if not (k[i].is_contiguous() and v[i].is_contiguous()):
                    raise ValueError("the native step needs the cache's own contiguous tensors")
            self.rebind()
        self._ws = torch.empty(int(lib.kv_workspace_floats(self._ip.ctypes.data)), dtype=torch.float32)
        self._table, self._table_list, self._blocks = None, table, 0
        gather = 0
        if mode == "paged":
            if block_size < 1 or table is None:
                raise ValueError("a paged native step needs the block table and a block size")
            n_blocks = k[0].shape[0]
            self._table = np.zeros(n_blocks, dtype=np.int64)
            self._gather = torch.empty(2 * n_blocks * block_size * KV * D, dtype=torch.float32)
            gather = self._gather.data_ptr()
        embed = _vector(plan.embed, keep)
        self._gp = np.array([embed, _vector(plan.final_norm, keep), head_ptr, _vector(plan.cos, keep),
                             _vector(plan.sin_signed, keep), self._ws.data_ptr(),
                             0 if self._table is None else self._table.ctypes.data, gather], dtype=np.uint64)
        self._keep = keep
        self._eps = ctypes.c_float(eps)
        self._args = (self._ip.ctypes.data, self._lf.ctypes.data, self._gp.ctypes.data, self._lp.ctypes.data)
        self._empty = torch.empty
        self.threads = threads

    @classmethod
    def for_cache(cls, model, cache, threads: int) -> NativeStep:
        """The step over one of kvviz.caches' exact caches (static, concat, paged), its own tensors."""
        if cache.key == "paged":
            return cls(model, threads, mode="paged", k=cache.k_pool, v=cache.v_pool, max_len=cache.max_len,
                       table=cache.table, block_size=cache.block_size)
        if cache.key not in MODES:
            raise ValueError(_not_read(cache.key))
        return cls(model, threads, mode=cache.key, k=cache.k, v=cache.v, max_len=cache.max_len)

    def rebind(self) -> None:
        """Hand step.c the tensors now in the K/V lists (concat: after the caller's torch.cat)."""
        lp, k, v = self._lp, self._k, self._v
        for i in range(self.L):
            lp[i * P_NPTR + P_K] = k[i].data_ptr()
            lp[i * P_NPTR + P_V] = v[i].data_ptr()

    def __call__(self, token: int, pos: int, weights_layer: int | None = None, weights_head: int = 0):
        """(logits (1, V), weights, greedy) of `token` at position `pos`, fresh tensors (the trace keeps them);
        the K/V rows at `pos` are written in every layer (the caller counts them and commits). weights:
        None, or with `weights_layer` given, that layer's query head `weights_head` over positions 0..pos,
        (1, 1, pos + 1), as Transformer.forward returns them. greedy: torch.argmax of the logits where that
        logit is finite, else None (the caller's check refuses it)."""
        if self._table is not None and len(self._table_list) != self._blocks:  # the sequence took a block
            table = self._table_list
            self._table[:len(table)] = table
            self._blocks = len(table)
        logits = self._empty((1, self.V), dtype=self._ws.dtype)
        if weights_layer is None:
            best = self._lib.kv_decode(*self._args, self._eps, token, pos, logits.data_ptr(), -1, 0, None)
            return logits, None, (best if best >= 0 else None)
        weights = self._empty((1, 1, pos + 1), dtype=self._ws.dtype)
        best = self._lib.kv_decode(*self._args, self._eps, token, pos, logits.data_ptr(), weights_layer,
                                   weights_head, weights.data_ptr())
        return logits, weights, (best if best >= 0 else None)


def build_error() -> str | None:
    """None where step.c is built (or builds now), else the one-line reason; asked once per process."""
    if "build" not in _WHY_NOT:
        try:
            load()
            _WHY_NOT["build"] = None
        except ValueError as e:
            _WHY_NOT["build"] = str(e)
    return _WHY_NOT["build"]


def gemv_seconds(matrix, threads: int, bursts: int, warm: bool = True) -> dict[str, list[float]]:
    """Seconds of each of `bursts` products of step.c's matrix-vector kernel at `threads` threads over the
    float32 (rows, cols) `matrix` (a numpy array or a CPU tensor, read in place), in both layouts: row-major
    (out = rows) and column-major (the same bytes read as (in, out), as the wide projections are laid out).
    The layouts take turns, burst by burst, after a warm-up (`warm`), as kvviz.measure.bandwidth times torch's."""
    import numpy as np

    lib = load()
    if hasattr(matrix, "numpy"):
        matrix = matrix.numpy()
    rows, cols = matrix.shape
    sides = {}
    for name, cm, (inn, out) in (("row-major", 0, (cols, rows)), ("column-major", 1, (rows, cols))):
        x = np.ones(inn, np.float32)
        y = np.empty(out, np.float32)
        part = np.empty(threads * out, np.float32)
        sides[name] = ((matrix.ctypes.data, cm, x.ctypes.data, y.ctypes.data, inn, out, part.ctypes.data, threads),
                       (x, y, part))
        if warm:
            lib.kv_gemv_best(*sides[name][0], 2)  # pages touched
    times: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(bursts):
        for name, (args, _keep) in sides.items():
            times[name].append(lib.kv_gemv_best(*args, 1))
    return times
