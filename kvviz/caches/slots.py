"""Where a position's K/V live in a paged pool: slot table[p // S] * S + p % S of a pool of S-token blocks.

The one copy of that arithmetic, for the paged cache, the serving model runner and the bare reference loop.
Knows nothing about caches' objects, requests or the model.
"""
from __future__ import annotations

import torch


def slots(table: torch.Tensor, positions: torch.Tensor, block_size: int) -> torch.Tensor:
    """Pool slot of each position: `table` (..., n_blocks) block ids, `positions` (..., n) with the same
    leading dims (one table per row of a batch); the result has the positions' shape."""
    return table.gather(-1, positions // block_size) * block_size + positions % block_size
