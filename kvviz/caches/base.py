"""The cache interface: one object per sequence holding every layer's K and V.

A strategy differs only in where `update` puts new K/V and what it hands attention back. Each
cache accounts its own byte traffic (copied, written, gathered) as it does it; the tests check
those counts against the bytes of the tensor ops actually run. Knows nothing about engines or Qt.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import torch

from kvviz.config import ModelConfig
from kvviz.records.trace import MaskSpec


@dataclass
class ByteCounters:
    copied: int = 0  # existing cache content moved to a new place by cache maintenance
    written: int = 0  # new K/V stored
    gathered: int = 0  # copies made only to feed attention


class KVCache(ABC):
    """K/V for every layer of one sequence. Tensors are (B, n_kv_head, T, head_dim)."""

    key: str = ""
    block_size: int | None = None  # tokens per block, for caches that allocate in blocks
    # True: attention sees exactly what it would without a cache (same tokens as naive). False: the
    # cache drops or approximates K/V (window, sinks, int8), and is tested against its own rule.
    exact: bool = True

    def __init__(self, cfg: ModelConfig, *, max_len: int, device: torch.device, dtype: torch.dtype,
                 batch: int = 1, block_size: int = 16, seed: int = 0, window: int | None = None,
                 sinks: int | None = None, residual: int | None = None) -> None:
        # window, sinks, residual: settings of the approximate caches; the others ignore them
        self.cfg = cfg
        self.max_len = max_len
        self.device = device
        self.dtype = dtype
        self.batch = batch
        self.elem_bytes = torch.empty((), dtype=dtype).element_size()
        self.seq_len = 0  # tokens stored and committed
        self.counters = ByteCounters()

    @property
    def token_bytes(self) -> int:
        """Bytes of K plus V for one token in one layer (all batch rows)."""
        return 2 * self.batch * self.cfg.n_kv_head * self.cfg.head_dim * self.elem_bytes

    def reserve(self, n_new: int) -> None:
        """Room for `n_new` more tokens (a block cache takes its blocks here), and nothing else: what a kernel
        that writes the cache itself needs (kvviz.native); `prepare` adds what `update` will use."""
        if self.seq_len + n_new > self.max_len:
            raise ValueError(f"{self.key} cache: {self.seq_len + n_new} tokens exceed its length {self.max_len}")

    def prepare(self, n_new: int) -> None:
        """Make room for `n_new` tokens before a forward (allocation happens here, not in update)."""
        self.reserve(n_new)

    def step_in_place(self, n_new: int) -> bool:
        """Room for `n_new` tokens that a kernel writes into this cache's own tensors (kvviz.native) instead of
        `update`, with the bytes `update` would count for them; True where the tensors were replaced (the kernel
        binds the new ones). `commit` follows as after `update`."""
        self.reserve(n_new)
        self.counters.written += n_new * self.token_bytes * self.cfg.n_layer
        return False

    @abstractmethod
    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store the new k, v (B, KV, T_new, D) at positions seq_len.. and return past + new."""

    def commit(self, n_new: int) -> None:
        """Every layer has stored the step's tokens: they now count."""
        self.seq_len += n_new

    @property
    def held_len(self) -> int:
        """Positions whose K/V the cache holds now (all of them, unless it evicts)."""
        return self.seq_len

    def kv_positions(self, n_new: int) -> np.ndarray | None:
        """Absolute position of each K/V row `update` will return for `n_new` new tokens, when that is
        not simply 0..seq_len+n_new-1 in order (None). The model masks and places weights with it."""
        return None

    def mask_spec(self, n_new: int) -> MaskSpec:
        """The rule attention applies over absolute positions (the chapter's causal mask here)."""
        return MaskSpec(q_len=n_new, kv_len=self.seq_len + n_new, past_len=self.seq_len)

    @property
    @abstractmethod
    def capacity(self) -> int:
        """Tokens the cache holds room for without allocating."""

    @property
    def resident_bytes(self) -> int:
        """K/V bytes this sequence holds, all layers: its capacity's rows at full width (a cache storing
        rows otherwise says so)."""
        return self.capacity * self.token_bytes * self.cfg.n_layer

    def block_table(self) -> tuple[int, ...] | None:
        return None

    def take_counters(self) -> ByteCounters:
        out, self.counters = self.counters, ByteCounters()
        return out
