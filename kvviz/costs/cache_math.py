"""What each cache strategy holds, as arithmetic on a model's shape: bytes per token, tokens held at a
length, where a bounded cache stops growing, the scores a score cache keeps beside its K/V; and multi-head
latent attention (DeepSeek-V2/V3), whose
cache holds one compressed latent plus the rotary key per token per layer. Stdlib only: the memory
calculator (command and dialog) and the tests read these; the engines' measured bytes are checked
against the same figures.
"""
from __future__ import annotations

from dataclasses import dataclass

from kvviz.config import DTYPE_BYTES, ModelConfig, canonical_dtype

SCALE_BYTES = 4  # the int8 cache's float32 scale per token and KV head (kvviz.caches.int8.SCALE_DTYPE)
STRATEGIES = ("full", "window", "sinks", "tova", "h2o", "knorm", "snapkv", "int8", "mla")
TABLE_STRATEGIES = STRATEGIES[:-1]  # the ones strategy_figures computes (mla: mla_figures), in table order
SCORED = ("tova", "h2o", "knorm", "snapkv")  # the caches that choose what to forget by a score (kvviz.caches.scored)
SCORE_BYTES = 8  # one float64 score per position, one set for the whole model (kvviz.caches.scored.ScoredCache)


@dataclass(frozen=True)
class MLAShape:
    """Multi-head latent attention's cache shape: per token per layer, the compressed KV latent
    (kv_lora_rank values) and the decoupled rotary key (qk_rope_head_dim values), shared by all heads."""

    name: str
    n_layer: int
    n_head: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    dtype: str = "bfloat16"

    def bytes_per_token_per_layer(self) -> int:
        return (self.kv_lora_rank + self.qk_rope_head_dim) * DTYPE_BYTES[self.dtype]

    def bytes_per_token(self) -> int:
        return self.n_layer * self.bytes_per_token_per_layer()

    def mha_bytes_per_token(self) -> int:
        """The same model's cache without the compression: every head's K (nope + rope dims) and V."""
        per_layer = self.n_head * (self.qk_nope_head_dim + self.qk_rope_head_dim + self.v_head_dim)
        return self.n_layer * per_layer * DTYPE_BYTES[self.dtype]


# Published shapes (each model's config.json on the Hugging Face hub: num_hidden_layers,
# num_attention_heads, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim; bf16 weights).
MLA_PRESETS: dict[str, MLAShape] = {s.name: s for s in (
    MLAShape("deepseek-v2", n_layer=60, n_head=128, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
             v_head_dim=128),
    MLAShape("deepseek-v2-lite", n_layer=27, n_head=16, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
             v_head_dim=128),
    MLAShape("deepseek-v3", n_layer=61, n_head=128, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
             v_head_dim=128),
)}


@dataclass(frozen=True)
class StrategyFigures:
    """One strategy at one length: tokens held, bytes held (all layers), and bytes per token held."""

    strategy: str
    tokens: int
    held_tokens: int
    bytes: int
    bytes_per_token: int  # of what is held (int8: payload and scales; full precision for the residual)
    stops_growing_at: int | None  # the length past which the cache holds no more (None: it grows)
    # What a score cache's rule carries from step to step besides the K/V: h2o the attention each held position
    # has received so far (SCORE_BYTES each); tova scores each step from that step's attention and knorm from
    # the keys, so neither carries any; snapkv scores once.
    score_bytes: int = 0
    once_bytes: int = 0  # scores held only while snapkv cuts a prompt longer than W: one per prompt position

    @property
    def total_bytes(self) -> int:
        """K/V and the scores kept beside them."""
        return self.bytes + self.score_bytes


def strategy_figures(cfg: ModelConfig, strategy: str, tokens: int, *, dtype: str | None = None,
                     window: int = 32, sinks: int = 4, residual: int | None = None,
                     prompt: int | None = None) -> StrategyFigures:
    """Bytes a cache of `strategy` holds once `tokens` tokens are stored, for a model of shape `cfg`.
    `full` is every exact cache's figure (concat, static at its length, paged less the last block's
    slack). window and sinks hold min(tokens, W) (W counts the sinks); tova, h2o and knorm hold the same W
    slots (which positions differ, not how many) and h2o a score per held position besides; snapkv cuts a
    `prompt` (default: all `tokens`) longer than W to W once, then keeps every new token: min(prompt, W) +
    tokens - prompt. int8 holds every token as int8 plus a float32 scale per KV head, K and V, and a ring of
    R full-precision tokens."""
    if strategy not in TABLE_STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose from {', '.join(TABLE_STRATEGIES)} "
                         f"(mla: mla_figures)")
    if tokens < 0:
        raise ValueError(f"tokens must be at least 0, got {tokens}")
    elem = DTYPE_BYTES[canonical_dtype(dtype)] if dtype else cfg.dtype_bytes
    full = cfg.n_layer * 2 * cfg.n_kv_head * cfg.head_dim * elem
    if strategy == "full":
        return StrategyFigures(strategy, tokens, tokens, tokens * full, full, None)
    if strategy in ("window", "sinks", *SCORED):
        if window < 1 or (strategy == "sinks" and not 1 <= sinks < window):
            raise ValueError(f"window {window} must be at least 1 and sinks {sinks} from 1 to W - 1")
        if strategy == "snapkv":
            n_prompt = tokens if prompt is None else prompt
            if not 0 <= n_prompt <= tokens:
                raise ValueError(f"snapkv: the prompt ({n_prompt} tokens) must be from 0 to the {tokens} tokens held")
            held = min(n_prompt, window) + tokens - n_prompt
            once = n_prompt * SCORE_BYTES if n_prompt > window else 0
            return StrategyFigures(strategy, tokens, held, held * full, full, None, once_bytes=once)
        held = min(tokens, window)
        scores = held * SCORE_BYTES if strategy == "h2o" else 0
        return StrategyFigures(strategy, tokens, held, held * full, full, window, score_bytes=scores)
    quant = cfg.n_layer * 2 * cfg.n_kv_head * (cfg.head_dim + SCALE_BYTES)
    # kvviz's layout: payload and scales for every position (a token in the residual has its slot
    # waiting), plus the R-slot full-precision ring
    return StrategyFigures(strategy, tokens, tokens, tokens * quant + (residual or 0) * full, quant, None)


def mla_figures(shape: MLAShape, tokens: int) -> StrategyFigures:
    per = shape.bytes_per_token()
    return StrategyFigures("mla", tokens, tokens, tokens * per, per, None)
