"""The `openblas` decode kernel: every projection of a CPU decode step through numpy's OpenBLAS beside torch's MKL.

Why it exists (measured on the 2-core development VM, an AMD EPYC, torch 2.13.0 CPU, numpy 2.4 on
OpenBLAS 0.3.31; `python scripts/bench_kernels.py`, docs/figures.md): torch's float32 product of one row
against a matrix that fits the caches ran 31-46 GB/s on one thread where OpenBLAS ran 59-76, and
over the `wide` model's 32 projections in turn (104 MiB, every one read from memory, as a decode step
reads them) 12.6 GB/s against 15.9; with two threads torch's kernel stayed at 13.0 (it does not use the
second thread for matrices this small) and OpenBLAS's read 20.2. Both read a 256 MiB matrix at about
the same 17-21 GB/s on one thread: the difference is in the kernel, not in the memory.

`make_engine(key, model, kernel="openblas")` runs an engine (naive or any cache) with every projection
through this kernel (Transformer.forward's `linear`); `kvviz bench --kernel openblas` runs a whole
comparison so, `--kernels torch,openblas` puts the two side by side, and `read_ceiling_openblas` probes the
same kernel's own read ceiling. Not the default: on `tiny`, whose matrices are a few
KiB, it was slower (0.79x); it changes the rounding (logits within 1e-4 in the tests, the tokens the
same); it needs numpy on OpenBLAS; and while a step runs torch's own thread pool is held at one thread
(two pools spinning on two cores made a step six times slower). CPU float32 only. No Qt.
"""
from __future__ import annotations

import time
from contextlib import contextmanager


def openblas():
    """threadpoolctl's controller of the OpenBLAS numpy uses; ValueError (one line) where there is none."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError as exc:
        raise ValueError("--kernel openblas needs threadpoolctl (pip install threadpoolctl)") from exc
    import numpy  # noqa: F401  (loads numpy's BLAS, so the controller finds it)

    found = ThreadpoolController().select(internal_api="openblas").lib_controllers
    if not found:
        raise ValueError("--kernel openblas: numpy here is not built on OpenBLAS")
    return found[0]


def check_supported(model) -> None:
    """ValueError (one line) for a model the OpenBLAS kernel does not cover: off a CPU, below float32, GPT-2,
    or no OpenBLAS under numpy. The engine and the bench both ask it."""
    from kvviz.native import check_cpu_llama

    check_cpu_llama(model, "openblas")
    openblas()


class OpenBlasLinear:
    """`F.linear(x, w, b)` for the plan's weights through numpy's OpenBLAS, at `threads` threads.

    Each weight is read in the layout the model stores it in (Transformer._read_layout): a column-major
    (out, in) weight as the C-contiguous (in, out) matrix it is, a row-major one transposed (BLAS's trans
    flag); no copy of any weight. The output is a fresh tensor every call (the trace keeps the logits)."""

    def __init__(self, plan, threads: int) -> None:
        import numpy
        import torch

        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        self.blas = openblas()
        self.threads = threads
        self._torch, self._matmul = torch, numpy.matmul
        weights = [w for layer in plan.layers for w in (layer.qkv, layer.o, layer.gate_up, layer.down)]
        weights.append(plan.head)
        self._views = {id(w): w.detach().numpy().T for w in weights}  # (in, out) views of the same bytes

    def __call__(self, x, w, b=None):
        y = self._torch.from_numpy(self._matmul(x.numpy(), self._views[id(w)]))
        return y if b is None else y.add_(b)

    @contextmanager
    def running(self):
        """OpenBLAS at the run's threads and torch's pool at one, restored after (the step's other ops are
        a few hundred elements each: torch ran them on one thread anyway)."""
        torch = self._torch
        before = torch.get_num_threads()
        if self.blas.num_threads != self.threads:
            self.blas.set_num_threads(self.threads)
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(before)


def read_ceiling_openblas(threads: int, buffer_bytes: int | None = None, bursts: int | None = None) -> float:
    """OpenBLAS's read ceiling at `threads` threads, in GB/s: the fastest of `bursts` products of one row
    against the same matrix kvviz.measure.bandwidth's probe uses (beyond the last-level cache), in both layouts."""
    import numpy as np

    from kvviz.measure import bandwidth

    bursts = bursts or bandwidth.READ_BURSTS
    matrix = bandwidth.read_matrix(buffer_bytes)
    rows, cols = matrix.shape
    sides = [(np.ones((1, cols), np.float32), matrix.T), (np.ones((1, rows), np.float32), matrix)]
    blas = openblas()
    before = blas.num_threads
    blas.set_num_threads(threads)
    best = float("inf")
    try:
        for x, m in sides:
            np.matmul(x, m)
        for _ in range(bursts):
            for x, m in sides:
                t0 = time.perf_counter()
                np.matmul(x, m)
                best = min(best, time.perf_counter() - t0)
    finally:
        blas.set_num_threads(before)
    return matrix.nbytes / best / 1e9
