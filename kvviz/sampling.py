"""Choose the next token from logits: greedy, temperature, top-k, top-p, with a seeded generator.

Logits that are not numbers (NaN, +Inf, or all -Inf) are refused with NonFiniteLogits: a model that
computes them gives no token worth showing, and greedy decoding would still pick one."""
from __future__ import annotations

import math

import torch

from kvviz.config import SamplingConfig


class NonFiniteLogits(ValueError):
    """The model's logits hold NaN or +Inf (or are all -Inf): one line, the run stops."""


def _refuse(value: float) -> None:
    raise NonFiniteLogits(f"the model's logits are not finite numbers (the largest is {value}): its weights "
                          f"or its arithmetic in this dtype overflowed; try --dtype fp32 or another checkpoint")


class Sampler:
    """One per engine run; the same seed gives the same draws on every engine and device."""

    def __init__(self, cfg: SamplingConfig) -> None:
        self.cfg = cfg
        self.gen = torch.Generator().manual_seed(cfg.seed)  # CPU: identical draws on any device
        # The engines call `pick` every step: greedy is one argmax, with no settings to look at
        self.pick = _argmax if cfg.greedy else self.__call__

    def __call__(self, logits: torch.Tensor) -> int:
        """logits (V,) -> token id."""
        cfg = self.cfg
        if cfg.greedy:
            return _argmax(logits)
        x = logits.detach().double().cpu() / cfg.temperature
        top = float(x.max())  # NaN propagates through max, so one figure says it all
        if not math.isfinite(top):
            _refuse(top)
        if cfg.top_k is not None and cfg.top_k < x.numel():
            kth = torch.topk(x, cfg.top_k).values[-1]
            x = x.masked_fill(x < kth, float("-inf"))
        probs = x.softmax(-1)
        if cfg.top_p is not None and cfg.top_p < 1:
            sorted_p, order = probs.sort(descending=True)
            before = sorted_p.cumsum(0) - sorted_p  # mass of strictly more likely tokens
            drop = before >= cfg.top_p  # keep the smallest prefix whose mass reaches top_p
            sorted_p = sorted_p.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(0, order, sorted_p)
        return int(torch.multinomial(probs, 1, generator=self.gen))


def _argmax(logits: torch.Tensor) -> int:
    """The first index of the largest logit (NaN counts as the largest, as in torch.argmax). On a CPU in float32
    through numpy: torch's CPU argmax took 2.3 us over 259 logits and 239 us over Qwen's 151,936, numpy's 1.1
    and 10.9 (one thread, this machine). The same index: both take the first of equal maxima, and a NaN."""
    if logits.dtype == torch.float32 and logits.is_cpu:
        return int(logits.numpy().argmax())
    return int(logits.argmax())


def check_picked(logits: torch.Tensor, token: int) -> None:
    """NonFiniteLogits unless the logit of the token picked is finite. argmax takes NaN as the largest,
    so this one element read catches NaN, +Inf and all -Inf after a greedy pick; the engines call it
    after a step's clock has stopped, so the check is not in the step's measured time."""
    value = float(logits[token])
    if not math.isfinite(value):
        _refuse(value)
