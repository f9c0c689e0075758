"""Prefill then decode through a cache: the prompt in one forward, then one token per forward.

Which cache (concat, static, paged, window, sinks, int8) is the only difference between the cached engines.
"""
from __future__ import annotations

import torch

from kvviz.caches import CACHES, KVCache
from kvviz.engines.base import Engine
from kvviz.kernels import BLAS_CHOICES, OpenBlasLinear
from kvviz.kernels import check_supported as check_openblas
from kvviz.models.transformer import ForwardResult, causal_mask


class CachedEngine(Engine):
    def __init__(self, model, *, cache_key: str, block_size: int = 16, options: dict | None = None,
                 blas: str = "torch") -> None:
        super().__init__(model, block_size=block_size)
        if blas not in BLAS_CHOICES:
            raise ValueError(f"unknown --blas {blas!r}; choose from {', '.join(BLAS_CHOICES)}")
        if blas == "openblas":
            check_openblas(model)
        if blas == "native":
            if cache_key != "static":
                raise ValueError(f"--blas native is for the static engine alone, not {cache_key!r}")
            from kvviz.native import check_supported as check_native

            check_native(model)
        # "openblas": every projection through numpy's OpenBLAS (kvviz.kernels); "native": each decode step
        # one C call (kvviz.native). Options, measured beside the default
        self.blas = blas
        self.kernel: OpenBlasLinear | None = None
        self.native = None
        self.key = cache_key
        self.cache_cls = CACHES[cache_key]
        self.options = options or {}  # window, sinks, residual: the approximate caches' settings
        self.cache: KVCache | None = None

    def _begin(self, prompt_ids, max_new_tokens, seed):
        # The run's length: the prompt plus every new token (the last is sampled, never stored).
        self.cache = self.cache_cls(self.cfg, max_len=len(prompt_ids) + max_new_tokens, device=self.device,
                                    dtype=self.dtype, block_size=self.block_size, seed=seed, **self.options)
        c = self.cache
        self._settings = dict(block_size=c.block_size, window=getattr(c, "window", None), sinks=getattr(c, "sinks", 0),
                              residual=getattr(c, "residual", None) or None)  # fixed for the run
        # A decode step's input, refilled each step: building a tensor from a Python list was the largest
        # piece of the engine's own cost (2% of a decode step in a py-spy profile); the model reads it
        # once, for the embedding lookup
        self._token = torch.zeros((1, 1), dtype=torch.long, device=self.device)
        if self.blas == "openblas":  # at the threads torch has now (the bench and the app set them)
            self.kernel = OpenBlasLinear(self.model.plan(), torch.get_num_threads())
        elif self.blas == "native":
            from kvviz.native import NativeStep

            self.native = NativeStep(self.model, c, torch.get_num_threads())
            self._kv_row_bytes = c.token_bytes * self.cfg.n_layer  # what StaticCache.update counts a token

    def _forward(self, ids, step, trace):
        cache = self.cache
        new = ids if step == 0 else ids[-1:]  # prefill: the prompt; decode: the last token only
        cache.prepare(len(new))
        if self.native is not None and step > 0:
            past = cache.seq_len  # the whole step in C: the new K/V written into the cache's own tensors
            layer = trace.weights_layer if trace.weights_head is not None else None
            logits, weights = self.native(new[0], past, layer, trace.weights_head or 0)
            out = ForwardResult(logits=logits, attn_weights=weights, mask=causal_mask(1, past, self.device)[0])
            cache.counters.written += self._kv_row_bytes
            cache.commit(1)
            return out, past
        if step == 0:
            x = torch.tensor([new], device=self.device)  # (1, T_new)
        else:
            x = self._token
            x.fill_(new[0])  # (1, 1)
        # forward(), not __call__: a step is short, and kvviz's models carry no hooks to run
        if self.kernel is None:
            out = self.model.forward(x, cache=cache, weights_layer=trace.weights_layer, weights_head=trace.weights_head)
        else:
            with self.kernel.running():
                out = self.model.forward(x, cache=cache, weights_layer=trace.weights_layer,
                                         weights_head=trace.weights_head, linear=self.kernel)
        cache.commit(len(new))
        return out, len(ids) - len(new)

    def _cache_figures(self):
        c = self.cache
        counters = c.take_counters()
        return dict(cache_len=c.held_len, cache_capacity=c.capacity, cache_bytes=c.resident_bytes,
                    bytes_copied=counters.copied, bytes_written=counters.written,
                    bytes_gathered=counters.gathered, block_table=c.block_table(), **self._settings)
