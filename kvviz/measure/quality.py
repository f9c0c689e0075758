"""Quality beside cost: how far an engine's next-token distribution is from the exact cache's.

Measured teacher-forced: the engine is fed the exact engine's tokens (not its own), so at step k both
see the same context and the figures stay comparable after the free-running outputs part. Per step:
KL(exact || engine) in nats and whether the top-1 tokens agree. The step where the engine's own
free-running output first differs is `kvviz.records.trace.first_divergence`. No Qt; torch only through the
engines.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kvviz import catalog
from kvviz.config import TraceOptions
from kvviz.records.trace import StepTrace, first_divergence

# EXACT_ENGINES: the catalog's exact engines, read at each use.
__getattr__ = catalog.live_names(__name__, EXACT_ENGINES=catalog.exact_keys)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    x = np.asarray(logits, dtype=np.float64)
    x = x - x.max()
    return x - np.log(np.exp(x).sum())


def kl_divergence(p_logits: np.ndarray, q_logits: np.ndarray) -> float:
    """KL(P || Q) in nats of the softmax distributions of two logit vectors (float64, never negative)."""
    lp, lq = log_softmax(p_logits), log_softmax(q_logits)
    return max(0.0, float((np.exp(lp) * (lp - lq)).sum()))


@dataclass(frozen=True)
class Quality:
    """One engine's quality over a run, against the exact engine's."""

    engine: str
    kl: tuple[float, ...]  # per step, nats
    top1: tuple[bool, ...]  # per step: same argmax as the exact engine
    first_divergence: int | None  # first step its own (free-running) token differs; None: never

    @property
    def mean_kl(self) -> float:
        return float(np.mean(self.kl)) if self.kl else float("nan")

    @property
    def top1_agreement(self) -> float:
        return float(np.mean(self.top1)) if self.top1 else float("nan")


def teacher_forced(engine, prompt_ids: Sequence[int], exact: Sequence[StepTrace]) -> Quality:
    """Run `engine` fed the exact run's tokens; compare its logits with the exact run's (which must
    carry logits: TraceOptions(logits=True)). The free-running divergence is left to `measure`."""
    if not exact or exact[0].logits is None:
        raise ValueError("the exact run must carry logits")
    tokens = [t.token_id for t in exact]
    kl, top1 = [], []
    for mine, ref in zip(engine.generate(prompt_ids, len(tokens), trace=TraceOptions(masks=False, logits=True),
                                         forced_tokens=tokens), exact):
        kl.append(kl_divergence(ref.logits, mine.logits))
        top1.append(bool(np.argmax(ref.logits) == np.argmax(mine.logits)))
    return Quality(engine=engine.key, kl=tuple(kl), top1=tuple(top1), first_divergence=None)


def on_text(exact, engines: Sequence, prompt_ids: Sequence[int], text_ids: Sequence[int]) -> dict[str, Quality]:
    """Each engine's quality on a given text instead of the exact engine's own output: the exact engine and every
    one of `engines` are fed `text_ids` after `prompt_ids`, so at each step all predict the text's next token
    from the same context (held-out text measures a cache where the model is not simply repeating itself)."""
    if not text_ids:
        raise ValueError("the text to measure on is empty")
    ref = list(exact.generate(prompt_ids, len(text_ids), trace=TraceOptions(masks=False, logits=True),
                              forced_tokens=list(text_ids)))
    return {e.key: teacher_forced(e, prompt_ids, ref) for e in engines}


def measure(engine, prompt_ids: Sequence[int], exact: Sequence[StepTrace], own: Sequence[StepTrace]) -> Quality:
    """Teacher-forced figures plus the first step where `own` (the engine's free-running run) differs."""
    q = teacher_forced(engine, prompt_ids, exact)
    div = first_divergence([[t.token_id for t in exact], [t.token_id for t in own]])
    return dataclasses.replace(q, first_divergence=div)


def annotate(traces: Sequence[StepTrace], quality: Quality) -> list[StepTrace]:
    """The engine's traces with each step's KL and top-1 agreement filled in."""
    return [dataclasses.replace(t, kl_to_exact=k, top1_agrees=a) for t, k, a in zip(traces, quality.kl, quality.top1)]


def reference_key(engines: Sequence[str]) -> str | None:
    """The run's reference for quality: its first exact engine, when it also runs an approximate one."""
    if not catalog.any_approximate(engines):
        return None
    return next((e for e in engines if catalog.is_exact(e)), None)


class Shadows:
    """Quality measured in lockstep with a run: one teacher-forced copy ("shadow") of each approximate
    engine, fed the reference engine's token of each round after it. `annotate(round)` fills the
    approximate engines' kl_to_exact and top1_agrees. The reference must run with logits; they are
    dropped from its traces unless the run asked for them. The shadows' time is not in any trace."""

    def __init__(self, engines: dict, prompt_ids: Sequence[int], n: int, reference: str, keep_logits: bool) -> None:
        self.reference, self.keep_logits = reference, keep_logits
        self.tokens: list[int] = []  # the reference's tokens so far: what the shadows are fed
        opts = TraceOptions(masks=False, logits=True)
        self.streams = {k: e.generate(prompt_ids, n, trace=opts, forced_tokens=self.tokens)
                        for k, e in engines.items()}

    def annotate(self, traces: Sequence[StepTrace]) -> list[StepTrace]:
        ref = next(t for t in traces if t.engine == self.reference)
        self.tokens.append(ref.token_id)
        out = []
        for t in traces:
            if t.engine in self.streams:
                mine = next(self.streams[t.engine])
                t = dataclasses.replace(t, kl_to_exact=kl_divergence(ref.logits, mine.logits),
                                        top1_agrees=bool(np.argmax(ref.logits) == np.argmax(mine.logits)))
            elif t is ref and not self.keep_logits:
                t = dataclasses.replace(t, logits=None)
            out.append(t)
        return out

    def close(self) -> None:
        for stream in self.streams.values():
            stream.close()
