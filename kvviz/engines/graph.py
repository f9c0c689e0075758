"""The `static` engine with a static-shape decode step, which CUDA can capture as a graph and replay.

A batch-1 decode step of a small model is some fifty tiny kernels; launching them from Python costs
more than running them. A CUDA graph records the step's kernels once and replays them with one launch,
but only a step whose every shape and address is fixed can be recorded. So the decode step here is
written the way gpt-fast writes it:

- the inputs are two tensors that live for the run: the token id (1, 1) and its position (1,);
- the new K/V go into the StaticCache's preallocated buffers with `index_copy_` at the position
  tensor, and the rotary rows are picked with `index_select` by it (no Python slice by an int);
- attention covers the whole preallocated length with a mask built from the position tensor (keys
  after the position masked), so its shapes do not grow with the sequence.

On CUDA `_begin` warms the step up on a side stream and captures it once; each decode step then copies
the token id and position into the inputs and replays. On a CPU (or with `graph=False`) the same
step runs eagerly, which is what the tests check against the eager `static` engine. With
`compiled=True` the step is compiled by `torch.compile` (inductor; fixed shapes, so one compile per
run length and model, tens of seconds on a small CPU, done in `_begin`, outside every step's time):
the `compiled` kernel (`--kernel compiled`), not the default. The prefill stays
the model's ordinary forward. The engine is traced as `static` is, with the same figures. Llama-family
models only. It knows nothing of the bench or the app.
"""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from kvviz.engines.cached import CachedEngine
from kvviz.kernels import check_static_step
from kvviz.models.transformer import ForwardResult, head_weights

WARMUP_STEPS = 3  # eager runs on a side stream before capture (lazy initialisation, kernel selection)
_COMPILED = None  # torch.compile(StaticStep._step), made at the first compiled run


class StaticStep:
    """One decode step over a StaticCache's buffers with every shape fixed: feed `token` and `pos`,
    call `run()` (eager) or `replay()` (captured), read `logits` (1, V) and `queries[layer]` (1, H, 1, D).

    Holds the model's plan so the tensors a captured graph reads stay alive and in place."""

    def __init__(self, model, cache) -> None:
        device = cache.device
        if model.plan().cos.shape[0] < cache.max_len or model.plan().cos.device != device:
            model.rope_tables(cache.max_len, device)  # rotary tables as long as the run, here (rebuilds the plan)
        self.model = model
        self.plan = model.plan()  # held: a captured graph reads its tensors
        self.k, self.v = cache.k, cache.v  # (1, KV, T_max, D) per layer, written in place
        self.token = torch.zeros((1, 1), dtype=torch.long, device=device)  # (B, T)
        self.pos = torch.zeros((1,), dtype=torch.long, device=device)
        self.key_pos = torch.arange(cache.max_len, device=device)  # (T_max,)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: torch.Tensor | None = None
        self.queries: tuple[torch.Tensor, ...] = ()

    def run(self) -> None:
        """The step, eagerly: its outputs are fresh tensors."""
        self.logits, self.queries = self._step()

    def capture(self) -> None:
        """Warm up on a side stream, then record the step as a CUDA graph. The warm-up writes K/V at
        whatever `pos` holds; the caller sets a position the prefill overwrites."""
        with torch.cuda.device(self.pos.device):  # the capture records on the current device
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(WARMUP_STEPS):
                    self._step()
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                # the tensors made inside the capture live in the graph's pool: each replay refills them
                self.logits, self.queries = self._step()

    def replay(self) -> None:
        self.graph.replay()

    def compile(self) -> None:
        """Run the step compiled from now on (torch.compile, one compiled function for every StaticStep:
        dynamo guards on the tensors' shapes, so a run of a new length or model compiles again)."""
        global _COMPILED
        if _COMPILED is None:
            _COMPILED = torch.compile(StaticStep._step, dynamic=False)
        compiled = _COMPILED
        self._step = lambda: compiled(self)

    def _step(self) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        attention = _StaticAttention(self)
        logits = self.model.forward(self.token, attention=attention).logits  # (1, V)
        return logits, tuple(attention.queries)


