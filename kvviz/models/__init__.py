"""Models: the Llama-family transformer, GPT-2, presets, and loading from folders."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn

    from kvviz.config import ModelConfig


def build_decoder(cfg: ModelConfig) -> nn.Module:
    """The module a config's arch names (uninitialised): GPT2 for "gpt2", the Llama-family Transformer
    otherwise. Both take (ids, cache, weights_layer, weights_head, all_logits) and return a ForwardResult."""
    if cfg.arch == "gpt2":
        from kvviz.models.gpt2 import GPT2

        return GPT2(cfg)
    from kvviz.models.transformer import Transformer

    return Transformer(cfg)
