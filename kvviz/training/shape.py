"""The shape `kvviz train` trains: a base model's config (tiny's, or the model a draft is trained for) with the
layers, width, heads and MLP the user gives, each impossible shape refused in one line. Config arithmetic only:
knows nothing about torch, the corpus or the optimiser.
"""
from __future__ import annotations

from pathlib import Path

from kvviz.config import ModelConfig

# option (as `kvviz train --layers` etc. spells it) -> the ModelConfig field it sets
SHAPE_FIELDS = {"layers": "n_layer", "d_model": "d_model", "heads": "n_head", "kv_heads": "n_kv_head",
                "head_dim": "head_dim", "d_ff": "d_ff"}
BYTE_VOCAB = 256  # kvviz train's corpus is bytes: a model it trains reads one token per byte


def base_config(name_or_path: str) -> ModelConfig:
    """The config of a shipped model (a preset name) or of a kvviz model folder, for a draft to share its
    vocabulary, context and architecture. Refused in one line: a model kvviz train cannot train a draft for."""
    from kvviz.models.presets import PRESETS, preset_config

    if name_or_path in PRESETS:
        cfg = preset_config(name_or_path)
    else:
        path = Path(name_or_path) / "config.json"
        if not path.is_file():
            raise ValueError(f"--draft-for {name_or_path!r}: not a shipped model ({', '.join(PRESETS)}) nor a "
                             "kvviz model folder with a config.json")
        cfg = ModelConfig.load_json(path)
    if cfg.arch == "gpt2":
        raise ValueError(f"--draft-for {cfg.name}: kvviz train builds the Llama-family transformer, not gpt2")
    if cfg.vocab_size != BYTE_VOCAB or cfg.tokenizer != "bytes":
        raise ValueError(f"--draft-for {cfg.name}: kvviz train is byte-level ({BYTE_VOCAB} tokens) and a draft must "
                         f"share its target's vocabulary of {cfg.vocab_size:,}")
    return cfg


def training_config(base: ModelConfig, *, name: str, layers: int | None = None, d_model: int | None = None,
                    heads: int | None = None, kv_heads: int | None = None, head_dim: int | None = None,
                    d_ff: int | None = None) -> ModelConfig:
    """`base` with the given shape, in float32 (as it is trained). Unset options keep the base's figure, except
    what a changed width or head count implies: head_dim = d_model / heads, every head its own KV head, and
    d_ff in the base's ratio to d_model."""
    given = dict(layers=layers, d_model=d_model, heads=heads, kv_heads=kv_heads, head_dim=head_dim, d_ff=d_ff)
    for option, value in given.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"--{option.replace('_', '-')} must be a whole number of at least 1, got {value!r}")
    width = base.d_model if d_model is None else d_model
    n_head = base.n_head if heads is None else heads
    if head_dim is None:
        if d_model is None and heads is None:
            head_dim = base.head_dim
        elif width % n_head:
            raise ValueError(f"--heads {n_head} does not divide --d-model {width}: each head takes d_model / heads "
                             "dimensions (or give --head-dim)")
        else:
            head_dim = width // n_head
    if head_dim % 2:
        raise ValueError(f"head_dim {head_dim} is odd: rotary embeddings turn the dimensions of a head in pairs")
    n_kv = (base.n_kv_head if heads is None else n_head) if kv_heads is None else kv_heads
    if n_head % n_kv:
        raise ValueError(f"--kv-heads {n_kv} does not divide --heads {n_head}: each KV head serves heads / kv_heads "
                         "query heads")
    if d_ff is None:
        d_ff = base.d_ff if d_model is None else max(1, base.d_ff * width // base.d_model)
    return base.replace(name=name, n_layer=base.n_layer if layers is None else layers, d_model=width,
                        n_head=n_head, n_kv_head=n_kv, head_dim=head_dim, d_ff=d_ff, dtype="float32")
