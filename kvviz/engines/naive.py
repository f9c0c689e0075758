"""The chapter's NaiveEngine: no cache; every step re-runs the whole sequence, recomputing every K/V."""
from __future__ import annotations

import torch

from kvviz.engines.base import Engine


class NaiveEngine(Engine):
    key = "naive"

    def _begin(self, prompt_ids, max_new_tokens, seed):
        pass

    def _forward(self, ids, step, trace):
        x = torch.tensor([ids], device=self.device)  # (1, T): the whole sequence, every step
        return self._run_model(x, None, trace), 0
