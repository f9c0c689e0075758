"""Caches that choose what to forget by a score (tova, h2o, knorm, snapkv): W slots per layer, as `window` has,
and a rule that ranks the positions held. One set of positions for the whole model: every layer and head keeps
the same ones, ranked by the mean over layers of the rule's per-layer score (docs/caches.md says why). A rule
that needs attention reads it from the keys it hands attention (`ObservedKeys`). Knows nothing about engines or Qt.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from kvviz.caches.base import KVCache
from kvviz.options import WINDOW_DEFAULT
from kvviz.records.trace import MaskSpec

_SDPA = F.scaled_dot_product_attention


def _sdpa_args(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    return query, key, attn_mask, is_causal, scale


class ObservedKeys(torch.Tensor):
    """The keys `update` returns when its rule needs attention: the model hands `update` K and V only, so these
    keys hand their cache the queries they meet in scaled_dot_product_attention (`ScoredCache.observe`). Every
    other operation sees a plain tensor."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        with torch._C.DisableTorchFunctionSubclass():
            if func is _SDPA and isinstance(args[1] if len(args) > 1 else kwargs.get("key"), ObservedKeys):
                q, k, mask, causal, scale = _sdpa_args(*args, **kwargs)
                cache, layer = k.kvviz_observer
                cache.observe(layer, q, k, mask, causal, scale)
            return func(*args, **kwargs)


def attention_probs(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, causal: bool,
                    scale: float | None) -> torch.Tensor:
    """softmax(q k^T * scale) as scaled_dot_product_attention weighs V: (B, H, T_q, T_kv) float32. `mask`: bool,
    True where a query may attend; `causal`: SDPA's top-left causal mask."""
    H, KV = q.shape[1], k.shape[1]
    k = k.float().repeat_interleave(H // KV, dim=1)  # (B, H, T_kv, D): each query head's KV head
    scores = q.float() @ k.transpose(-1, -2) * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        Tq, Tkv = scores.shape[-2:]
        mask = torch.ones(Tq, Tkv, dtype=torch.bool, device=scores.device).tril()
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1)


