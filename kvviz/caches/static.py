"""Preallocated to the run's length; new K/V written in place; attention reads a slice (a view, no copy)."""
from __future__ import annotations

import torch

from kvviz.caches.base import KVCache


class StaticCache(KVCache):
    key = "static"

    def __init__(self, cfg, **kw) -> None:
        super().__init__(cfg, **kw)
        shape = (self.batch, cfg.n_kv_head, self.max_len, cfg.head_dim)  # (B, KV, T_max, D)
        self.k = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(cfg.n_layer)]
        self.v = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(cfg.n_layer)]

    def update(self, layer, k, v):
        start, stop = self.seq_len, self.seq_len + k.shape[2]
        self.k[layer][:, :, start:stop].copy_(k)
        self.v[layer][:, :, start:stop].copy_(v)
        self.counters.written += (k.numel() + v.numel()) * self.elem_bytes
        return self.k[layer][:, :, :stop], self.v[layer][:, :, :stop]

    @property
    def capacity(self) -> int:
        return self.max_len
