"""The Engine interface: a generator that yields one StepTrace per step (prefill is step 0).

N new tokens cost one prefill forward plus N-1 decode forwards, as in the chapter. The engine
knows nothing about text: token ids in, token ids out; labels come from a callable it is given.
"""
from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence

import torch

from kvviz.config import SamplingConfig, TraceOptions
from kvviz.measure.timing import StepTimer
from kvviz.models.transformer import ForwardResult, Transformer
from kvviz.records.trace import StepTrace
from kvviz.runtime.devices import allocated_bytes
from kvviz.sampling import Sampler, check_picked


def validate_request(max_seq_len: int, n_prompt: int, max_new_tokens: int) -> None:
    """Raise ValueError with a one-line reason for a request no engine can serve."""
    if n_prompt < 1:
        raise ValueError("the prompt is empty")
    if max_new_tokens < 1:
        raise ValueError(f"new tokens must be at least 1, got {max_new_tokens}")
    if n_prompt + max_new_tokens > max_seq_len:
        raise ValueError(
            f"prompt ({n_prompt} tokens) + new tokens ({max_new_tokens}) = {n_prompt + max_new_tokens} "
            f"exceeds the model's context of {max_seq_len}")


# torch.inference_mode() as the C++ guard it wraps: the Python context manager around it cost 1.4 us a step
# against 0.6 (a tiny model's step is 0.6 ms, and `kvviz bench --reference` holds the engine to 5% of a
# bare loop). The public one where a torch has no such guard.
_GUARD = getattr(torch._C, "_InferenceMode", None)


def _inference_mode():
    return torch.inference_mode() if _GUARD is None else _GUARD(True)


def _to_numpy(t: torch.Tensor):
    """float32 numpy of a tensor the model made this step and never touches again."""
    if t.dtype != torch.float32:
        t = t.float()
    return t.numpy() if t.is_cpu else t.cpu().numpy()


