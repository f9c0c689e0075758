"""`kvviz memory`: what a model's KV cache costs, computed from its config: bytes per token, the
bytes `torch.cat` copies per step and per generation, that copy's time at a memory bandwidth, and
the blocks (and last-block waste) of a paged cache. Stdlib only (no torch, no Qt): the app's
dialog and the command share these functions. The model presets are imported only by the command.

Conventions (docs/memory.md says why):
- length n = tokens held in the cache after a step. The step that appends the n-th token to a
  concat cache copies the n-1 tokens already there (K and V, every layer); the prefill, which
  starts from an empty cache, copies nothing. Over a generation that grows the cache from
  `prompt_tokens` (written by one prefill; 0 = one token at a time from empty) to n, the copies sum
  to (n(n-1) - P(P-1))/2 tokens' K/V.
- copy time = bytes copied / bandwidth, each byte counted once (as the chapter does), with
  1 GB/s = 10^9 bytes/s as memory vendors quote it. A copy reads and writes every byte, so real
  DRAM traffic is twice that: the figure is a lower bound.
- byte sizes print in binary units (1 KiB = 1024 B); JSON holds exact integers.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kvviz.config import DTYPE_BYTES, ModelConfig, canonical_dtype
from kvviz.costs.wall import WallShape

DEFAULT_TOKENS = (100, 500, 1000)
DEFAULT_BANDWIDTH_GBPS = 2000.0  # an A100's HBM: about 2 TB/s, as the chapter takes it
DEFAULT_BLOCK_SIZE = 16  # vLLM's default block, as the chapter names it


@dataclass(frozen=True)
class MemoryPreset:
    name: str
    description: str
    config: ModelConfig


# Published shapes only; every figure is derived from these configs, never typed in.
MEMORY_PRESETS: dict[str, MemoryPreset] = {
    p.name: p
    for p in [
        MemoryPreset("chapter-tiny", "the chapter's tiny model: 2 layers, 4 heads of 32, fp32",
                     ModelConfig(name="chapter-tiny")),
        MemoryPreset("qwen3-0.6b", "Qwen3-0.6B's published config: 28 layers, 16 Q / 8 KV heads, head_dim 128, bf16",
                     ModelConfig(name="qwen3-0.6b", arch="qwen3", vocab_size=151936, d_model=1024, n_layer=28,
                                 n_head=16, n_kv_head=8, head_dim=128, d_ff=3072, max_seq_len=40960,
                                 rope_theta=1e6, norm_eps=1e-6, qk_norm=True, dtype="bfloat16")),
        MemoryPreset("qwen3-0.6b-chapter",
                     "Qwen3-0.6B as the chapter assumed it: head_dim 64 (hidden 1024 / 16 heads); not the real model",
                     ModelConfig(name="qwen3-0.6b-chapter", arch="qwen3", vocab_size=151936, d_model=1024,
                                 n_layer=28, n_head=16, n_kv_head=8, head_dim=64, d_ff=3072, max_seq_len=40960,
                                 rope_theta=1e6, norm_eps=1e-6, qk_norm=True, dtype="bfloat16")),
        MemoryPreset("gpt2-small", "GPT-2 small's published config: 12 layers, 12 heads of 64, every head cached "
                     "(no grouped-query attention), fp32",
                     ModelConfig(name="gpt2-small", arch="gpt2", vocab_size=50257, d_model=768, n_layer=12,
                                 n_head=12, n_kv_head=12, head_dim=64, d_ff=3072, max_seq_len=1024)),
        MemoryPreset("70b-class", "a Llama-3-70B-class model: 80 layers, 64 Q / 8 KV heads, head_dim 128, bf16",
                     ModelConfig(name="70b-class", arch="llama", vocab_size=128256, d_model=8192, n_layer=80,
                                 n_head=64, n_kv_head=8, head_dim=128, d_ff=28672, max_seq_len=8192,
                                 rope_theta=5e5, tie_embeddings=False, dtype="bfloat16")),
    ]
}

QWEN3_NOTE = (
    "the chapter prints 56 KB per token for Qwen3-0.6B because it took head_dim 64 (hidden 1024 / 16 heads); "
    "the published config sets head_dim 128, so a token holds 114,688 B (112 KiB) in bf16 and every figure "
    "in the chapter's copy table doubles")
CHAPTER_NOTE = "this is the chapter's assumed shape (head_dim 64), not Qwen3-0.6B's published one (head_dim 128)"


# -- the formulas ------------------------------------------------------------------------------
def step_copy_tokens(n: int, prompt_tokens: int = 0) -> int:
    """Tokens' K/V that torch.cat copies on the step that brings the cache to length n."""
    _check_length(n, prompt_tokens)
    return 0 if n <= max(prompt_tokens, 1) else n - 1


