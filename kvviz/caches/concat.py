"""The chapter's cache: K/V grown with `torch.cat` every step, so the whole history is copied each time."""
from __future__ import annotations

import torch

from kvviz.caches.base import KVCache


class ConcatCache(KVCache):
    key = "concat"

    def __init__(self, cfg, **kw) -> None:
        super().__init__(cfg, **kw)
        self.k: list[torch.Tensor | None] = [None] * cfg.n_layer
        self.v: list[torch.Tensor | None] = [None] * cfg.n_layer

    def update(self, layer, k, v):
        if self.k[layer] is None:
            # Prefill keeps the projections' own output tensors: nothing is copied or written.
            self.k[layer], self.v[layer] = k, v
        else:
            past = self.k[layer]
            # cat allocates past+new and copies the whole past into it: O(history) per step.
            self.counters.copied += 2 * past.numel() * self.elem_bytes
            self.k[layer] = torch.cat([past, k], dim=2)  # (B, KV, T_past + T_new, D)
            self.v[layer] = torch.cat([self.v[layer], v], dim=2)
            self.counters.written += (k.numel() + v.numel()) * self.elem_bytes
        return self.k[layer], self.v[layer]

    @property
    def capacity(self) -> int:
        return self.seq_len

    @property
    def resident_bytes(self) -> int:
        return self.seq_len * self.token_bytes * self.cfg.n_layer