class _StaticAttention:
    """StaticStep's attention hook (kvviz.models.transformer.CacheAttention's members): the rotary rows picked
    by the position tensor, the new K/V copied into the cache's row `pos` in place, attention over all T_max
    keys with the keys after `pos` masked; each layer's queries kept for the traced head's weights."""

    rows = None
    mask = None
    weights = None

    def __init__(self, step: StaticStep) -> None:
        self.step = step
        self.positions = step.pos  # (1,)
        self.stop = step.key_pos.shape[0]  # the tables already cover the run (StaticStep.__init__)
        self.allowed = (step.key_pos <= step.pos).view(1, 1, 1, -1)  # (1, 1, 1, T_max)
        self.queries: list[torch.Tensor] = []

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        s = self.step
        s.k[layer].index_copy_(2, s.pos, k)  # the cache's row `pos`, in place
        s.v[layer].index_copy_(2, s.pos, v)
        y = F.scaled_dot_product_attention(q, s.k[layer], s.v[layer], attn_mask=self.allowed,
                                           enable_gqa=q.shape[1] != k.shape[1])  # (1, H, 1, D) over all T_max keys
        self.queries.append(q)
        return y.transpose(1, 2).reshape(1, 1, -1)  # (1, 1, H*D)


class GraphStaticEngine(CachedEngine):
    """`static`, its decode step static-shaped and, on CUDA, replayed from a graph.

    `graph`: None captures on CUDA and runs eagerly elsewhere; True requires CUDA; False never captures
    (the tests' CPU path). `compiled`: the step compiled by torch.compile instead. `capture_ms`: the last
    run's warm-up and capture (or compile), outside every step's time."""

    def __init__(self, model, *, block_size: int = 16, graph: bool | None = None, compiled: bool = False) -> None:
        check_static_step(model.cfg)
        super().__init__(model, cache_key="static", block_size=block_size,
                         kernel="cuda-graph" if graph else "compiled" if compiled else "torch")
        if graph and self.device.type != "cuda":
            raise ValueError(f"a CUDA graph needs a CUDA device, not {self.device.type}")
        if graph and compiled:
            raise ValueError("a step is either compiled or replayed from a CUDA graph, not both")
        self.graph = (self.device.type == "cuda" and not compiled) if graph is None else graph
        self.compiled = compiled
        self.step_fn: StaticStep | None = None
        self.capture_ms = 0.0
        self.row_bytes = 0  # K and V of one position, all layers: what a decode step writes

    def _begin(self, prompt_ids, max_new_tokens, seed):
        super()._begin(prompt_ids, max_new_tokens, seed)
        self.step_fn = StaticStep(self.model, self.cache)
        self.row_bytes = self.cache.token_bytes * self.cfg.n_layer
        if self.graph:
            t0 = time.perf_counter()
            with torch.inference_mode():
                self.step_fn.token.fill_(int(prompt_ids[0]))
                self.step_fn.pos.zero_()  # the warm-up writes row 0; the prefill overwrites it
                self.step_fn.capture()
            torch.cuda.synchronize(self.device)
            self.capture_ms = (time.perf_counter() - t0) * 1000.0
        elif self.compiled:  # compiled (or its compiled code found) now, on row 0, which the prefill overwrites
            t0 = time.perf_counter()
            self.step_fn.compile()
            with torch.inference_mode():
                self.step_fn.token.fill_(int(prompt_ids[0]))
                self.step_fn.pos.zero_()
                self.step_fn.run()
            self.capture_ms = (time.perf_counter() - t0) * 1000.0

    def _forward(self, ids, step, trace):
        if step == 0:  # the prefill: the model's own forward into the same cache
            return super()._forward(ids, step, trace)
        cache, s = self.cache, self.step_fn
        past = cache.seq_len
        cache.prepare(1)
        s.token.fill_(ids[-1])  # into the step's fixed inputs: no new tensor, no shape change
        s.pos.fill_(past)
        if self.graph:
            s.replay()
        else:
            s.run()
        cache.counters.written += self.row_bytes  # as StaticCache.update counts its copy_
        mask = cache.mask_spec(1)
        cache.commit(1)
        weights = None
        if trace.weights_layer is not None and trace.weights_head is not None:
            # one head's weights over the valid length only (the keys attention did not mask)
            k = s.k[trace.weights_layer][:, :, :past + 1]  # (1, KV, past+1, D)
            weights = head_weights(s.queries[trace.weights_layer], k, mask, trace.weights_head)
        # on CUDA the base engine samples the logits and copies them to the host before the next replay
        return ForwardResult(logits=s.logits, mask=mask, attn_weights=weights), past
