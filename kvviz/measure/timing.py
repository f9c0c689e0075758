"""Step clocks: CUDA events on CUDA, a synchronised perf_counter elsewhere; and a steady allocator
for the processes that time steps."""
from __future__ import annotations

import ctypes
import sys
import time

import torch

from kvviz.runtime.devices import synchronize


class StepTimer:
    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self._sync = device.type not in ("cpu", "cuda")  # MPS: synchronise around the clock reads
        if self.cuda:
            self._start = torch.cuda.Event(enable_timing=True)
            self._stop = torch.cuda.Event(enable_timing=True)
        elif not self._sync:  # a CPU: nothing queued, the clock alone (two calls fewer every step)
            self.start, self.stop = self._cpu_start, self._cpu_stop
        self._t0 = 0.0

    def _cpu_start(self) -> None:
        self._t0 = time.perf_counter()

    def _cpu_stop(self) -> float:
        return (time.perf_counter() - self._t0) * 1000.0

    def start(self) -> None:
        if self.cuda:
            self._start.record()
            return
        if self._sync:
            synchronize(self.device)
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        """Milliseconds since start(), the device's queued work included (a CPU has none queued)."""
        if self.cuda:
            self._stop.record()
            self._stop.synchronize()
            return float(self._start.elapsed_time(self._stop))
        if self._sync:
            synchronize(self.device)
        return (time.perf_counter() - self._t0) * 1000.0


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


def steady_allocator() -> bool:
    """Keep freed memory in the process (glibc on Linux), so that step timings measure the engine
    rather than malloc handing memory back to the OS and faulting it in again on the next step.

    Measured on the concat engine (tiny, 2000 steps, fresh processes): a loop that drops each
    step's trace as it goes, as the app's engine process does, took 1.86 ms a step on average
    against 1.47 ms for `kvviz bench`, which keeps every trace; with this call, 1.41 ms. It fixes
    glibc's mmap threshold at its own dynamic ceiling (32 MiB) and trims only past 1 GiB of free
    top. Returns False where there is no glibc (nothing changes)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20)) and bool(mallopt(_M_TRIM_THRESHOLD, 1 << 30))
