"""The drafts a speculative engine verifies: prompt lookup (n-gram matches in the text so far) and a small
draft model with its own cache, plus the two rollback rules both caches follow.

Token ids in, token ids out; no sampling (a draft proposes its greedy choice), no records, no Qt.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from kvviz.caches import ConcatCache, KVCache, StaticCache

# The rollback rules: "overwrite" (gpt-fast, vLLM: the position moves back, rejected slots stay until the next
# round writes over them) and "crop" (transformers' DynamicCache.crop, SGLang's free: rejected slots removed).
ROLLBACK_RULES = ("overwrite", "crop")
TINY_DRAFT_DIR = Path(__file__).resolve().parents[2] / "assets" / "tiny-draft"


def check_rollback(rule: str) -> str:
    if rule not in ROLLBACK_RULES:
        raise ValueError(f"unknown rollback rule {rule!r}; choose from {', '.join(ROLLBACK_RULES)}")
    return rule


def cache_for(rule: str, cfg, *, max_len: int, device: torch.device, dtype: torch.dtype, seed: int = 0) -> KVCache:
    """The cache each rule is written for: a static buffer the position moves back in (overwrite), a cache
    grown by torch.cat that the rollback cuts (crop, as transformers' DynamicCache)."""
    cls = StaticCache if check_rollback(rule) == "overwrite" else ConcatCache
    return cls(cfg, max_len=max_len, device=device, dtype=dtype, seed=seed)


def roll_back(cache: KVCache, keep: int, rule: str) -> int:
    """Undo every position from `keep` on; returns the K/V bytes removed from the cache (0 for overwrite: the
    rows stay, and the next forward writes over them)."""
    gone = cache.seq_len - keep
    if gone < 0:
        raise ValueError(f"cannot roll back to {keep} positions: the cache holds {cache.seq_len}")
    if rule == "crop" and gone:
        for i in range(len(cache.k)):  # as transformers' crop: each layer's K and V cut to `keep` rows
            cache.k[i] = cache.k[i][:, :, :keep]  # (B, KV, keep, D)
            cache.v[i] = cache.v[i][:, :, :keep]
    cache.seq_len = keep
    return gone * cache.token_bytes * cache.cfg.n_layer if rule == "crop" else 0


class PromptLookup:
    """transformers' `prompt_lookup_num_tokens` and vLLM's n-gram proposer: find the last n tokens (n from
    `max_ngram` down to `min_ngram`) earlier in the text, and propose the k tokens that followed the first such
    match. No model, no forward: proposes nothing where no n-gram recurs."""

    forwards = 0

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1) -> None:
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def begin(self, n_prompt: int, max_len: int) -> None:
        pass

    def propose(self, ids: list[int], k: int) -> list[int]:
        arr = np.asarray(ids, dtype=np.int64)
        n_ids = len(arr)
        for n in range(min(self.max_ngram, n_ids - 1), self.min_ngram - 1, -1):
            # windows starting at 0 .. n_ids - n - 1: a match followed by at least one token that is not the
            # suffix itself
            windows = np.lib.stride_tricks.sliding_window_view(arr[:-1], n)  # (n_ids - n, n)
            hits = np.flatnonzero((windows == arr[-n:]).all(axis=1))
            if len(hits):
                start = int(hits[0]) + n
                return arr[start:start + k].tolist()
        return []

    def accepted(self, n_ids: int) -> None:
        pass


class DraftModel:
    """A small model proposes k tokens greedily, one forward each, through its own cache; after the target's
    verdict its cache is rolled back by the same rule as the target's to the positions both agree on."""

    def __init__(self, model: torch.nn.Module, name: str, rule: str) -> None:
        self.model, self.name, self.rule = model, name, check_rollback(rule)
        param = next(model.parameters())
        self.device, self.dtype = param.device, param.dtype
        self.cache: KVCache | None = None
        self.forwards = 0

    def begin(self, n_prompt: int, max_len: int) -> None:
        if max_len > self.model.cfg.max_seq_len:
            raise ValueError(f"the run's {max_len} positions exceed the draft model {self.name}'s context of "
                             f"{self.model.cfg.max_seq_len}")
        self.cache = cache_for(self.rule, self.model.cfg, max_len=max_len, device=self.device, dtype=self.dtype)
        self.forwards = 0

    def propose(self, ids: list[int], k: int) -> list[int]:
        cache, out = self.cache, []
        new = ids[cache.seq_len:]  # what the draft has not seen: the target's last pick (and an accepted draft)
        for _ in range(k):
            cache.prepare(len(new))
            result = self.model.forward(torch.tensor([new], device=self.device), cache=cache)
            cache.commit(len(new))
            cache.take_counters()
            self.forwards += 1
            new = [int(result.logits[0].argmax())]
            out.append(new[0])
        return out

    def accepted(self, n_ids: int) -> None:
        """The target kept `n_ids` tokens (its last pick included, whose K/V no one has yet): the draft keeps
        the positions before the first one it fed a token the target did not keep."""
        keep = min(self.cache.seq_len, n_ids - 1)
        roll_back(self.cache, keep, self.rule)


def early_exit(target: torch.nn.Module, n_layer: int | None = None) -> torch.nn.Module:
    """A draft made of the target itself: its first `n_layer` layers (half, at least one), then its final norm
    and head (self-speculative decoding by early exit, as LayerSkip drafts). For a target without a trained
    draft: the same vocabulary by construction."""
    from kvviz.models import build_decoder

    cfg = target.cfg
    n = n_layer or max(1, cfg.n_layer // 2)
    draft = build_decoder(replace(cfg, name=f"{cfg.name}-first-{n}", n_layer=n))
    layer = re.compile(r"^(?:layers|h)\.(\d+)\.")
    state = {}
    for key, value in target.state_dict().items():
        found = layer.match(key)
        if found is None or int(found.group(1)) < n:
            state[key] = value
    draft.load_state_dict(state)
    param = next(target.parameters())
    return draft.to(device=param.device, dtype=param.dtype).eval()


def draft_model_for(target: torch.nn.Module, draft=None) -> tuple[torch.nn.Module, str]:
    """The draft model and its name: `draft` itself (a model), a model loaded from `draft` (a preset name, a
    folder, a hub id), or without one the shipped tiny-draft for the shipped tiny and the target's first half
    of layers for any other. A draft with another vocabulary is refused in one line."""
    param = next(target.parameters())
    if draft is None:
        if target.cfg.name == "tiny" and (TINY_DRAFT_DIR / "model.safetensors").is_file():
            from kvviz.models.io import load_model_folder

            model, name = load_model_folder(TINY_DRAFT_DIR).to(device=param.device, dtype=param.dtype).eval(), \
                "tiny-draft"
        else:
            model = early_exit(target)
            name = f"{target.cfg.name}'s first {model.cfg.n_layer} of {target.cfg.n_layer} layers"
    elif isinstance(draft, (str, Path)):
        from kvviz.models.presets import load_model

        model, name = load_model(str(draft), param.device, param.dtype).eval(), str(draft)
    else:
        model, name = draft, getattr(draft.cfg, "name", "draft")
    if model.cfg.vocab_size != target.cfg.vocab_size:
        raise ValueError(f"draft model {name} has a vocabulary of {model.cfg.vocab_size:,} tokens, the target "
                         f"{target.cfg.vocab_size:,}: a draft must share the target's tokenizer")
    return model, name
