"""Decode throughput against batch size: B equal requests decoding together, one batched forward a step.

At batch 1 a decode step reads every weight for one token; at batch B for B tokens, so while a step is
bound by memory traffic its time barely grows with B and throughput rises almost B-fold. The figures
come from the serving records (decode-only steps), so they are what `kvviz serve` measures.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from kvviz.serving.engine import serve
from kvviz.serving.record import SchedulerSettings
from kvviz.serving.workload import Request, Workload

SWEEP_PROMPT = 32  # tokens of each request's prompt
SWEEP_NEW = 33  # new tokens: one from the prefill, 32 decode steps


@dataclass(frozen=True)
class SweepRow:
    batch: int
    step_ms: float  # median decode step
    tokens_per_s: float
    bytes_per_step: int  # weights once + every request's K/V (median step)
    bytes_per_token: float
    gbps: float  # bytes_per_step over step_ms

    def speedup(self, base: SweepRow) -> float:
        return self.tokens_per_s / base.tokens_per_s


def decode_workload(batch: int, vocab: int) -> Workload:
    """`batch` requests of SWEEP_PROMPT ids (different per request) and SWEEP_NEW new tokens, all at step 0."""
    return Workload(f"decode x{batch}", tuple(
        Request(prompt="", prompt_ids=tuple((7 * i + 3 * j + 1) % vocab for j in range(SWEEP_PROMPT)),
                new_tokens=SWEEP_NEW) for i in range(batch)))


def decode_sweep(model, tokenizer, batches: tuple[int, ...], block_size: int = 16, repeat: int = 3) -> list[SweepRow]:
    """Median decode step of each batch size, the sizes taking turns `repeat` times (drift hits all alike)."""
    step_ms: dict[int, list[float]] = {b: [] for b in batches}
    read: dict[int, list[int]] = {b: [] for b in batches}
    serve(model, tokenizer, decode_workload(1, model.cfg.vocab_size), "continuous",
          SchedulerSettings(max_batch=1, blocks=8, block_size=block_size))  # warm-up
    for _ in range(repeat):
        for b in batches:
            wl = decode_workload(b, model.cfg.vocab_size)
            need = -(-(SWEEP_PROMPT + SWEEP_NEW) // block_size)
            run = serve(model, tokenizer, wl, "continuous", SchedulerSettings(max_batch=b, blocks=b * need,
                                                                             block_size=block_size))
            for s in run.steps:
                if len(s.work) == b and all(w.kind == "decode" for w in s.work):
                    step_ms[b].append(s.latency_ms)
                    read[b].append(s.bytes_read)
    rows = []
    for b in batches:
        ms, nbytes = statistics.median(step_ms[b]), int(statistics.median(read[b]))
        rows.append(SweepRow(batch=b, step_ms=ms, tokens_per_s=b / (ms / 1000.0), bytes_per_step=nbytes,
                             bytes_per_token=nbytes / b, gbps=nbytes / (ms * 1e-3) / 1e9))
    return rows
