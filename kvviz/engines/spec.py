"""Speculative decoding over a cache that rolls back: a draft proposes k tokens, the target verifies them in one
forward over its cache, the K/V of rejected drafts are undone by the run's rollback rule.

Exact: each token is the target's own pick at its position (greedy, or the run's seeded sampler drawing in the
same order as a plain loop), and a draft is kept only where it equals that pick, so the tokens are naive's.
One StepTrace per token, as every engine yields; a round's first step carries its forward (kvviz.records.trace).
Knows nothing about text or Qt.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from kvviz.config import SamplingConfig, TraceOptions
from kvviz.engines.base import Engine, _inference_mode, _to_numpy
from kvviz.engines.drafts import DraftModel, PromptLookup, cache_for, check_rollback, draft_model_for, roll_back
from kvviz.records.trace import MaskSpec, StepTrace
from kvviz.runtime.devices import allocated_bytes
from kvviz.sampling import check_picked

SPEC_K_MAX = 64


class SpecEngine(Engine):
    """`draft`: "lookup" (prompt lookup) or "model" (a draft model: `draft_model`, see drafts.draft_model_for);
    `k`: drafts per round; `rollback`: "overwrite" (a static cache whose position moves back, gpt-fast and
    vLLM) or "crop" (a cache grown by torch.cat and cut back, transformers and SGLang)."""

    def __init__(self, model, *, key: str, draft: str, k: int, rollback: str, draft_model=None,
                 block_size: int = 16, kernel: str = "torch") -> None:
        super().__init__(model, block_size=block_size, kernel=kernel)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= SPEC_K_MAX:
            raise ValueError(f"k (drafts per round) must be a whole number in 1..{SPEC_K_MAX}, got {k!r}")
        self.key, self.k, self.rollback = key, k, check_rollback(rollback)
        if draft == "lookup":
            self.proposer = PromptLookup()
            self.draft_name = "prompt lookup"
        elif draft == "model":
            drafter, self.draft_name = draft_model_for(model, draft_model)
            self.proposer = DraftModel(drafter, self.draft_name, rollback)
        else:
            raise ValueError(f"unknown draft {draft!r}; choose lookup or model")
        self.cache = None

    # The per-step loop of Engine.generate does not fit a round of several tokens: generate is the engine's own.
    def _begin(self, prompt_ids, max_new_tokens, seed):
        n = len(prompt_ids) + max_new_tokens
        self.cache = cache_for(self.rollback, self.cfg, max_len=n, device=self.device, dtype=self.dtype, seed=seed)
        self.proposer.begin(len(prompt_ids), n)

    def _forward(self, ids, step, trace):
        raise NotImplementedError("SpecEngine runs whole rounds in generate()")

    def _verify(self, x: list[int], trace: TraceOptions):
        """One target forward over `x` at the cache's end: logits of every row (T, V)."""
        cache = self.cache
        cache.prepare(len(x))
        ids = torch.tensor([x], device=self.device)  # (1, T)
        kw = dict(cache=cache, weights_layer=trace.weights_layer, weights_head=trace.weights_head, all_logits=True)
        if self._linear is None:
            out = self.model.forward(ids, **kw)
        else:
            with self._linear.running():
                out = self.model.forward(ids, linear=self._linear, **kw)
        cache.commit(len(x))
        return out

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int, sampling: SamplingConfig | None = None,
                 trace: TraceOptions | None = None, run_id: str | None = None,
                 token_text: Callable[[int], str] = str, forced_tokens: Sequence[int] | None = None):
        sampling, trace, run_id, sampler, timer, ids = self._start_run(prompt_ids, max_new_tokens, sampling, trace,
                                                                       run_id)
        cache, n_layer, proposer = self.cache, self.cfg.n_layer, self.proposer
        row_bytes = cache.token_bytes * n_layer  # K and V of one position, every layer
        overwrite = self.rollback == "overwrite"
        stale_end = 0  # positions seq_len .. stale_end - 1 hold rejected K/V (overwrite)
        forwards = 0

        def pick(logits: torch.Tensor, step: int) -> int:
            if forced_tokens is None:
                return sampler.pick(logits)
            if step < len(forced_tokens):
                return int(forced_tokens[step])
            raise ValueError(f"step {step}: only {len(forced_tokens)} forced tokens given")

        step = 0
        while step < max_new_tokens:
            n_ids = len(ids)
            prefill = step == 0
            timer.start()
            with _inference_mode():
                if prefill:
                    drafts, x = [], ids
                else:  # drafts that would pass the run's end are never asked for
                    drafts = proposer.propose(ids, min(self.k, max_new_tokens - step - 1))
                    x = [ids[-1], *drafts]
                start = cache.seq_len  # the first position this forward writes
                out = self._verify(x, trace)
                forwards += 1
                counters = cache.take_counters()
                overwritten = max(0, min(stale_end, start + len(x)) - start) if overwrite else 0
                logits = out.logits[0, -len(drafts) - 1:]  # (1 + p, V): row i picks the token after x[i]
                tokens, times = [pick(logits[0], step)], []
            times.append(timer.stop())
            accepted = 0
            while accepted < len(drafts) and tokens[-1] == drafts[accepted]:
                timer.start()
                tokens.append(pick(logits[accepted + 1], step + len(tokens)))
                times.append(timer.stop())
                accepted += 1
            if forced_tokens is None:
                for row, token in enumerate(tokens):
                    check_picked(logits[row], token)  # NaN/Inf logits stop the run (kvviz.sampling)
            rejected = len(drafts) - accepted
            if overwrite:
                stale_end = max(stale_end, cache.seq_len)
            undone = roll_back(cache, cache.seq_len - rejected, self.rollback)
            stale = max(0, stale_end - cache.seq_len) if overwrite else 0
            proposer.accepted(n_ids + len(tokens))
            weights = None if out.attn_weights is None else out.attn_weights[0]  # (T_q, T_kv)
            for i, token in enumerate(tokens):
                pos_stop = n_ids + i  # the token just picked sits at pos_stop
                pos_start = 0 if prefill else pos_stop - 1
                row = len(x) - 1 if prefill else i  # the row of the forward that made this token
                first = i == 0
                kv_len = held = pos_stop  # the positions with K/V once this token's step is done
                written = counters.written - accepted * row_bytes if first else row_bytes
                record = {
                    "run_id": run_id, "engine": self.key, "step": step, "phase": "prefill" if prefill else "decode",
                    "token_id": token, "token_text": token_text(token), "pos_start": pos_start, "pos_stop": pos_stop,
                    "kv_projections": (pos_stop - pos_start) * n_layer, "latency_ms": times[i],
                    "mask_spec": MaskSpec(q_len=pos_stop - pos_start, kv_len=kv_len, past_len=pos_start)
                    if trace.masks else None,
                    "attn_weights": None if weights is None else _to_numpy(
                        weights[row - (pos_stop - pos_start) + 1:row + 1, :kv_len]).copy(),
                    "weights_layer": trace.weights_layer if weights is not None else None,
                    "weights_head": trace.weights_head if weights is not None else None,
                    "logits": _to_numpy(logits[i] if not prefill else logits[0]).copy() if trace.logits else None,
                    "device_mem_bytes": allocated_bytes(self.device), "kl_to_exact": None, "top1_agrees": None,
                    "cache_len": held, "cache_capacity": cache.capacity if overwrite else held,
                    "cache_bytes": cache.resident_bytes if overwrite else held * row_bytes,
                    "bytes_copied": counters.copied if first else 0, "bytes_written": written,
                    "bytes_gathered": counters.gathered if first else 0, "block_table": None, "block_size": None,
                    "window": None, "sinks": 0, "residual": None,
                    "spec_k": self.k, "spec_proposed": len(drafts), "spec_accepted": accepted,
                    "spec_rolled_back": rejected, "spec_index": i, "target_forwards": forwards,
                    "draft_forwards": proposer.forwards, "bytes_undone": undone if first else 0,
                    "bytes_overwritten": overwritten * row_bytes if first else 0, "spec_stale": stale}
                yield StepTrace.of(record)
                step += 1
            ids.extend(tokens)
