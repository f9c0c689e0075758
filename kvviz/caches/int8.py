"""K and V stored as int8 with one scale per token and KV head (symmetric absmax), dequantised for
attention; optionally the newest R tokens kept in full precision (KIVI's residual).

Layout: an int8 payload (B, KV, T_max, D) and float32 scales (B, KV, T_max, 1) preallocated to the
run's length, plus a ring of R full-precision slots. A token is quantised when it leaves the ring
(at once when R is None). Attention gets a dequantised copy of the whole history each step, counted
as `gathered` (a fused int8 kernel would read the payload in place); tokens moved from the ring into
the payload count as `copied`. Knows nothing about engines or Qt.
"""
from __future__ import annotations

import torch

from kvviz.caches.base import KVCache

SERVED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
SCALE_DTYPE = torch.float32
QMAX = 127  # symmetric: -127..127, so 0 is exact and the range has no lone -128


def quantise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(..., D) -> int8 (..., D) and float32 scale (..., 1), with x ~= q * scale and
    |x - q * scale| <= scale / 2 = absmax / 254 per element."""
    xf = x.float()
    scale = xf.abs().amax(-1, keepdim=True) / QMAX
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero row: any scale is exact
    return torch.round(xf / scale).clamp_(-QMAX, QMAX).to(torch.int8), scale


def dequantise(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return (q.float() * scale).to(dtype)


class Int8Cache(KVCache):
    key = "int8"
    exact = False

    def __init__(self, cfg, *, residual: int | None = None, **kw) -> None:
        super().__init__(cfg, **kw)
        if self.dtype not in SERVED_DTYPES:
            raise ValueError(f"int8 cache: cannot quantise a {str(self.dtype).removeprefix('torch.')} model; "
                             f"it serves float32, bfloat16 and float16")
        if residual is not None and (isinstance(residual, bool) or not isinstance(residual, int) or residual < 1):
            raise ValueError(f"int8 cache: the residual must be a whole number of at least 1, got {residual!r}")
        self.residual = residual or 0
        B, KV, D = self.batch, cfg.n_kv_head, cfg.head_dim
        dev = self.device
        self.kq = [torch.zeros((B, KV, self.max_len, D), device=dev, dtype=torch.int8) for _ in range(cfg.n_layer)]
        self.vq = [torch.zeros((B, KV, self.max_len, D), device=dev, dtype=torch.int8) for _ in range(cfg.n_layer)]
        self.ks = [torch.zeros((B, KV, self.max_len, 1), device=dev, dtype=SCALE_DTYPE) for _ in range(cfg.n_layer)]
        self.vs = [torch.zeros((B, KV, self.max_len, 1), device=dev, dtype=SCALE_DTYPE) for _ in range(cfg.n_layer)]
        R = self.residual
        self.kr = [torch.zeros((B, KV, R, D), device=dev, dtype=self.dtype) for _ in range(cfg.n_layer)]
        self.vr = [torch.zeros((B, KV, R, D), device=dev, dtype=self.dtype) for _ in range(cfg.n_layer)]

    @property
    def quant_token_bytes(self) -> int:
        """Payload plus scales of one token in one layer, K and V."""
        return 2 * self.batch * self.cfg.n_kv_head * (self.cfg.head_dim + SCALE_DTYPE.itemsize)

    def _store(self, layer: int, k: torch.Tensor, v: torch.Tensor, start: int) -> None:
        """Quantise k, v (B, KV, n, D) into payload positions start..start+n."""
        stop = start + k.shape[2]
        for x, q, s in ((k, self.kq[layer], self.ks[layer]), (v, self.vq[layer], self.vs[layer])):
            xq, xs = quantise(x)
            q[:, :, start:stop].copy_(xq)
            s[:, :, start:stop].copy_(xs)

    def _ring(self, positions: range) -> torch.Tensor:
        return torch.tensor([p % self.residual for p in positions], device=self.device, dtype=torch.long)

    def update(self, layer, k, v):
        start, T = self.seq_len, k.shape[2]
        stop, R = start + T, self.residual
        qa, qb = max(0, start - R), max(0, stop - R)  # payload holds [0, qb) after this step
        if min(qb, start) > qa:  # the oldest ring tokens leave for the payload: moved, counted as copied
            idx = self._ring(range(qa, min(qb, start)))
            self._store(layer, self.kr[layer].index_select(2, idx), self.vr[layer].index_select(2, idx), qa)
            self.counters.copied += (min(qb, start) - qa) * self.quant_token_bytes
        if qb > start:  # new tokens quantised at once
            self._store(layer, k[:, :, :qb - start], v[:, :, :qb - start], start)
            self.counters.written += (qb - start) * self.quant_token_bytes
        first_ring = max(start, qb)
        if stop > first_ring:  # the newest R tokens in full precision
            idx = self._ring(range(first_ring, stop))
            self.kr[layer].index_copy_(2, idx, k[:, :, first_ring - start:])
            self.vr[layer].index_copy_(2, idx, v[:, :, first_ring - start:])
            self.counters.written += (stop - first_ring) * self.token_bytes
        k_out = dequantise(self.kq[layer][:, :, :qb], self.ks[layer][:, :, :qb], self.dtype)  # (B, KV, qb, D)
        v_out = dequantise(self.vq[layer][:, :, :qb], self.vs[layer][:, :, :qb], self.dtype)
        if stop > qb:
            idx = self._ring(range(qb, stop))
            k_out = torch.cat([k_out, self.kr[layer].index_select(2, idx)], dim=2)  # (B, KV, stop, D)
            v_out = torch.cat([v_out, self.vr[layer].index_select(2, idx)], dim=2)
        self.counters.gathered += stop * self.token_bytes  # the dequantised history handed to attention
        return k_out, v_out

    @property
    def capacity(self) -> int:
        return self.max_len

    @property
    def resident_bytes(self) -> int:
        return (self.max_len * self.quant_token_bytes + self.residual * self.token_bytes) * self.cfg.n_layer
