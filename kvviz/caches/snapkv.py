"""SnapKV (Li et al. 2024): once, after the prefill, a prompt longer than W is cut to W: the last queries of the
prompt (the observation window) say which earlier keys matter, by their attention averaged over those queries and
heads and smoothed over neighbouring positions (a mean over 5), and the window itself is kept. Decoding then adds
every new token and drops nothing, so memory grows from W. Scored as kvviz.caches.scored says (one set of positions
for the model). Knows nothing about engines or Qt.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from kvviz.caches.scored import ScoredCache

OBSERVED = 32  # the observation window (SnapKV's default), at most half of W
POOL = 5  # positions averaged around each key (kvpress's default kernel)


class SnapKVCache(ScoredCache):
    key = "snapkv"

    @property
    def observed(self) -> int:
        """The prompt's last queries whose attention ranks the keys before them (and which are kept)."""
        return max(1, min(OBSERVED, self.budget // 2))

    def room(self, n_prompt: int) -> int:
        return min(n_prompt, self.budget) + self.max_len - n_prompt  # the cut prompt, then every new token

    def scores_step(self) -> bool:
        return self._long  # one cut, after a prompt longer than W

    def layer_scores(self, probs: torch.Tensor) -> torch.Tensor:
        n, w = probs.shape[-1], self.observed
        seen = probs[0, :, -w:, :n - w].mean(1)  # (H, n - w): the window's attention to each earlier key
        pooled = F.avg_pool1d(seen[None], POOL, stride=1, padding=POOL // 2)[0]  # (H, n - w), zeros past the ends
        return F.pad(pooled.mean(0), (0, w))  # the window's own keys: kept whatever their score

    def protected(self, positions: np.ndarray) -> np.ndarray:
        keep = np.zeros(len(positions), dtype=bool)
        keep[np.argsort(positions)[-self.observed:]] = True
        return keep
