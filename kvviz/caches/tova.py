"""TOVA (Oren et al. 2024, "Transformers are Multi-State RNNs"): when the cache is full, the position the last query
attended to least (its attention averaged over heads) is dropped; the newest token may be dropped too. Scored
as kvviz.caches.scored says (one set of positions for the model). Knows nothing about engines or Qt.
"""
from __future__ import annotations

import torch

from kvviz.caches.scored import ScoredCache


class TovaCache(ScoredCache):
    key = "tova"

    def layer_scores(self, probs: torch.Tensor) -> torch.Tensor:
        return probs[0, :, -1, :].mean(0)  # the last query's weights (H, T_kv), averaged over heads
