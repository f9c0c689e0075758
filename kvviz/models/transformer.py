"""A decoder-only transformer of the Llama family (RMSNorm, RoPE, grouped-query attention, SwiGLU).

The shipped tiny model and the checkpoint loader both build this one module, and its one forward runs every
engine's and the server's steps. Attention is a hook: by default an optional cache object (the chapter's four
changes: a cache argument, past + new K/V, a causal mask offset by past_len, the full K/V returned by the cache),
which reports the mask it applied. It knows nothing about tokens as text, engines, requests or sampling.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from kvviz.config import ModelConfig
from kvviz.records.trace import MaskSpec


def rope_inv_freq(cfg: ModelConfig) -> torch.Tensor:
    """Inverse frequencies for rotary embeddings, with Llama-3 style scaling when configured."""
    D = cfg.head_dim
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    scaling = cfg.rope_scaling or {}
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind in (None, "default"):
        return inv_freq.float()
    if kind == "llama3":
        factor = float(scaling["factor"])
        low = float(scaling.get("low_freq_factor", 1.0))
        high = float(scaling.get("high_freq_factor", 4.0))
        old_ctx = float(scaling["original_max_position_embeddings"])
        low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old_ctx / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        return torch.where(medium, smoothed, scaled).float()
    if kind == "linear":
        return (inv_freq / float(scaling["factor"])).float()
    raise ValueError(f"unsupported rope scaling {kind!r} (supported: default, linear, llama3)")


def rotate(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """RoPE: x * cos + rotate_half(x) * sin, where rotate_half(x) = cat(-x2, x1) for the two halves of a
    head, in three ops instead of five. rotate_half(x) is x rolled by half a head with its first half
    negated, so the sign goes into the table:
    sin_signed = cat(-sin[:D/2], sin[D/2:]) (`signed_sin`). Equal to within a rounding (2e-7 here)."""
    return torch.addcmul(x * cos, x.roll(x.shape[-1] // 2, -1), sin_signed)


def signed_sin(sin: torch.Tensor) -> torch.Tensor:
    half = sin.shape[-1] // 2
    return torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)


class RMSNorm(nn.Module):
    """A weight per channel; applied by `rms_norm` from the model's layer plan with the config's epsilon
    (see Transformer)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))


_FUSED_RMS_NORM = getattr(torch, "_fused_rms_norm", None)
# True only while dynamo traces (a function returning False in eager: 0.09 us a call here, where
# torch.compiler.is_compiling took 0.26 us and 0.6% of a wide decode step in a py-spy profile)
_compiling = getattr(torch.compiler, "is_dynamo_compiling", torch.compiler.is_compiling)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if x.dtype == torch.float32:
        if _FUSED_RMS_NORM is not None and x.is_cpu and not _compiling():  # (dynamo cannot trace the fused one)
            # F.rms_norm runs five kernels on a CPU; the fused one, bit for bit the same (checked over
            # widths 32-4096 in tests/test_engines.py), saves a fifth of a tiny model's norm time
            return _FUSED_RMS_NORM(x, (x.shape[-1],), weight, eps)[0]
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    # Low precision: normalise in fp32 as the reference implementations do.
    return (F.rms_norm(x.float(), (x.shape[-1],), None, eps) * weight.float()).to(x.dtype)


@dataclass
class ForwardResult:
    """What one forward returns: logits of the last position, the mask applied, optional weights."""

    logits: torch.Tensor  # (B, V) at the last position
    mask: MaskSpec
    attn_weights: torch.Tensor | None  # (B, T_q, T_kv) of the requested layer/head
    greedy: int | None = None  # argmax of logits[0], known finite, where the step's kernel gave it (kvviz.native)


def _split_on_save(fused: str, parts: tuple[str, ...], sizes: tuple[int, ...]):
    """state_dict post-hook: one fused projection is saved as the separate ones checkpoints use."""
    def hook(module, state_dict, prefix, local_metadata) -> None:
        for suffix in ("weight", "bias"):
            tensor = state_dict.pop(f"{prefix}{fused}.{suffix}", None)
            if tensor is not None:
                for name, piece in zip(parts, tensor.split(sizes, dim=0)):
                    state_dict[f"{prefix}{name}.{suffix}"] = piece
    return hook


