"""PagedAttention's layout: fixed-size blocks from a pool, a free list, and a per-sequence block table.

A new block is taken only when the last one is full. Attention here is plain SDPA, which needs K/V
contiguous in time, so the blocks are gathered into one tensor each step: that gather is a copy
and is counted as `gathered` (a fused paged-attention kernel reads the blocks in place instead).
"""
from __future__ import annotations

import torch

from kvviz.caches.base import KVCache
from kvviz.caches.slots import slots


class PagedCache(KVCache):
    key = "paged"

    def __init__(self, cfg, *, block_size: int = 16, seed: int = 0, **kw) -> None:
        super().__init__(cfg, block_size=block_size, seed=seed, **kw)
        if block_size < 1:
            raise ValueError(f"block size must be >= 1, got {block_size}")
        self.block_size = block_size
        self.n_blocks = -(-self.max_len // block_size)
        shape = (self.n_blocks, block_size, self.batch * cfg.n_kv_head, cfg.head_dim)  # (N, S, B*KV, D)
        self.k_pool = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(cfg.n_layer)]
        self.v_pool = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(cfg.n_layer)]
        # A server's pool hands out whatever blocks are free; a seeded shuffle shows that the block
        # table, not adjacency, holds a sequence together.
        order = torch.randperm(self.n_blocks, generator=torch.Generator().manual_seed(seed)).tolist()
        self.free: list[int] = order[::-1]  # pop() from the end takes order[0] first
        self.table: list[int] = []
        self._slots: torch.Tensor | None = None  # pool slots of the step's new tokens
        self._gather_idx: torch.Tensor | None = None

    def reserve(self, n_new: int) -> None:
        super().reserve(n_new)
        need = -(-(self.seq_len + n_new) // self.block_size)
        while len(self.table) < need:
            if not self.free:
                raise MemoryError("paged cache: block pool exhausted")
            self.table.append(self.free.pop())

    def prepare(self, n_new: int) -> None:
        super().prepare(n_new)  # reserve(): the blocks
        pos = torch.arange(self.seq_len, self.seq_len + n_new)
        table = torch.tensor(self.table)
        self._slots = slots(table, pos, self.block_size).to(self.device)
        self._gather_idx = table.to(self.device)

    def update(self, layer, k, v):
        B, KV, T, D = k.shape
        S = self.block_size
        kp, vp = self.k_pool[layer], self.v_pool[layer]
        # (B, KV, T, D) -> (T, B*KV, D): one row per token slot
        kp.view(-1, B * KV, D).index_copy_(0, self._slots, k.permute(2, 0, 1, 3).reshape(T, B * KV, D))
        vp.view(-1, B * KV, D).index_copy_(0, self._slots, v.permute(2, 0, 1, 3).reshape(T, B * KV, D))
        self.counters.written += (k.numel() + v.numel()) * self.elem_bytes
        total = self.seq_len + T
        kg = kp.index_select(0, self._gather_idx)  # (n_used, S, B*KV, D): the gather copy
        vg = vp.index_select(0, self._gather_idx)
        self.counters.gathered += (kg.numel() + vg.numel()) * self.elem_bytes
        n_used = kg.shape[0]
        k_full = kg.view(n_used * S, B, KV, D)[:total].permute(1, 2, 0, 3)  # (B, KV, total, D), a view
        v_full = vg.view(n_used * S, B, KV, D)[:total].permute(1, 2, 0, 3)
        return k_full, v_full

    def step_in_place(self, n_new: int) -> bool:
        super().step_in_place(n_new)  # the blocks and the written bytes
        # the gather `update` makes for attention: every block of the table, K and V, each layer
        self.counters.gathered += len(self.table) * self.block_size * self.token_bytes * self.cfg.n_layer
        return False

    @property
    def capacity(self) -> int:
        return len(self.table) * self.block_size

    def block_table(self) -> tuple[int, ...]:
        return tuple(self.table)