class Engine(ABC):
    """Runs a model step by step. Subclasses say what one step feeds the model and what it keeps."""

    key: str = ""

    def __init__(self, model: Transformer, *, block_size: int = 16, kernel: str = "torch") -> None:
        self.model = model
        self.cfg = model.cfg
        self.block_size = block_size
        self.kernel = kernel  # kvviz.kernels: what runs each decode step, checked by make_engine
        self._linear = None  # kernel "openblas": the projections' kernel, made per run at torch's threads then
        param = next(model.parameters())
        self.device, self.dtype = param.device, param.dtype

    def _run_model(self, x: torch.Tensor, cache, trace: TraceOptions) -> ForwardResult:
        """The model's forward over `x` (B, T) on the run's kernel (forward(), not __call__: a step is short,
        and kvviz's models carry no hooks to run)."""
        if self._linear is None:
            return self.model.forward(x, cache=cache, weights_layer=trace.weights_layer,
                                      weights_head=trace.weights_head)
        with self._linear.running():
            return self.model.forward(x, cache=cache, weights_layer=trace.weights_layer,
                                      weights_head=trace.weights_head, linear=self._linear)

    @abstractmethod
    def _begin(self, prompt_ids: Sequence[int], max_new_tokens: int, seed: int) -> None:
        """Set up per-run state (a cache, or nothing)."""

    @abstractmethod
    def _forward(self, ids: list[int], step: int, trace: TraceOptions) -> tuple[ForwardResult, int]:
        """Run the model for this step; return its result and the first position it computed."""

    def _cache_figures(self) -> dict:
        return dict(cache_len=0, cache_capacity=0, cache_bytes=0, bytes_copied=0, bytes_written=0,
                    bytes_gathered=0, block_table=None, block_size=None, window=None, sinks=0, residual=None)

    def _start_run(self, prompt_ids, max_new_tokens: int, sampling: SamplingConfig | None,
                   trace: TraceOptions | None, run_id: str | None):
        """The request checked and the run set up, as every generate loop starts: (sampling, trace, run id,
        sampler, step timer, the prompt's ids); the cache begun for it."""
        validate_request(self.cfg.max_seq_len, len(prompt_ids), max_new_tokens)
        sampling = sampling or SamplingConfig()
        trace = trace or TraceOptions()
        if trace.weights_layer is not None and not (0 <= trace.weights_layer < self.cfg.n_layer):
            raise ValueError(f"weights layer {trace.weights_layer} outside 0..{self.cfg.n_layer - 1}")
        if trace.weights_layer is not None and not (0 <= trace.weights_head < self.cfg.n_head):
            raise ValueError(f"weights head {trace.weights_head} outside 0..{self.cfg.n_head - 1}")
        run_id = run_id or uuid.uuid4().hex[:8]
        sampler = Sampler(sampling)
        timer = StepTimer(self.device)
        ids = [int(i) for i in prompt_ids]
        if self.kernel == "openblas":
            from kvviz.kernels.openblas import OpenBlasLinear

            self._linear = OpenBlasLinear(self.model.plan(), torch.get_num_threads())
        self._begin(ids, max_new_tokens, sampling.seed)
        return sampling, trace, run_id, sampler, timer, ids

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int,
                 sampling: SamplingConfig | None = None, trace: TraceOptions | None = None,
                 run_id: str | None = None,
                 token_text: Callable[[int], str] = str,
                 forced_tokens: Sequence[int] | None = None) -> Iterator[StepTrace]:
        """`forced_tokens`: teacher forcing: step k appends forced_tokens[k] instead of its own sample
        (the quality measure feeds an approximate cache the exact engine's tokens this way). It is read at
        the end of each step, so a list that another run fills in lockstep will do."""
        sampling, trace, run_id, sampler, timer, ids = self._start_run(prompt_ids, max_new_tokens, sampling, trace,
                                                                       run_id)
        # Looked up once: a tiny model's decode step is under a millisecond on a CPU, and
        # `kvviz bench --reference` holds every step against a bare loop of the same rule (kvviz.measure.reference)
        key, n_layer, forward, figures = self.key, self.cfg.n_layer, self._forward, self._cache_figures
        masks, want_logits, pick = trace.masks, trace.logits, sampler.pick
        greedy = sampling.greedy and forced_tokens is None  # a kernel's own argmax may stand for the pick
        device, memory = self.device, allocated_bytes  # None where the device reports no figure (a CPU)
        start, stop = timer.start, timer.stop
        make = StepTrace.of
        for step in range(max_new_tokens):
            start()
            with _inference_mode():
                out, pos_start = forward(ids, step, trace)
                kernel_pick = greedy and out.greedy is not None  # the native step's: torch.argmax's, finite
                if kernel_pick:
                    token = out.greedy
                elif forced_tokens is None:
                    token = pick(out.logits[0])
                elif step < len(forced_tokens):
                    token = int(forced_tokens[step])
                else:
                    raise ValueError(f"step {step}: only {len(forced_tokens)} forced tokens given")
            latency_ms = stop()
            if forced_tokens is None and not kernel_pick:
                check_picked(out.logits[0], token)  # NaN/Inf logits stop the run (kvviz.sampling)
            pos_stop = len(ids)
            ids.append(token)
            # The model returns fresh tensors each step, so numpy views of them are the trace's own:
            # no copy is needed beyond the device-to-host one (and a cast from bf16/fp16).
            weights = None if out.attn_weights is None else _to_numpy(out.attn_weights[0])  # (T_q, T_kv)
            record = {  # every field (StepTrace.of): no keyword binding in a step's own cost
                "run_id": run_id, "engine": key, "step": step, "phase": "prefill" if step == 0 else "decode",
                "token_id": token, "token_text": token_text(token), "pos_start": pos_start, "pos_stop": pos_stop,
                "kv_projections": (pos_stop - pos_start) * n_layer, "latency_ms": latency_ms,
                "mask_spec": out.mask if masks else None, "attn_weights": weights,
                "weights_layer": trace.weights_layer if weights is not None else None,
                "weights_head": trace.weights_head if weights is not None else None,
                "logits": _to_numpy(out.logits[0]) if want_logits else None,
                "device_mem_bytes": memory(device), "kl_to_exact": None, "top1_agrees": None}
            record.update(figures())
            yield make(record)