def _fuse_on_load(fused: str, parts: tuple[str, ...]):
    """load_state_dict pre-hook: the separate projections of a checkpoint become the fused one."""
    def hook(module, state_dict, prefix, *args) -> None:
        for suffix in ("weight", "bias"):
            keys = [f"{prefix}{name}.{suffix}" for name in parts]
            if all(k in state_dict for k in keys):
                state_dict[f"{prefix}{fused}.{suffix}"] = torch.cat([state_dict.pop(k) for k in keys])
    return hook


def causal_mask(T: int, past: int, device: torch.device) -> tuple[MaskSpec, torch.Tensor | None]:
    """The mask of a forward over T new positions after `past` cached ones, and the tensor SDPA needs.

    Prefill (past 0) and single-token decode need no tensor: SDPA's causal flag covers the first, and
    one query row may see every key. Any other shape gets the chapter's mask, offset by past_len."""
    mask = MaskSpec(q_len=T, kv_len=past + T, past_len=past)
    if T > 1 and past > 0:
        return mask, torch.from_numpy(mask.to_numpy()).to(device)
    return mask, None


def step_mask(T: int, cache, device: torch.device) -> tuple[MaskSpec, torch.Tensor | None, torch.Tensor | None]:
    """The mask of this forward and, for a cache that holds only some positions (window, sinks), the
    absolute position of each K/V row it returns (else None). The tensor is in the cache's row order."""
    past = cache.seq_len if cache is not None else 0
    kv_pos = None if cache is None else cache.kv_positions(T)
    if kv_pos is None:
        return (*causal_mask(T, past, device), None)
    mask = cache.mask_spec(T)
    allowed = mask.to_numpy()[:, kv_pos]  # (T, n_held)
    causal = allowed.shape[0] == allowed.shape[1] and (allowed == np.tri(T, dtype=bool)).all()
    tensor = None if (T == 1 and allowed.all()) or (causal and (kv_pos == np.arange(T)).all()) \
        else torch.from_numpy(allowed).to(device)
    return mask, tensor, torch.from_numpy(kv_pos).to(device)


def place_weights(weights: torch.Tensor | None, kv_pos: torch.Tensor | None, kv_len: int) -> torch.Tensor | None:
    """One head's weights over the cache's rows -> over absolute positions 0..kv_len (0 where evicted)."""
    if weights is None or kv_pos is None:
        return weights
    full = weights.new_zeros(*weights.shape[:-1], kv_len)  # (B, T_q, kv_len)
    full[..., kv_pos] = weights
    return full


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache, layer_idx: int, mask: MaskSpec,
           mask_tensor: torch.Tensor | None, weights_head: int | None):
    """The chapter's cached attention: the new K/V go into the cache, the queries meet past + new.

    q (B, H, T, D); k, v (B, KV, T, D). Returns (B, T, H*D) and, when asked, one head's weights."""
    B, H, T, D = q.shape
    if cache is not None:
        k, v = cache.update(layer_idx, k, v)  # (B, KV, T_kv, D): past + new
    y = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask_tensor, is_causal=mask_tensor is None and T > 1, enable_gqa=H != k.shape[1])
    y = y.transpose(1, 2).reshape(B, T, H * D)  # (B, T, H*D)
    weights = None if weights_head is None else head_weights(q, k, mask, weights_head, mask_tensor)
    return y, weights


_ZEROS: dict[tuple[torch.device, torch.dtype], torch.Tensor] = {}  # baddbmm's unused input, per device and dtype


