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
        self._row: torch.Tensor | None = None  # step_in_place's placeholder rows (B, KV, n_new, D)

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

    def step_in_place(self, n_new: int) -> bool:
        """The chapter's copy, as `update` makes it: each layer's K and V grown by torch.cat to past + n_new rows,
        the new rows left for the kernel to fill."""
        super().step_in_place(n_new)  # the length check and the written bytes
        if self._row is None or self._row.shape[2] != n_new:
            cfg = self.cfg
            self._row = torch.zeros((self.batch, cfg.n_kv_head, n_new, cfg.head_dim), dtype=self.dtype,
                                    device=self.device)
        for i in range(len(self.k)):
            self.k[i] = torch.cat((self.k[i], self._row), dim=2)  # (B, KV, past + n_new, D)
            self.v[i] = torch.cat((self.v[i], self._row), dim=2)
        self.counters.copied += self.seq_len * self.token_bytes * self.cfg.n_layer
        return True

    @property
    def capacity(self) -> int:
        return self.seq_len
