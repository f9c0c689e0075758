"""One batched forward per scheduler step over every request it runs (nano-vllm's ModelRunner).

The step's tokens are flattened into one (N, C) batch: every weight matrix is read once for all of
them. Each token has its own position (RoPE rows picked per token) and its own slot in the shared
paged K/V pool (block_table[pos // S] * S + pos % S), where its K and V are written. Attention is per
request over its own blocks: a prefill chunk gathers its table's positions and masks causally from
its offset; every one-token row (decode, idle) goes into one padded call with a key mask.

Padding and idle slots (static batching) pass through every matrix like the rest, and their K/V go to
a scratch block that no block table holds, so no real query ever reads them.

Runs over the model's `plan()` with kvviz.models.transformer's `rms_norm` and `rotate`; knows nothing
about schedulers' policies, sampling or the clock.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from kvviz.models.transformer import Transformer, rms_norm, rotate, signed_sin
from kvviz.serving.scheduler import Row


def check_supported(model) -> None:
    """One line for a model this runner cannot serve (GPT-2 and anything not the Llama-family module)."""
    if not isinstance(model, Transformer):
        arch = getattr(getattr(model, "cfg", None), "arch", type(model).__name__)
        raise ValueError(f"kvviz serve runs Llama-family models (kvviz, llama, qwen2, qwen3), not {arch}")


def check_pool_memory(need: int, what: str, device: torch.device) -> None:
    """Refuse (InsufficientMemory: one line, exit 1) a K/V pool larger than the memory free for it."""
    from kvviz.models.io import check_memory

    free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else None  # None: the host's RAM
    check_memory(need, what, available=free)


class ModelRunner:
    def __init__(self, model: Transformer, n_blocks: int, block_size: int) -> None:
        check_supported(model)
        self.model = model
        cfg = model.cfg
        param = next(model.parameters())
        self.device, self.dtype = param.device, param.dtype
        self.block_size = block_size
        self.scratch = n_blocks  # the block after the pool's: padding and idle K/V land here
        shape = ((n_blocks + 1) * block_size, cfg.n_kv_head, cfg.head_dim)  # (slots, KV, D)
        elem = torch.empty((), dtype=self.dtype).element_size()
        check_pool_memory(2 * cfg.n_layer * shape[0] * shape[1] * shape[2] * elem,
                          f"a K/V pool of {n_blocks:,} blocks of {block_size}", self.device)
        self.k_pool = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(cfg.n_layer)]
        self.v_pool = [torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in range(cfg.n_layer)]
        self.thrown_rows = torch.empty(0, dtype=torch.long)  # the last step's padding and idle rows
        self._sin_for: torch.Tensor | None = None
        self._sin_signed: torch.Tensor | None = None

    def _tables(self, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.model.rope_tables(stop, self.device)
        if self._sin_for is not sin:
            self._sin_for, self._sin_signed = sin, signed_sin(sin)
        return cos, self._sin_signed

    def _slots(self, row: Row) -> list[int]:
        """Pool slot of each position the row computes (scratch slots for padding and idle)."""
        S = self.block_size
        if not row.real:
            return [self.scratch * S + p % S for p in range(row.start, row.start + row.n)]
        table = row.seq.block_table
        return [table[p // S] * S + p % S for p in range(row.start, row.start + row.n)]

    def _history(self, row: Row) -> list[int]:
        """Slots of every position a real row's queries attend over: 0 .. start + n."""
        S, table = self.block_size, row.seq.block_table
        return [table[p // S] * S + p % S for p in range(row.start + row.n)]

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor) -> None:
        """The step's new K/V (N, KV, D) into their pool slots."""
        self.k_pool[layer].index_copy_(0, slots, k)
        self.v_pool[layer].index_copy_(0, slots, v)

    @torch.inference_mode()
    def run(self, rows: list[Row]) -> torch.Tensor:
        """One forward over every row; logits (E, V) of the last position of each row that emits, in
        row order."""
        dev = self.device
        ids, pos, slots = [], [], []
        starts = []
        for row in rows:
            starts.append(len(ids))
            toks = row.seq.tokens
            if row.real:
                ids += toks[row.start:row.start + row.n]
            else:  # padding and idle slots compute a token that is thrown away
                ids += [toks[-1]] * row.n
            pos += range(row.start, row.start + row.n)
            slots += self._slots(row)
        # the batch rows of padding and idle slots (what a test poisons to show that nothing reads them)
        thrown = [i for row, s in zip(rows, starts) if not row.real for i in range(s, s + row.n)]
        self.thrown_rows = torch.tensor(thrown, dtype=torch.long, device=dev)
        N = len(ids)
        ids_t = torch.tensor(ids, device=dev)
        pos_t = torch.tensor(pos, device=dev)
        slots_t = torch.tensor(slots, device=dev)
        cos, sin = self._tables(max(pos) + 1)
        p = self.model.plan()
        H, KV, D, eps = p.shape
        cos, sin = cos.index_select(0, pos_t).unsqueeze(1), sin.index_select(0, pos_t).unsqueeze(1)  # (N, 1, D)
        S = self.block_size

        # attention groups, built once for every layer
        one = [i for i, r in enumerate(rows) if r.n == 1]
        many = [i for i, r in enumerate(rows) if r.n > 1]
        one_q = torch.tensor([starts[i] for i in one], dtype=torch.long, device=dev)
        lens = [rows[i].start + 1 if rows[i].real else 1 for i in one]
        L = max(lens, default=0)
        gather = torch.full((len(one), L), self.scratch * S, dtype=torch.long, device=dev)  # (R, L)
        for j, i in enumerate(one):
            if rows[i].real:
                gather[j, :lens[j]] = torch.tensor(self._history(rows[i]), device=dev)
            else:
                gather[j, 0] = slots[starts[i]]
        R, flat_gather = len(one), gather.view(-1)
        key_mask = None
        if len(set(lens)) > 1:
            key_mask = (torch.arange(L, device=dev) < torch.tensor(lens, device=dev)[:, None])[:, None, None, :]
        chunks = []  # (first row of the batch, n, history slots or None for own K/V, mask or None)
        for i in many:
            r = rows[i]
            if not r.real:
                chunks.append((starts[i], r.n, None, None))
                continue
            hist = torch.tensor(self._history(r), device=dev)
            mask = None if r.start == 0 else torch.ones(r.n, r.start + r.n, dtype=torch.bool, device=dev).tril(r.start)
            chunks.append((starts[i], r.n, hist, mask))
        gqa = H != KV

        x = F.embedding(ids_t, p.embed)  # (N, C)
        for layer, (ln1, wqkv, bqkv, qn, kn, wo, ln2, wgu, wdown) in enumerate(p.layers):
            qkv = F.linear(rms_norm(x, ln1, eps), wqkv, bqkv).view(N, H + 2 * KV, D)
            if qn is not None:  # Qwen3: each head's q and k normalised before the rotation
                q = rotate(rms_norm(qkv[:, :H], qn, eps), cos, sin)  # (N, H, D)
                k = rotate(rms_norm(qkv[:, H:H + KV], kn, eps), cos, sin)  # (N, KV, D)
            else:
                qk = rotate(qkv[:, :H + KV], cos, sin)  # (N, H+KV, D)
                q, k = qk[:, :H], qk[:, H:]
            v = qkv[:, H + KV:]
            self.write(layer, k, v, slots_t)
            kp, vp = self.k_pool[layer], self.v_pool[layer]
            y = torch.empty(N, H, D, device=dev, dtype=q.dtype)
            if one:
                qd = q.index_select(0, one_q).unsqueeze(2)  # (R, H, 1, D)
                # index_select of the flat slots: advanced indexing (kp[gather]) took 23% of a batch-32
                # decode step of `wide` here (2.5 ms a call), index_select a third of that
                kd = kp.index_select(0, flat_gather).view(R, L, KV, D).permute(0, 2, 1, 3)  # (R, KV, L, D)
                vd = vp.index_select(0, flat_gather).view(R, L, KV, D).permute(0, 2, 1, 3)
                out = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=key_mask, enable_gqa=gqa)
                y.index_copy_(0, one_q, out.squeeze(2))
            for s, n, hist, mask in chunks:
                qc = q[s:s + n].transpose(0, 1).unsqueeze(0)  # (1, H, n, D)
                if hist is None:  # padding: attends over its own slots only
                    kc, vc = k[s:s + n], v[s:s + n]
                else:
                    kc, vc = kp.index_select(0, hist), vp.index_select(0, hist)  # (T_kv, KV, D)
                kc, vc = kc.transpose(0, 1).unsqueeze(0), vc.transpose(0, 1).unsqueeze(0)  # (1, KV, T_kv, D)
                out = F.scaled_dot_product_attention(qc, kc, vc, attn_mask=mask, is_causal=mask is None,
                                                     enable_gqa=gqa)
                y[s:s + n] = out[0].transpose(0, 1)
            x = x + F.linear(y.view(N, H * D), wo)
            gate, up = F.linear(rms_norm(x, ln2, eps), wgu).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, wdown)
        last = torch.tensor([s + r.n - 1 for r, s in zip(rows, starts) if r.emits], dtype=torch.long, device=dev)
        h = rms_norm(x.index_select(0, last), p.final_norm, eps)
        return F.linear(h, p.head)  # (E, V)
