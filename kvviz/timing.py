"""Step clocks: CUDA events on CUDA, a synchronised perf_counter elsewhere."""
from __future__ import annotations

import time

import torch

from kvviz.devices import synchronize


class StepTimer:
    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        if self.cuda:
            self._start = torch.cuda.Event(enable_timing=True)
            self._stop = torch.cuda.Event(enable_timing=True)
        self._t0 = 0.0

    def start(self) -> None:
        if self.cuda:
            self._start.record()
        else:
            synchronize(self.device)
            self._t0 = time.perf_counter()

    def stop(self) -> float:
        """Milliseconds since start(), the device's queued work included."""
        if self.cuda:
            self._stop.record()
            self._stop.synchronize()
            return float(self._start.elapsed_time(self._stop))
        synchronize(self.device)
        return (time.perf_counter() - self._t0) * 1000.0