class ScoredCache(KVCache):
    """W slots per layer; slot j holds the same absolute position in every layer (`pos[j]`), with the rule's
    score of it (`score[j]`). A decode step on a full cache first evicts the held position that ranks lowest
    (lowest score, the older one on a tie) and writes the new token into its slot, so attention always reads
    at most W keys, as `window`'s does. A prompt longer than W is attended to whole (the prompt's own K/V),
    then cut to the W that rank highest. Subclasses say how a step scores the positions it read."""

    exact = False
    needs_attention = True  # False: the rule reads the keys alone (knorm)

    def __init__(self, cfg, *, window: int | None = None, **kw) -> None:
        super().__init__(cfg, **kw)
        budget = WINDOW_DEFAULT if window is None else window
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ValueError(f"{self.key} cache: the window must be a whole number of at least 1, got {budget!r}")
        if self.batch != 1:
            raise ValueError(f"{self.key} cache: it keeps one set of positions for one sequence, got a batch "
                             f"of {self.batch}")
        # W is `budget` here, not `window`: a record's window means the window's rule (kvviz.records.trace)
        self.budget = budget
        self.slots = 0  # allocated at the first step, once the prompt's length is known
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []
        self.used = 0  # slots holding a position (0..used-1: slots fill in order and stay full)

    def room(self, n_prompt: int) -> int:
        """Slots a run with an `n_prompt`-token prompt needs: W, never more than the run can use."""
        return min(self.budget, self.max_len)

    def _allocate(self, n_prompt: int) -> None:
        cfg = self.cfg
        self.slots = self.room(n_prompt)
        shape = (1, cfg.n_kv_head, self.slots, cfg.head_dim)  # (B, KV, slots, D)
        self.k = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(cfg.n_layer)]
        self.v = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(cfg.n_layer)]
        self.pos = np.full(self.slots, -1, dtype=np.int64)  # absolute position in each slot; -1: never used
        self.score = np.zeros(self.slots)  # the rule's score of each slot's position

    # -- the rule ---------------------------------------------------------------------------------
    def layer_scores(self, probs: torch.Tensor) -> torch.Tensor:
        """One layer's score of each key the step read, from its attention (B, H, T_q, T_kv): (T_kv,)."""
        raise NotImplementedError

    def key_scores(self, k: torch.Tensor) -> torch.Tensor:
        """One layer's score of each new key, from the keys alone (B, KV, T_new, D): (T_new,); rules that
        need no attention (knorm)."""
        raise NotImplementedError

    def merge(self, slots: np.ndarray, step: np.ndarray, new: np.ndarray) -> None:
        """Fold the step's scores (`step`, one per slot read, layers averaged) into `self.score[slots]`; `new`:
        the slots written this step. Default: the step's scores replace the old ones (TOVA)."""
        self.score[slots] = step

    def scores_step(self) -> bool:
        """Whether the rule scores this step (set up by `prepare`); every step unless a rule says otherwise."""
        return True

    def protected(self, positions: np.ndarray) -> np.ndarray:
        """Bool per held position: True where the rule never evicts it (H2O's recent tokens)."""
        return np.zeros(len(positions), dtype=bool)

    # -- eviction ---------------------------------------------------------------------------------
    def ranked(self, positions: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """Indices into `positions` of the evictable ones, first to go first: lowest score, then oldest."""
        free = np.flatnonzero(~self.protected(positions))
        order = np.lexsort((positions[free], scores[free]))
        return free[order]

    def held_positions(self) -> np.ndarray:
        """Absolute positions held now, in order."""
        return np.sort(self.pos[:self.used])

    @property
    def held_len(self) -> int:
        return self.used

    def prepare(self, n_new: int) -> None:
        super().prepare(n_new)
        start = self.seq_len
        if start > 0 and n_new != 1:
            raise ValueError(f"{self.key} cache: decode one token per step (got {n_new} after {start})")
        if start == 0:
            self._allocate(n_new)
        self._long = start == 0 and n_new > self.budget  # the prompt attended to whole, cut to W after the step
        if self._long:
            self._rows = np.arange(n_new)
            self._new = self._rows  # every row is new
            self._prompt: list[tuple[torch.Tensor, torch.Tensor]] = [None] * self.cfg.n_layer
        else:
            if self.used == self.slots:  # full: the lowest-ranked position gives its slot to the new token
                new = self.ranked(self.pos, self.score)[:1]
            else:
                new = np.arange(self.used, self.used + n_new)
                self.used += n_new
            self.pos[new] = np.arange(start, start + n_new)
            self._new = new  # the rows (slots) the new tokens take
            self._rows = self.pos[:self.used].copy()
            self._idx = torch.from_numpy(new).to(self.device)
        self._step = torch.zeros(len(self._rows), dtype=torch.float64)
        self._seen = 0  # layers scored this step
        self._scoring = self.scores_step()

    def kv_positions(self, n_new: int) -> np.ndarray:
        return self._rows  # the rows `update` returns, in slot order (the prompt's own, for a long one)

    def mask_spec(self, n_new: int) -> MaskSpec:
        start = self.seq_len
        held = None if start == 0 else tuple(int(p) for p in np.sort(self._rows[self._rows < start]))
        return MaskSpec(q_len=n_new, kv_len=start + n_new, past_len=start, held=held)

    def update(self, layer, k, v):
        T = k.shape[2]
        if self._scoring and not self.needs_attention:
            self._add(self.key_scores(k), self._new)
        if self._long:
            self._prompt[layer] = (k, v)  # stored after the step, once the rule has ranked the prompt
        else:
            self.k[layer].index_copy_(2, self._idx, k)
            self.v[layer].index_copy_(2, self._idx, v)
            self.counters.written += 2 * T * (k.numel() // T) * self.elem_bytes
            k, v = self.k[layer][:, :, :self.used], self.v[layer][:, :, :self.used]  # (B, KV, used, D)
        if self._scoring and self.needs_attention:
            k = k.as_subclass(ObservedKeys)
            k.kvviz_observer = (self, layer)
        return k, v

    def observe(self, layer: int, q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, causal: bool,
                scale: float | None) -> None:
        """Layer `layer`'s queries (B, H, T, D) meeting the keys `update` returned: the rule scores them."""
        self._add(self.layer_scores(attention_probs(q, k, mask, causal, scale)), slice(None))

    def _add(self, scores: torch.Tensor, rows) -> None:
        """Add one layer's scores to the step's, at `rows` of the rows read (all of them, or the new keys')."""
        if isinstance(rows, np.ndarray):
            rows = torch.from_numpy(rows)
        self._step[rows] += scores.detach().to("cpu", torch.float64)
        self._seen += 1

    def commit(self, n_new: int) -> None:
        if self._scoring and self._seen != self.cfg.n_layer:
            raise RuntimeError(f"{self.key} cache: {self._seen} of {self.cfg.n_layer} layers were scored this step "
                               "(the model must pass the keys update returns to scaled_dot_product_attention)")
        step = self._step.numpy() / self.cfg.n_layer  # the mean over layers
        if self._long:
            self._cut(step)
        elif self._scoring:
            self.merge(np.arange(self.used), step, self._new)
        super().commit(n_new)

    def _cut(self, step: np.ndarray) -> None:
        """After a long prompt: keep the W positions that rank highest, in position order, in slots 0..W-1."""
        rows, W = self._rows, self.budget
        gone = self.ranked(rows, step)[:len(rows) - W]
        keep = np.setdiff1d(np.arange(len(rows)), gone)
        idx = torch.from_numpy(keep).to(self.device)
        for layer, (k, v) in enumerate(self._prompt):
            self.k[layer][:, :, :W] = k.index_select(2, idx)
            self.v[layer][:, :, :W] = v.index_select(2, idx)
            self.counters.written += 2 * W * (k.numel() // k.shape[2]) * self.elem_bytes
        self._prompt = []
        self.used = W
        self.pos[:W] = rows[keep]
        self.score[:] = 0.0
        self.merge(np.arange(W), step[keep], np.arange(W))

    @property
    def capacity(self) -> int:
        return self.slots
