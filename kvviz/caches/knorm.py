"""Key norm (Devoto et al. 2024, "A Simple and Effective L2 Norm-Based Strategy for KV Cache Compression"): keys
with a small L2 norm draw the most attention, so when the cache is full the key with the largest norm (averaged
over KV heads) is dropped. No attention needed. Scored as kvviz.caches.scored says (one set of positions for the
model). Knows nothing about engines or Qt.
"""
from __future__ import annotations

import numpy as np
import torch

from kvviz.caches.scored import ScoredCache


class KnormCache(ScoredCache):
    key = "knorm"
    needs_attention = False

    def key_scores(self, k: torch.Tensor) -> torch.Tensor:
        return -k[0].float().norm(dim=-1).mean(0)  # (KV, T_new, D) -> minus each key's norm, averaged over heads

    def merge(self, slots: np.ndarray, step: np.ndarray, new: np.ndarray) -> None:
        self.score[new] = step[new]  # a key's norm never changes: only the new keys are scored
