"""GPT-2: LayerNorm with biases, learned absolute positions, a GELU MLP, one fused QKV with bias.

Same contract as the Llama-family Transformer (a cache argument, the mask applied, one head's weights
on request; `attend` is shared), so every engine and cache runs it unchanged. Parameter names follow
the Hugging Face GPT-2 layout without its `transformer.` prefix; its Conv1D weights are stored here
as nn.Linear ones (transposed), see kvviz.models.hf. Knows nothing about tokens as text or engines.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from kvviz.config import ModelConfig
from kvviz.models.transformer import ForwardResult, attend, place_weights, step_mask


class GPT2Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_idx: int) -> None:
        super().__init__()
        self.layer_idx, self.n_head, self.head_dim = layer_idx, cfg.n_head, cfg.head_dim
        self.c_attn = nn.Linear(cfg.d_model, 3 * cfg.d_model)  # Q, K, V of every head, with biases
        self.c_proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor, cache, mask, mask_tensor, weights_head: int | None):
        B, T, _ = x.shape
        H, D = self.n_head, self.head_dim
        qkv = F.linear(x, self.c_attn.weight, self.c_attn.bias).view(B, T, 3 * H, D).transpose(1, 2)  # (B, 3H, T, D)
        q, k, v = qkv[:, :H], qkv[:, H:2 * H], qkv[:, 2 * H:]  # each (B, H, T, D): no positions to rotate
        y, weights = attend(q, k, v, cache, self.layer_idx, mask, mask_tensor, weights_head)
        return F.linear(y, self.c_proj.weight, self.c_proj.bias), weights


class GPT2MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.d_model, cfg.d_ff)
        self.c_proj = nn.Linear(cfg.d_ff, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(F.linear(x, self.c_fc.weight, self.c_fc.bias), approximate="tanh")  # GPT-2's gelu_new
        return F.linear(h, self.c_proj.weight, self.c_proj.bias)


class GPT2Block(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_idx: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
        self.attn = GPT2Attention(cfg, layer_idx)
        self.ln_2 = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
        self.mlp = GPT2MLP(cfg)

    def forward(self, x, cache, mask, mask_tensor, weights_head):
        a, w = self.attn.forward(self.ln_1.forward(x), cache, mask, mask_tensor, weights_head)
        x = x + a
        return x + self.mlp.forward(self.ln_2.forward(x)), w


class GPT2(nn.Module):
    """Positions are looked up, not rotated: a cached K already carries its position, as with RoPE."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        if cfg.arch != "gpt2":
            raise ValueError(f"GPT2 builds arch 'gpt2', got {cfg.arch!r}")
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        self.h = nn.ModuleList(GPT2Block(cfg, i) for i in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
        self.lm_head = None if cfg.tie_embeddings else nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)

    def init_weights(self, seed: int) -> GPT2:
        """Seeded random weights, independent of the global RNG: embeddings N(0, 1), linear layers
        N(0, 1/fan_in), LayerNorms at weight 1 and bias 0, other biases 0."""
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith(".bias"):
                    p.zero_()
                elif p.dim() == 1:  # LayerNorm weights
                    p.fill_(1.0)
                elif name.startswith(("wte", "wpe")):
                    p.copy_(torch.randn(p.shape, generator=gen))
                else:
                    p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))
        return self

    def forward(self, ids: torch.Tensor, cache=None, weights_layer: int | None = None,
                weights_head: int = 0, all_logits: bool = False) -> ForwardResult:
        """ids (B, T). With a cache, positions continue from its length and K/V are stored in it."""
        B, T = ids.shape
        past = cache.seq_len if cache is not None else 0
        if past + T > self.cfg.max_seq_len:
            raise ValueError(f"position {past + T - 1} is beyond GPT-2's {self.cfg.max_seq_len} learned positions")
        mask, mask_tensor, kv_pos = step_mask(T, cache, ids.device)
        x = self.wte(ids) + self.wpe.weight[past:past + T]  # (B, T, C)
        weights = None
        for i, block in enumerate(self.h):
            x, w = block.forward(x, cache, mask, mask_tensor, weights_head if i == weights_layer else None)
            if w is not None:
                weights = w
        x = self.ln_f.forward(x if all_logits else x[:, -1:])
        head = self.wte.weight if self.lm_head is None else self.lm_head.weight
        logits = F.linear(x, head)  # (B, T|1, V)
        weights = place_weights(weights, kv_pos, mask.kv_len)
        return ForwardResult(logits=logits if all_logits else logits[:, -1], mask=mask, attn_weights=weights)
