"""Frozen configuration records: the model's shape, a run's settings, sampling.

Pure stdlib: no torch, no Qt. Every byte figure kvviz shows about a model's cache is derived here
from the config, never typed in.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvviz import catalog

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
DTYPE_ALIASES = {
    "fp32": "float32", "float32": "float32", "f32": "float32",
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "fp16": "float16", "float16": "float16", "half": "float16", "f16": "float16",
}


def canonical_dtype(name: str) -> str:
    """`bf16` -> `bfloat16`; raises ValueError naming the choices for anything else."""
    key = str(name).strip().lower()
    if key not in DTYPE_ALIASES:
        raise ValueError(f"unknown dtype {name!r}; choose fp32, bf16 or fp16")
    return DTYPE_ALIASES[key]


ARCHS = ("kvviz", "llama", "qwen2", "qwen3", "gpt2")
# The largest value each shape field may take: past every published model, and small enough that the
# figures derived from them stay finite (a config is read before any weight is).
SHAPE_LIMITS = {"vocab_size": 1 << 24, "d_model": 1 << 20, "n_layer": 4096, "n_head": 4096, "n_kv_head": 4096,
                "head_dim": 4096, "d_ff": 1 << 20, "max_seq_len": 1 << 24}


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a decoder-only transformer: the Llama family (the shipped tiny model is one too), or
    GPT-2 (arch "gpt2": LayerNorm, learned positions, a GELU MLP, biases; d_ff is its n_inner)."""

    name: str = "tiny"
    arch: str = "kvviz"  # kvviz | llama | qwen2 | qwen3 | gpt2
    vocab_size: int = 256
    d_model: int = 128
    n_layer: int = 2
    n_head: int = 4
    n_kv_head: int = 4
    head_dim: int = 32
    d_ff: int = 512
    max_seq_len: int = 2048
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = None
    norm_eps: float = 1e-5
    qk_norm: bool = False
    qkv_bias: bool = False
    tie_embeddings: bool = True
    dtype: str = "float32"
    tokenizer: str = "bytes"  # bytes | tokenizer.json

    def __post_init__(self) -> None:
        for key, top in SHAPE_LIMITS.items():
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"model config: {key} must be a positive integer, got {str(value)[:40]!r}")
            if value > top:
                raise ValueError(f"model config: {key} is {value:,}, more than any real model's ({top:,})")
        for key, kind in (("name", str), ("arch", str), ("dtype", str), ("tokenizer", str), ("qk_norm", bool),
                          ("qkv_bias", bool), ("tie_embeddings", bool)):
            if not isinstance(getattr(self, key), kind):
                raise ValueError(f"model config: {key} must be a {kind.__name__}, got {getattr(self, key)!r}")
        if self.arch not in ARCHS:
            raise ValueError(f"model config: arch {self.arch!r} is not one of {', '.join(ARCHS)}")
        for key, low, high in (("rope_theta", 1e-6, 1e12), ("norm_eps", 0.0, 1.0)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
                raise ValueError(f"model config: {key} must be a number in {low:g}..{high:g}, got {value!r}")
        if self.rope_scaling is not None and not isinstance(self.rope_scaling, dict):
            raise ValueError(f"model config: rope_scaling must be an object or null, got {self.rope_scaling!r}")
        if self.n_head % self.n_kv_head:
            raise ValueError(
                f"model config: n_head ({self.n_head}) must be a multiple of n_kv_head ({self.n_kv_head})")
        if self.arch == "gpt2" and (self.n_kv_head != self.n_head or self.n_head * self.head_dim != self.d_model):
            raise ValueError(f"model config: gpt2 needs n_kv_head == n_head and n_head * head_dim == d_model, got "
                             f"{self.n_kv_head}, {self.n_head} x {self.head_dim} for {self.d_model}")
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))

    # -- figures derived from the shape ------------------------------------------------------
    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def kv_bytes_per_token_per_layer(self, dtype: str | None = None) -> int:
        """K and V of one token in one layer: 2 * n_kv_head * head_dim * bytes_per_elem."""
        elem = DTYPE_BYTES[canonical_dtype(dtype)] if dtype else self.dtype_bytes
        return 2 * self.n_kv_head * self.head_dim * elem

    def kv_bytes_per_token(self, dtype: str | None = None) -> int:
        return self.n_layer * self.kv_bytes_per_token_per_layer(dtype)

    def param_count(self) -> int:
        """Parameters implied by the shape (counted again from the tensors in the tests)."""
        d, h, kv, hd, f = self.d_model, self.n_head, self.n_kv_head, self.head_dim, self.d_ff
        head = 0 if self.tie_embeddings else self.vocab_size * d
        if self.arch == "gpt2":  # biases everywhere, two-matrix MLP, LayerNorm weight + bias
            per_layer = (3 * d * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d) + 4 * d
            return self.n_layer * per_layer + (self.vocab_size + self.max_seq_len) * d + 2 * d + head
        attn = d * (h * hd) + 2 * d * (kv * hd) + (h * hd) * d
        if self.qkv_bias:
            attn += h * hd + 2 * kv * hd
        if self.qk_norm:
            attn += 2 * hd
        mlp = 3 * d * f
        per_layer = attn + mlp + 2 * d
        emb = self.vocab_size * d
        return self.n_layer * per_layer + emb + head + d

    def replace(self, **changes: Any) -> ModelConfig:
        return dataclasses.replace(self, **changes)

    # -- JSON ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"model config: unknown field(s) {', '.join(unknown)}")
        return cls(**data)

    def save_json(self, path: str | Path) -> None:
        from kvviz.fileio import atomic_write_text

        atomic_write_text(Path(path), json.dumps(self.to_dict(), indent=2) + "\n")

    @staticmethod
    def is_own_schema(data: Any) -> bool:
        """True for a config.json kvviz wrote: it names d_model; a Hugging Face one names a model_type
        (GPT-2's has n_layer too, so that key cannot tell them apart)."""
        return isinstance(data, dict) and "d_model" in data and "model_type" not in data

    @staticmethod
    def is_own_file(path: Path) -> bool:
        """Whether a folder's config.json is kvviz's own (read through kvviz.fileio: regular, at most 1 MiB);
        one neither schema reads (too deep, too large, not JSON) is refused by the reader that follows."""
        from kvviz.fileio import read_json

        try:
            return ModelConfig.is_own_schema(read_json(path, max_depth=3, max_bytes=1 << 20))
        except ValueError:
            return False

    @classmethod
    def load_json(cls, path: str | Path) -> ModelConfig:
        from kvviz.fileio import read_json

        path = Path(path)
        if not path.exists():
            raise ValueError(f"{path}: config file not found")
        data = read_json(path, max_depth=3, max_bytes=1 << 20)  # {"rope_scaling": {...}}: 2 levels
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a JSON object")
        try:
            return cls.from_dict(data)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: {exc}") from None


