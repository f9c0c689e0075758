"""The memory wall: the bytes one engine step must read, derived from the model's config.

A decode step passes one token through every layer, so it reads every weight matrix once (the
embedding table excepted: only the token's row) and the K and V of every position it attends over.
Those bytes over the step's time are the bandwidth it achieved. Stdlib only: no torch, no Qt.

Conventions: the minimum a step must read, each byte once, at the run's dtype. Copies a cache rule
adds (concat's `torch.cat`, paged's gather) are extra traffic on top, counted in the trace itself. A
cache that keeps fewer or smaller K/V (a window, int8) reads what it keeps: see WallShape.read.
"""
from __future__ import annotations

from dataclasses import dataclass

from kvviz.config import DTYPE_BYTES, ModelConfig, canonical_dtype


def _elem_bytes(cfg: ModelConfig, dtype: str | None) -> int:
    return DTYPE_BYTES[canonical_dtype(dtype)] if dtype else cfg.dtype_bytes


def weight_elements(cfg: ModelConfig) -> tuple[int, int]:
    """(elements read whole by every step, elements of the embedding rows one token looks up).

    Read whole: every layer's matrices, norms and biases, the final norm and the output head (the
    embedding table itself when the head is tied to it). Looked up per token: one row of the token
    table, and for GPT-2 one row of the position table too."""
    d = cfg.d_model
    per_token = 2 * d if cfg.arch == "gpt2" else d
    tables = (cfg.vocab_size + cfg.max_seq_len) * d if cfg.arch == "gpt2" else cfg.vocab_size * d
    # param_count holds the lookup tables once and an untied head; a tied head reads the token table
    whole = cfg.param_count() - tables + (cfg.vocab_size * d if cfg.tie_embeddings else 0)
    return whole, per_token


@dataclass(frozen=True)
class WallShape:
    """The three figures a step's bytes are built from (what RunInfo and a saved trace carry)."""

    weights_bytes: int  # read whole by every forward, whatever its length
    row_bytes: int  # embedding rows looked up per computed position
    kv_bytes_per_token: int  # K and V of one position, all layers

    @classmethod
    def from_config(cls, cfg: ModelConfig, dtype: str | None = None) -> WallShape:
        elem = _elem_bytes(cfg, dtype)
        whole, per_token = weight_elements(cfg)
        return cls(weights_bytes=whole * elem, row_bytes=per_token * elem,
                   kv_bytes_per_token=cfg.kv_bytes_per_token(dtype))

    @property
    def known(self) -> bool:
        """False for a trace written before these figures were recorded (all zero)."""
        return self.weights_bytes > 0 and self.kv_bytes_per_token > 0

    def step(self, pos_start: int, pos_stop: int) -> StepRead:
        """What a forward computing positions [pos_start, pos_stop) must read: the weights once, the
        computed positions' embedding rows, and the K/V of every position up to pos_stop (the last
        query attends over all of them)."""
        if pos_stop < 1 or not 0 <= pos_start < pos_stop:
            raise ValueError(f"a step computes positions [start, stop) with 0 <= start < stop, "
                             f"got [{pos_start}, {pos_stop})")
        return StepRead(weights_bytes=self.weights_bytes + (pos_stop - pos_start) * self.row_bytes,
                        kv_bytes=pos_stop * self.kv_bytes_per_token)

    def read(self, trace) -> StepRead:
        """What a recorded step read (a StepTrace or anything with its fields): the weights as step()
        counts them, and the K/V its cache held after the step at the cache's own bytes per token
        (cache_bytes / cache_capacity: an int8 cache stores fewer, a window cache holds only its W
        tokens). An engine that keeps no cache (naive) read the K/V of every position it computed. A
        speculative round's later steps ran no forward (their token came with the round's first): nothing."""
        if (getattr(trace, "spec_index", None) or 0) > 0:
            return StepRead(weights_bytes=0, kv_bytes=0)
        weights = self.step(trace.pos_start, trace.pos_stop).weights_bytes
        if trace.cache_len > 0 and trace.cache_capacity > 0:
            kv = trace.cache_bytes * trace.cache_len // trace.cache_capacity
        else:
            kv = trace.pos_stop * self.kv_bytes_per_token
        return StepRead(weights_bytes=weights, kv_bytes=kv)

    def decode(self, kv_len: int) -> StepRead:
        """A cached decode step that brings the attended length to kv_len (one new position)."""
        return self.step(kv_len - 1, kv_len)

    def crossover(self) -> int:
        """The attended length from which a decode step reads more K/V than weights: the length at
        which the cache, not the model, dominates the step's memory traffic."""
        if not self.known:
            raise ValueError("no weight or K/V figures to compare")
        need = self.weights_bytes + self.row_bytes  # a decode step computes one position
        return max(1, -(-need // self.kv_bytes_per_token))


@dataclass(frozen=True)
class StepRead:
    weights_bytes: int
    kv_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes

    def gbps(self, latency_ms: float) -> float:
        """Achieved bandwidth in GB/s (10^9 B/s): the bytes read over the step's time."""
        return achieved_gbps(self.total_bytes, latency_ms)


def crossover_length(cfg: ModelConfig, dtype: str | None = None) -> int:
    return WallShape.from_config(cfg, dtype).crossover()


def bytes_read(shape: WallShape, traces) -> int:
    """The bytes a run's recorded steps read, summed (WallShape.read of each)."""
    return sum(shape.read(t).total_bytes for t in traces)


def achieved_gbps(nbytes: int, ms: float) -> float:
    """nbytes over ms, in GB/s (10^9 B/s); NaN for no time."""
    return nbytes / (ms * 1e-3) / 1e9 if ms > 0 else float("nan")