def total_copy_tokens(n: int, prompt_tokens: int = 0) -> int:
    """Tokens' K/V copied over all steps that bring the cache from `prompt_tokens` (or empty) to n."""
    _check_length(n, prompt_tokens)
    p = min(prompt_tokens, n)
    return (n * (n - 1) - p * (p - 1)) // 2


def copy_ms(nbytes: int, bandwidth_gbps: float) -> float:
    """Milliseconds to move `nbytes` once at `bandwidth_gbps` (1 GB/s = 1e9 B/s)."""
    _check_bandwidth(bandwidth_gbps)
    return nbytes / (bandwidth_gbps * 1e9) * 1e3


def paged_blocks(n: int, block_size: int) -> tuple[int, int]:
    """(blocks a paged cache holds for n tokens, empty slots in its last block)."""
    if block_size < 1:
        raise ValueError(f"block size must be at least 1, got {block_size}")
    _check_length(n, 0)
    blocks = -(-n // block_size)
    return blocks, blocks * block_size - n


def _check_length(n: int, prompt_tokens: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"a length must be a whole number of tokens, at least 1, got {n!r}")
    if isinstance(prompt_tokens, bool) or not isinstance(prompt_tokens, int) or prompt_tokens < 0:
        raise ValueError(f"prompt tokens must be a whole number, at least 0, got {prompt_tokens!r}")


def _check_bandwidth(gbps: float) -> None:
    if not (isinstance(gbps, (int, float)) and math.isfinite(gbps) and gbps > 0):
        raise ValueError(f"bandwidth must be a positive number of GB/s, got {gbps!r}")


# -- a report for one config -------------------------------------------------------------------
@dataclass(frozen=True)
class LengthFigures:
    """Figures at one cache length n (bytes are exact; ms at the report's bandwidth)."""

    tokens: int
    cache_bytes: int  # K/V resident at length n, all layers
    step_copy_bytes: int  # copied by torch.cat on the step that reaches n
    step_copy_ms: float
    total_copy_bytes: int  # summed over the generation up to n
    copy_ms: float  # time of total_copy_bytes
    blocks: int  # paged cache: blocks held at length n
    wasted_slots: int  # empty token slots in the last block
    wasted_bytes: int
    paged_bytes: int  # blocks * block_size tokens' K/V


@dataclass(frozen=True)
class MemoryReport:
    model: str
    config: ModelConfig
    dtype: str
    bytes_per_token_per_layer: int
    bytes_per_token: int
    bandwidth_gbps: float
    block_size: int
    prompt_tokens: int
    lengths: tuple[LengthFigures, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    decode_weights_bytes: int = 0  # weights a decode step reads (kvviz.costs.wall): every matrix once, one row
    crossover_tokens: int = 0  # the attended length from which a decode step reads more K/V than weights

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "kvviz-memory", "version": 1,
            "model": self.model, "config": self.config.to_dict(),
            "dtype": self.dtype, "dtype_bytes": self.dtype_bytes,
            "bytes_per_token_per_layer": self.bytes_per_token_per_layer,
            "bytes_per_token": self.bytes_per_token,
            "bandwidth_gbps": self.bandwidth_gbps, "bandwidth_bytes_per_s": self.bandwidth_gbps * 1e9,
            "block_size": self.block_size, "prompt_tokens": self.prompt_tokens,
            "lengths": [asdict(f) for f in self.lengths],
            "decode_weights_bytes": self.decode_weights_bytes, "crossover_tokens": self.crossover_tokens,
            "notes": list(self.notes),
        }


def compute(cfg: ModelConfig, tokens: Iterable[int] = DEFAULT_TOKENS, *, dtype: str | None = None,
            bandwidth_gbps: float = DEFAULT_BANDWIDTH_GBPS, block_size: int = DEFAULT_BLOCK_SIZE,
            prompt_tokens: int = 0) -> MemoryReport:
    """Every figure for `cfg` at each length in `tokens`; ValueError names the first bad input."""
    dtype = canonical_dtype(dtype) if dtype else cfg.dtype
    _check_bandwidth(bandwidth_gbps)
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block size must be a whole number of tokens, at least 1, got {block_size!r}")
    tokens = list(tokens)
    if not tokens:
        raise ValueError("no lengths given")
    for n in tokens:
        _check_length(n, prompt_tokens)
    per_layer = cfg.kv_bytes_per_token_per_layer(dtype)
    bpt = cfg.kv_bytes_per_token(dtype)
    rows = []
    for n in tokens:
        step = step_copy_tokens(n, prompt_tokens) * bpt
        total = total_copy_tokens(n, prompt_tokens) * bpt
        blocks, wasted = paged_blocks(n, block_size)
        rows.append(LengthFigures(
            tokens=n, cache_bytes=n * bpt, step_copy_bytes=step, step_copy_ms=copy_ms(step, bandwidth_gbps),
            total_copy_bytes=total, copy_ms=copy_ms(total, bandwidth_gbps), blocks=blocks,
            wasted_slots=wasted, wasted_bytes=wasted * bpt, paged_bytes=blocks * block_size * bpt))
    wall = WallShape.from_config(cfg, dtype)
    return MemoryReport(model=cfg.name, config=cfg, dtype=dtype, bytes_per_token_per_layer=per_layer,
                        bytes_per_token=bpt, bandwidth_gbps=float(bandwidth_gbps), block_size=block_size,
                        prompt_tokens=prompt_tokens, lengths=tuple(rows), notes=tuple(notes_for(cfg, tokens)),
                        decode_weights_bytes=wall.decode(1).weights_bytes, crossover_tokens=wall.crossover())


def is_qwen3_06b(cfg: ModelConfig) -> bool:
    """The published Qwen3-0.6B shape (a preset, a Hugging Face folder, or kvviz's random copy)."""
    return (cfg.d_model, cfg.n_layer, cfg.n_head, cfg.n_kv_head, cfg.head_dim) == (1024, 28, 16, 8, 128)


def is_chapter_qwen3(cfg: ModelConfig) -> bool:
    return (cfg.d_model, cfg.n_layer, cfg.n_head, cfg.n_kv_head, cfg.head_dim) == (1024, 28, 16, 8, 64)


def notes_for(cfg: ModelConfig, tokens: Sequence[int] = ()) -> list[str]:
    notes = []
    if is_qwen3_06b(cfg):
        notes.append(QWEN3_NOTE)
    if is_chapter_qwen3(cfg):
        notes.append(CHAPTER_NOTE)
    longest = max(tokens, default=0)
    if longest > cfg.max_seq_len:
        notes.append(f"{longest} tokens is beyond the model's context window ({cfg.max_seq_len})")
    return notes


# -- the chapter's convention ------------------------------------------------------------------
# The chapter's table ("第 n 步的单次复制量 / 生成全程累计复制量") takes the step copy at length n as
# n tokens and the total as n^2/2 tokens (1 + 2 + ... + n, rounded), prints 1 KB = 1024 B but then
# 1 MB = 1000 KB and 1 GB = 1000 MB, and divides its GB by the bandwidth's TB/s. These functions
# reproduce its printed figures exactly from a config, to show the formula is the same one.
def chapter_step_bytes(bytes_per_token: int, n: int) -> int:
    return n * bytes_per_token


def chapter_total_bytes(bytes_per_token: int, n: int) -> int:
    return n * n * bytes_per_token // 2


def chapter_kb(nbytes: int) -> float:
    return nbytes / 1024


def chapter_mb(nbytes: int) -> float:
    return nbytes / 1024 / 1000


def fmt_chapter_step(nbytes: int) -> str:
    return f"{chapter_mb(nbytes):.1f} MB"


def fmt_chapter_total(nbytes: int) -> str:
    mb = chapter_mb(nbytes)
    text = f"{mb:,.0f} MB"
    return text + (f" ({mb / 1000:g}GB)" if mb >= 1000 else "")


def chapter_copy_ms(nbytes: int, bandwidth_gbps: float) -> float:
    """The chapter's arithmetic: its GB (1000 * 1000 * 1024 B) over the bandwidth in GB/s."""
    _check_bandwidth(bandwidth_gbps)
    return chapter_mb(nbytes) / 1000 / bandwidth_gbps * 1e3


def chapter_table(cfg: ModelConfig, tokens: Sequence[int], *, dtype: str | None = None,
                  bandwidth_gbps: float = DEFAULT_BANDWIDTH_GBPS) -> list[str]:
    bpt = cfg.kv_bytes_per_token(dtype)
    lines = [f"{cfg.name} (head_dim {cfg.head_dim}): {chapter_kb(bpt):g} KB per token "
             f"({chapter_kb(cfg.kv_bytes_per_token_per_layer(dtype)):g} KB per layer)"]
    for n in tokens:
        total = chapter_total_bytes(bpt, n)
        lines.append(f"  {n:>5} token  {fmt_chapter_step(chapter_step_bytes(bpt, n)):>9}  "
                     f"{fmt_chapter_total(total):>18}  {chapter_copy_ms(total, bandwidth_gbps):>8.3g} ms")
    return lines


def chapter_comparison(cfg: ModelConfig, tokens: Sequence[int], *, dtype: str | None = None,
                       bandwidth_gbps: float = DEFAULT_BANDWIDTH_GBPS) -> list[str]:
    """The chapter's table recomputed in its convention; for Qwen3-0.6B, as printed and as corrected."""
    lines = ["the chapter's convention: step copy = n x per-token, total = n^2/2 x per-token; "
             "KB = 1024 B, MB = 1000 KB, GB = 1000 MB; time = its GB / bandwidth"]
    if is_qwen3_06b(cfg):
        lines.append("as the chapter printed it (head_dim 64):")
        lines += chapter_table(cfg.replace(name="chapter", head_dim=64), tokens, dtype=dtype,
                               bandwidth_gbps=bandwidth_gbps)
        lines.append("with the published head_dim 128:")
    lines += chapter_table(cfg, tokens, dtype=dtype, bandwidth_gbps=bandwidth_gbps)
    lines.append("kvviz's exact figures above count n-1 tokens on the step that reaches n and n(n-1)/2 "
                 "over the generation (the prefill copies nothing)")
    return lines


# -- the roofline of a decode step ------------------------------------------------------------
DEFAULT_BATCH = 8


@dataclass(frozen=True)
class RooflinePoint:
    """One decode step of `batch` sequences, each attending over `kv_len` positions: what it must read,
    what it computes, and the tokens/s a read ceiling allows it."""

    kv_len: int
    batch: int
    bytes_per_step: int  # the weights once, plus each sequence's embedding row(s) and K/V (kvviz.costs.wall)
    flops_per_step: int  # 2 per weight read (a multiply-add), per sequence; attention 4 x H x D x kv_len per layer
    intensity: float  # FLOP per byte read: the roofline's x axis
    tokens_per_s: float  # batch x steps per second at the ceiling (every sequence's new token counted)
    step_ms: float  # the step's time at the ceiling


@dataclass(frozen=True)
class Roofline:
    model: str
    dtype: str
    ceiling_gbps: float
    ceiling: str  # what the ceiling is: "read ceiling, cpu, 1 thread", "given bandwidth"
    batch: int
    points: tuple[tuple[RooflinePoint, RooflinePoint], ...]  # (batch 1, batch B) at each length

    def to_dict(self) -> dict[str, Any]:
        return dict(model=self.model, dtype=self.dtype, ceiling_gbps=self.ceiling_gbps, ceiling=self.ceiling,
                    batch=self.batch, points=[[asdict(p) for p in pair] for pair in self.points])


def decode_point(cfg: ModelConfig, kv_len: int, batch: int, ceiling_gbps: float, *,
                 dtype: str | None = None) -> RooflinePoint:
    """The roofline of one decode step that brings each of `batch` sequences to `kv_len` positions.

    Bytes: the weights once (kvviz.costs.wall: every matrix, norm and bias; one embedding row per sequence) and
    each sequence's K/V. FLOPs: a multiply-add per weight element per sequence (norms and biases counted
    alike; they are under 0.1% of a model), and attention's q.k and weights.v, 2 x 2 x n_head x head_dim
    x kv_len per layer per sequence. Tokens/s = batch / (bytes / ceiling): a step that reads at the ceiling."""
    _check_length(kv_len, 0)
    _check_bandwidth(ceiling_gbps)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a whole number of sequences, at least 1, got {batch!r}")
    from kvviz.costs.wall import weight_elements

    shape = WallShape.from_config(cfg, dtype)
    read = shape.decode(kv_len)
    nbytes = shape.weights_bytes + batch * (read.weights_bytes - shape.weights_bytes + read.kv_bytes)
    whole, _per_token = weight_elements(cfg)
    flops = batch * (2 * whole + 4 * cfg.n_layer * cfg.n_head * cfg.head_dim * kv_len)
    seconds = nbytes / (ceiling_gbps * 1e9)
    return RooflinePoint(kv_len=kv_len, batch=batch, bytes_per_step=nbytes, flops_per_step=flops,
                         intensity=flops / nbytes, tokens_per_s=batch / seconds, step_ms=seconds * 1e3)


def roofline(cfg: ModelConfig, tokens: Iterable[int] = DEFAULT_TOKENS, *, ceiling_gbps: float,
             ceiling: str = "given bandwidth", batch: int = DEFAULT_BATCH, dtype: str | None = None) -> Roofline:
    """Batch 1 beside batch `batch` at each attended length in `tokens`, against one read ceiling."""
    dtype = canonical_dtype(dtype) if dtype else cfg.dtype
    points = tuple((decode_point(cfg, n, 1, ceiling_gbps, dtype=dtype),
                    decode_point(cfg, n, batch, ceiling_gbps, dtype=dtype)) for n in tokens)
    if not points:
        raise ValueError("no lengths given")
    return Roofline(model=cfg.name, dtype=dtype, ceiling_gbps=float(ceiling_gbps), ceiling=ceiling, batch=batch,
                    points=points)


@dataclass(frozen=True)
class MeasuredDecode:
    """A run's decode steps against the ceiling: what they read and took, and what the ceiling allowed."""

    label: str  # the engine, and the run's length
    steps: int
    bytes_read: int  # the minimum its decode steps had to read (kvviz.costs.wall)
    ms: float  # summed decode step time
    tokens_per_s: float  # measured: decode steps per second of their own time
    allowed_tokens_per_s: float  # the same steps, each reading its bytes at the ceiling

    @property
    def share(self) -> float:
        return self.tokens_per_s / self.allowed_tokens_per_s


def measured_decode(label: str, shape: WallShape, steps: Iterable[tuple[int, float]],
                    ceiling_gbps: float) -> MeasuredDecode | None:
    """`steps`: (pos_stop, latency_ms) of each decode step (a StepTrace's fields; the prefill left out).
    None for no step or no time."""
    _check_bandwidth(ceiling_gbps)
    n = nbytes = 0
    ms = 0.0
    for pos_stop, latency_ms in steps:
        n += 1
        nbytes += shape.decode(pos_stop).total_bytes
        ms += latency_ms
    if n == 0 or not ms > 0:
        return None
    return MeasuredDecode(label=label, steps=n, bytes_read=nbytes, ms=ms, tokens_per_s=n / (ms * 1e-3),
                          allowed_tokens_per_s=n / (nbytes / (ceiling_gbps * 1e9)))


def measured_from_bench(doc: dict) -> tuple[list[MeasuredDecode], float, str]:
    """The decode steps of every result in a `kvviz bench --json` file, against the read ceiling that run
    recorded (or, for a file written before it, the copy figure): (figures, that ceiling in GB/s, which)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list) or not isinstance(doc.get("model"), dict):
        raise ValueError("not a `kvviz bench --json` file (no results and model)")
    wall = doc.get("wall") if isinstance(doc.get("wall"), dict) else {}
    kind = "read ceiling" if wall.get("read_gbps") else "copy bandwidth (a file from before the read ceiling)"
    # the fastest probe burst of the run (the start's and those beside each timed run), what the bench's
    # shares are against; a file from before the bursts: the start's probe
    gbps = wall.get("read_fastest_gbps") or wall.get("read_gbps") or wall.get("copy_gbps")
    _check_bandwidth(gbps)
    cfg = ModelConfig.from_dict(doc["model"])
    shape = WallShape.from_config(cfg, doc.get("dtype") or None)
    prompt = doc.get("prompt_tokens")
    if isinstance(prompt, bool) or not isinstance(prompt, int) or prompt < 1:
        raise ValueError("the bench file holds no prompt length")
    # `--kernel openblas` / `--kernel native`: that row's kernel has its own ceiling
    out = []
    for r in doc["results"]:
        step_ms = r.get("step_ms") or []
        # the row's name says its kernel in a kernel comparison ("static · C step"); every row is against the
        # machine's read ceiling, whatever kernel ran it
        label = f"{r.get('row') or r.get('engine')} ({r.get('new_tokens')} tokens)"
        # step k >= 1 computes position prompt + k - 1: it attends over prompt + k positions
        m = measured_decode(label, shape, ((prompt + k, float(ms)) for k, ms in enumerate(step_ms) if k > 0), gbps)
        if m is not None:
            out.append(m)
    return out, float(gbps), kind


# -- resolving a model -------------------------------------------------------------------------
def resolve_config(name_or_path: str) -> ModelConfig:
    """A calculator preset, a model preset, a kvviz model folder, a Hugging Face folder or a cached hub id."""
    if name_or_path in MEMORY_PRESETS:
        return MEMORY_PRESETS[name_or_path].config
    from kvviz.models.hub import looks_like_hub_id, resolve_hub_id

    path = resolve_hub_id(name_or_path) if looks_like_hub_id(name_or_path) else Path(name_or_path)
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            raise ValueError(f"{path}: no config.json in this folder")
        if ModelConfig.is_own_file(config):
            return ModelConfig.load_json(config)
        from kvviz.models.hf import read_hf_config  # imports torch: only for a Hugging Face folder

        return read_hf_config(path)
    if path.exists():
        raise ValueError(f"{path}: a model is a folder holding config.json, not a file")
    from kvviz.models.presets import PRESETS, preset_config  # imports torch: only when needed

    if name_or_path in PRESETS:
        return preset_config(name_or_path)
    raise ValueError(f"unknown model {name_or_path!r}; presets: {', '.join([*MEMORY_PRESETS, *PRESETS])} "
                     "(or a model folder)")


# -- the command -------------------------------------------------------------------------------
