"""Mistral's rolling buffer: only the last W tokens' K/V are kept, in W preallocated slots.

Position p lives in slot p % W, so a new token overwrites the oldest one and nothing is ever moved.
Attention reads the ring in slot order (keys need no order: the mask and positions say who is who),
so `kv_positions` tells the model which absolute position each returned K/V row holds. Positions stay
absolute: a key keeps the rotation of the position it was computed at. `SinksCache` (sinks.py) is the
same ring with its first S slots pinned to the first S tokens. Knows nothing about engines or Qt.
"""
from __future__ import annotations

import numpy as np
import torch

from kvviz.caches.base import KVCache
from kvviz.options import WINDOW_DEFAULT
from kvviz.records.trace import MaskSpec, held_positions


class WindowCache(KVCache):
    key = "window"
    exact = False

    def __init__(self, cfg, *, window: int | None = None, sinks: int | None = None, **kw) -> None:
        super().__init__(cfg, **kw)
        self.window = WINDOW_DEFAULT if window is None else window
        self.sinks = self._sink_count(sinks)
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1:
            raise ValueError(f"{self.key} cache: the window must be a whole number of at least 1, got {self.window!r}")
        if self.sinks >= self.window:
            raise ValueError(f"{self.key} cache: sinks ({self.sinks}) must be fewer than the window ({self.window})")
        self.slots = min(self.window, self.max_len)  # never more room than the run can use
        shape = (self.batch, cfg.n_kv_head, self.slots, cfg.head_dim)  # (B, KV, W, D)
        self.k = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(cfg.n_layer)]
        self.v = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(cfg.n_layer)]

    def _sink_count(self, sinks: int | None) -> int:
        return 0  # a plain window pins nothing

    def slot(self, pos: np.ndarray) -> np.ndarray:
        """Ring slot of each absolute position: sinks in 0..S-1, the rest round the other W-S slots."""
        S, ring = self.sinks, self.window - self.sinks
        return np.where(pos < S, pos, S + (pos - S) % ring)

    def held(self, n: int) -> np.ndarray:
        """Absolute positions held once n tokens have been stored."""
        return held_positions(n, self.window - self.sinks, self.sinks)

    @property
    def held_len(self) -> int:
        return len(self.held(self.seq_len))

    def mask_spec(self, n_new: int) -> MaskSpec:
        return MaskSpec(q_len=n_new, kv_len=self.seq_len + n_new, past_len=self.seq_len,
                        window=self.window - self.sinks, sinks=self.sinks)

    def _long_prefill(self, n_new: int) -> bool:
        return self.seq_len == 0 and n_new > self.slots

    def kv_positions(self, n_new: int) -> np.ndarray:
        stop = self.seq_len + n_new
        if self.seq_len > 0 and n_new > 1:
            raise ValueError(f"{self.key} cache: decode one token per step (got {n_new} after {self.seq_len})")
        if self._long_prefill(n_new):
            return np.arange(n_new)  # the prompt's own projections, banded by the mask
        held = self.held(stop)
        by_slot = np.empty(len(held), dtype=np.int64)
        by_slot[self.slot(held)] = held
        return by_slot  # the ring's rows in slot order

    def prepare(self, n_new: int) -> None:
        super().prepare(n_new)
        start = self.seq_len
        keep = self.held(start + n_new)
        keep = keep[keep >= start]  # the new positions that stay (a long prompt's sinks and tail)
        self._n_kept = len(keep)
        # contiguous runs of them, each a view of the step's k: (offset in k, end, ring slots)
        self._runs = [(int(r[0]) - start, int(r[-1]) + 1 - start, torch.from_numpy(self.slot(r)).to(self.device))
                      for r in np.split(keep, np.flatnonzero(np.diff(keep) != 1) + 1) if len(r)]

    def update(self, layer, k, v):
        start, T = self.seq_len, k.shape[2]
        stop = start + T
        for a, b, idx in self._runs:
            self.k[layer].index_copy_(2, idx, k[:, :, a:b])
            self.v[layer].index_copy_(2, idx, v[:, :, a:b])
        self.counters.written += 2 * self._n_kept * (k.numel() // T) * self.elem_bytes
        if self._long_prefill(T):
            return k, v  # attention over the whole prompt (banded); the ring keeps its tail
        n = min(stop, self.slots)
        return self.k[layer][:, :, :n], self.v[layer][:, :, :n]  # (B, KV, n, D), a view in slot order

    @property
    def capacity(self) -> int:
        return self.slots