@dataclass(frozen=True)
class SamplingConfig:
    """How the next token is chosen. temperature 0 means greedy."""

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        from kvviz.options import check_value  # the one table of bounds, shared with every command

        check_value("temperature", self.temperature, "temperature")
        if self.top_k is not None:
            check_value("top_k", self.top_k, "top-k")
        if self.top_p is not None:
            check_value("top_p", self.top_p, "top-p")
        check_value("seed", self.seed, "seed")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class TraceOptions:
    """What an engine copies into each StepTrace beyond the scalars."""

    masks: bool = True
    weights_layer: int | None = None  # attention weights of this layer ...
    weights_head: int = 0  # ... and this head; None layer = no weights
    logits: bool = False  # copy the sampled position's logits (tests compare engines with them)


@dataclass(frozen=True)
class RunConfig:
    """One generation request: prompt, length, engines, sampling, tracing."""

    prompt: str
    max_new_tokens: int = 40
    engines: tuple[str, ...] = catalog.DEFAULT_ENGINES
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    trace: TraceOptions = field(default_factory=TraceOptions)
    block_size: int = 16
    window: int = 32  # W of the window and sinks caches (kvviz.options.WINDOW_DEFAULT), sinks included
    sinks: int = 4  # S of the sinks cache (kvviz.options.SINKS_DEFAULT)
    residual: int | None = None  # R of the int8 cache: newest tokens kept in full precision
    spec_k: int = 4  # k of the speculative engines: drafts per round (kvviz.options.SPEC_K_DEFAULT)
    rollback: str = "overwrite"  # how they undo rejected drafts' K/V: "overwrite" or "crop" (kvviz.options.ROLLBACKS)
    kernel: str = "torch"  # what runs every engine's decode steps (kvviz.kernels), one for the run

    def __post_init__(self) -> None:
        """The bounds that need no model (kvviz.options.BOUNDS); the model's own (context, vocabulary)
        are checked by kvviz.options.check_against_model when the run starts."""
        from kvviz.options import check_run_config

        problems = check_run_config(self)
        if problems:
            raise ValueError(problems[0])