def head_weights(q: torch.Tensor, k: torch.Tensor, mask: MaskSpec, head: int,
                 mask_tensor: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(q k^T / sqrt(D)) of one query head, recomputed beside SDPA so that tracing never
    changes the numbers the model computes. (B, T_q, T_kv), float32."""
    kv_head = head // (q.shape[1] // k.shape[1])  # the KV head this query head shares
    # One baddbmm on select()ed heads, the 1/sqrt(D) scale applied inside the product: a third of
    # matmul on sliced heads, a division and a softmax, each a new tensor (32 -> 14 us a decode step
    # on the test machine); equal to q k^T / sqrt(D) within a rounding (6e-9 in the weights)
    zero = _ZEROS.get((q.device, q.dtype))
    if zero is None:
        zero = _ZEROS[(q.device, q.dtype)] = torch.zeros((), device=q.device, dtype=q.dtype)
    scores = torch.baddbmm(zero, q.select(1, head), k.select(1, kv_head).transpose(1, 2), beta=0,
                           alpha=1.0 / math.sqrt(q.shape[-1]))
    if scores.dtype != torch.float32:
        scores = scores.float()
    if mask_tensor is not None:
        scores = scores.masked_fill(~mask_tensor, float("-inf"))
    elif mask.q_len > 1:
        allowed = torch.from_numpy(mask.to_numpy()).to(scores.device)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return scores.softmax(dim=-1)


class CacheAttention:
    """The attention `Transformer.forward` runs by default, the chapter's: the step's positions continue from the
    cache's length, the new K/V go into the cache (when there is one), SDPA over past + new with the cache's
    mask, and one head's weights recomputed beside it when asked.

    An attention hook is any object with these members: `start`, `stop` (int: the step's positions are
    start..stop-1, or `positions` a (T,) tensor of them), `rows` (None: the logits of the last position; a
    tensor: of those rows of T), `mask`, `weights` (read after the forward) and `__call__(layer, q, k, v)`
    with q (B, H, T, D), k and v (B, KV, T, D) rotated, returning (B, T, H*D)."""

    rows = None
    positions = None

    def __init__(self, cache, T: int, device: torch.device, weights_layer: int | None = None,
                 weights_head: int | None = None) -> None:
        self.cache = cache
        self.start = cache.seq_len if cache is not None else 0
        self.stop = self.start + T
        self.mask, self.mask_tensor, self.kv_pos = step_mask(T, cache, device)
        self.weights_layer = weights_layer if weights_head is not None else None
        self.weights_head = weights_head
        self.weights: torch.Tensor | None = None

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        head = self.weights_head if layer == self.weights_layer else None
        y, weights = attend(q, k, v, self.cache, layer, self.mask, self.mask_tensor, head)
        if head is not None:
            self.weights = place_weights(weights, self.kv_pos, self.mask.kv_len)
        return y


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        H, KV, D = cfg.n_head, cfg.n_kv_head, cfg.head_dim
        # One matmul for Q, K and V (as nano-vllm does); checkpoints keep q/k/v_proj, see the hooks.
        self.qkv_proj = nn.Linear(cfg.d_model, (H + 2 * KV) * D, bias=cfg.qkv_bias)
        parts = ("q_proj", "k_proj", "v_proj")
        self.register_state_dict_post_hook(_split_on_save("qkv_proj", parts, (H * D, KV * D, KV * D)))
        self.register_load_state_dict_pre_hook(_fuse_on_load("qkv_proj", parts))
        self.o_proj = nn.Linear(H * D, cfg.d_model, bias=False)
        self.q_norm = RMSNorm(D) if cfg.qk_norm else None
        self.k_norm = RMSNorm(D) if cfg.qk_norm else None


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.gate_up_proj = nn.Linear(cfg.d_model, 2 * cfg.d_ff, bias=False)  # gate and up in one matmul
        self.down_proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)
        parts = ("gate_proj", "up_proj")
        self.register_state_dict_post_hook(_split_on_save("gate_up_proj", parts, (cfg.d_ff, cfg.d_ff)))
        self.register_load_state_dict_pre_hook(_fuse_on_load("gate_up_proj", parts))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.d_model)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.d_model)
        self.mlp = MLP(cfg)


class Transformer(nn.Module):
    """Parameter names follow the Hugging Face Llama layout, so checkpoints load by name."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = RMSNorm(cfg.d_model)
        self.lm_head = None if cfg.tie_embeddings else nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self._rope_len = 0
        self.register_buffer("rope_cos", torch.empty(0), persistent=False)
        self.register_buffer("rope_sin", torch.empty(0), persistent=False)

    def init_weights(self, seed: int) -> Transformer:
        """Seeded random weights, independent of the global RNG: embeddings N(0, 1), linear layers
        N(0, 1/fan_in), norms at 1. Scaled so a random model's choices vary from token to token."""
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("norm.weight"):
                    p.fill_(1.0)
                elif name.endswith(".bias"):
                    p.zero_()
                elif p.dim() == 2 and "embed" not in name:
                    p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1]))
                else:
                    p.copy_(torch.randn(p.shape, generator=gen))
        return self

    def rope_tables(self, stop: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin (T, D) at the model's dtype for positions 0..stop at least, grown when a run needs more
        (the layer plan is rebuilt then)."""
        if stop > self._rope_len or self.rope_cos.device != device:
            n = max(stop, min(self.cfg.max_seq_len, 4096))
            inv = rope_inv_freq(self.cfg).to(device)
            t = torch.arange(n, device=device, dtype=torch.float32)
            freqs = torch.outer(t, inv)
            emb = torch.cat((freqs, freqs), dim=-1)  # (T, D)
            dtype = self.embed_tokens.weight.dtype
            self.rope_cos, self.rope_sin = emb.cos().to(dtype), emb.sin().to(dtype)
            self._rope_len = n
            self.__dict__.pop("_plan", None)  # the plan holds the tables
        return self.rope_cos, self.rope_sin

    def _apply(self, fn, *args, **kwargs):
        """`.to()`, `.cuda()`, `.half()`...: the tensors change, so the layer plan is built again."""
        self.__dict__.pop("_plan", None)
        return super()._apply(fn, *args, **kwargs)

    def plan(self) -> _Plan:
        """The model's tensors gathered once into plain tuples, which `forward` walks.

        A decode step of a small model is some fifty tiny tensor ops; reaching each weight through
        nn.Module attribute lookup and a forward method per block, attention, MLP and norm cost a
        quarter of the `tiny` model's step on a CPU (`kvviz bench --reference`: a forward through the
        modules ran at 0.72-0.83x of a bare PyTorch loop). Rebuilt after `.to()` and when the rotary
        tables grow; loading a state dict copies into the same tensors, so the plan stays valid."""
        plan = self.__dict__.get("_plan")
        if plan is None:
            self._read_layout()
            layers = []
            for block in self.layers:
                a, mlp = block.self_attn, block.mlp
                layers.append(_LayerTensors(
                    block.input_layernorm.weight, a.qkv_proj.weight, a.qkv_proj.bias,
                    None if a.q_norm is None else a.q_norm.weight, None if a.k_norm is None else a.k_norm.weight,
                    a.o_proj.weight, block.post_attention_layernorm.weight, mlp.gate_up_proj.weight,
                    mlp.down_proj.weight))
            head = self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
            cfg = self.cfg
            plan = _Plan(tuple(layers), self.embed_tokens.weight, self.norm.weight, head,
                         self.rope_cos, self.rope_sin, (cfg.n_head, cfg.n_kv_head, cfg.head_dim, cfg.norm_eps),
                         signed_sin(self.rope_sin))
            self.__dict__["_plan"] = plan
        return plan

    def _read_layout(self) -> None:
        """Store each wide float32 projection on a CPU column-major, values and shape unchanged.

        A decode step multiplies one row by every matrix, and torch's CPU kernel reads an (out, in)
        matrix whose rows are short much slower than the same matrix stored (in, out): on the 2-core
        development machine, one thread, the `wide` model's qkv (1536 x 512) read 8.9 GB/s row-major
        and 16.0 GB/s column-major, gate/up (3072 x 512) 9.7 and 13.1, where a (512 x 1536) down
        projection read 15.4 and 7.5 (tests/test_engines.py holds the rule; `scripts/bench_kernels.py`
        measures it, docs/figures.md). So a matrix with more outputs than inputs is laid out column-major (`w.t()` of a
        contiguous (in, out) tensor), the others stay as they are: a rule by shape, never by a timing,
        so the same model rounds the same way on every run. The weight keeps its shape, values and
        Parameter; only its strides change (results move by a rounding: ~5e-6 in a wide logit). Not on
        CUDA, where it was not measured, nor below float32. Saving calls .contiguous() (kvviz.models.io)."""
        for block in self.layers:
            for w in (block.self_attn.qkv_proj.weight, block.mlp.gate_up_proj.weight):
                if w.is_cpu and w.dtype == torch.float32 and w.shape[0] > w.shape[1] and w.is_contiguous():
                    # in the weight's own mode: a plan built under inference_mode leaves a trainable model
                    # trainable, and a model made under inference_mode keeps inference tensors
                    with torch.no_grad(), torch.inference_mode(w.is_inference()):
                        w.data = w.data.t().contiguous().t()

    def forward(self, ids: torch.Tensor, cache=None, weights_layer: int | None = None,
                weights_head: int = 0, all_logits: bool = False, linear=None, attention=None) -> ForwardResult:
        """ids (B, T). With a cache, positions continue from its length and K/V are stored in it.

        Each layer: RMSNorm, one fused QKV matmul, q/k norms (Qwen3), RoPE, attention, the output projection,
        RMSNorm, SwiGLU. Run functionally over `plan()`. Two hooks: `linear`, the projections' kernel (F.linear
        unless given: kvviz.kernels.OpenBlasLinear); `attention`, where the step's positions, K/V and attention
        come from (CacheAttention over `cache` unless given: kvviz.serving.model_runner's paged batch)."""
        lin = linear or F.linear
        B, T = ids.shape
        att = attention or CacheAttention(cache, T, ids.device, weights_layer, weights_head)
        p = self.__dict__.get("_plan") or self.plan()
        if att.stop > p.cos.shape[0]:  # (the tables follow the model's device: .to() rebuilds the plan)
            self.rope_tables(att.stop, ids.device)
            p = self.plan()
        H, KV, D, eps = p.shape
        if att.positions is None:
            cos, sin = p.cos[att.start:att.stop], p.sin_signed[att.start:att.stop]  # (T, D)
        else:
            cos, sin = p.cos.index_select(0, att.positions), p.sin_signed.index_select(0, att.positions)
        x = F.embedding(ids, p.embed)  # (B, T, C)
        for i, (ln1, wqkv, bqkv, qn, kn, wo, ln2, wgu, wdown) in enumerate(p.layers):
            qkv = lin(rms_norm(x, ln1, eps), wqkv, bqkv).view(B, T, H + 2 * KV, D)
            if qn is not None:  # Qwen3: each head's q and k normalised before the rotation
                q = rms_norm(qkv[:, :, :H], qn, eps).transpose(1, 2)  # (B, H, T, D)
                k = rms_norm(qkv[:, :, H:H + KV], kn, eps).transpose(1, 2)  # (B, KV, T, D)
                q = rotate(q, cos, sin)
                k = rotate(k, cos, sin)
            else:
                qk = qkv[:, :, :H + KV].transpose(1, 2)  # (B, H+KV, T, D): one rotation for Q and K
                qk = rotate(qk, cos, sin)
                q, k = qk[:, :H], qk[:, H:]
            v = qkv[:, :, H + KV:].transpose(1, 2)  # (B, KV, T, D)
            x = x + lin(att(i, q, k, v), wo)  # attention (B, T, H*D)
            gate, up = lin(rms_norm(x, ln2, eps), wgu).chunk(2, dim=-1)
            x = x + lin(F.silu(gate) * up, wdown)
        if att.rows is not None:
            x = x.index_select(1, att.rows)  # (B, E, C)
        elif not all_logits:
            x = x[:, -1:]
        logits = lin(rms_norm(x, p.final_norm, eps), p.head)  # (B, T|E|1, V)
        return ForwardResult(logits=logits if all_logits or att.rows is not None else logits[:, -1], mask=att.mask,
                             attn_weights=att.weights)


class _LayerTensors(NamedTuple):
    ln1: torch.Tensor
    qkv: torch.Tensor
    qkv_bias: torch.Tensor | None
    q_norm: torch.Tensor | None
    k_norm: torch.Tensor | None
    o: torch.Tensor
    ln2: torch.Tensor
    gate_up: torch.Tensor
    down: torch.Tensor


class _Plan(NamedTuple):
    layers: tuple[_LayerTensors, ...]
    embed: torch.Tensor
    final_norm: torch.Tensor
    head: torch.Tensor
    cos: torch.Tensor  # the rotary tables, as long as the longest forward so far (at least 4096 or the context)
    sin: torch.Tensor
    shape: tuple[int, int, int, float]  # query heads, KV heads, head dim, norm epsilon
    sin_signed: torch.Tensor  # sin with its first half negated, for `rotate`
