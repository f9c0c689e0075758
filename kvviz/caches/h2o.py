"""H2O (Zhang et al. 2023, "Heavy-Hitter Oracle"): every position's score is the attention it has received from
every query so far (averaged over heads); the newest W // 2 positions are never dropped (the recent window, H2O's
equal split of the budget) and, when the cache is full, the lowest-scored of the others goes. Scored as
kvviz.caches.scored says (one set of positions for the model). Knows nothing about engines or Qt.
"""
from __future__ import annotations

import numpy as np
import torch

from kvviz.caches.scored import ScoredCache


class H2OCache(ScoredCache):
    key = "h2o"

    @property
    def recent(self) -> int:
        """The recent window: the newest positions kept whatever their score."""
        return self.budget // 2

    def layer_scores(self, probs: torch.Tensor) -> torch.Tensor:
        return probs[0].mean(0).sum(0)  # (H, T_q, T_kv) -> each key's weight summed over the step's queries

    def merge(self, slots: np.ndarray, step: np.ndarray, new: np.ndarray) -> None:
        self.score[new] = 0.0  # a new token's sum starts here; its slot's old sum left with the position evicted
        self.score[slots] += step

    def protected(self, positions: np.ndarray) -> np.ndarray:
        keep = np.zeros(len(positions), dtype=bool)
        if self.recent:
            keep[np.argsort(positions)[-self.recent:]] = True
        return keep
