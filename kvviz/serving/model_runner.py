"""One batched forward per scheduler step over every request it runs (nano-vllm's ModelRunner).

The step's tokens are flattened into one (1, N) batch and run through the model's own forward
(Transformer.forward) with `PagedBatch` as its attention hook: every weight matrix is read once for all of
them. Each token has its own position (RoPE rows picked per token) and its own slot in the shared paged K/V
pool (kvviz.caches.slots), where its K and V are written. Attention is per request over its own blocks: a
prefill chunk gathers its table's positions and masks causally from its offset; every one-token row
(decode, idle) goes into one padded call with a key mask.

Padding and idle slots (static batching) pass through every matrix like the rest, and their K/V go to
a scratch block that no block table holds, so no real query ever reads them. Knows nothing about
schedulers' policies, sampling or the clock.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from kvviz.caches.slots import slots
from kvviz.models.transformer import Transformer
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


PACK_ROWS = 16  # the batch size oneDNN's packed layout is chosen for (a hint: any number of rows runs)


def packable(model) -> bool:
    """Whether the batched step's projections go through oneDNN's packed weights: float32 on a CPU where torch
    has oneDNN (mkldnn) and the host has the memory for a second copy of the weights (else F.linear)."""
    from kvviz.models.io import available_ram

    param = next(model.parameters())
    if not (param.is_cpu and param.dtype == torch.float32 and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_linear_pointwise")):
        return False
    free = available_ram()
    return free is None or free > 2 * sum(p.numel() * p.element_size() for p in model.parameters())


def projections(plan) -> list[torch.Tensor]:
    """The weights a forward's `linear` hook multiplies: every layer's QKV, output, gate/up and down, the head."""
    return [w for layer in plan.layers for w in (layer.qkv, layer.o, layer.gate_up, layer.down)] + [plan.head]


class PackedLinear:
    """`F.linear(x, w, b)` of the plan's weights through oneDNN with each weight packed once (in its blocked
    layout, chosen for PACK_ROWS rows): the linear hook of the batched step (Transformer.forward's `linear`).

    A decode step of B requests multiplies B rows by every matrix. torch's F.linear (MKL) took 0.45 ms for 8
    rows of the `wide` model's gate/up matrix (3072 x 512) at one thread on the development machine, 3.5x its
    one-row time; the packed product 0.25 ms (tests/test_serving.py holds it to F.linear's values).
    The packed copies live beside the model's weights, which the other engines read."""

    def __init__(self, plan) -> None:
        weights = projections(plan)
        with torch.inference_mode():
            self.packed = {id(w): torch.ops.mkldnn._reorder_linear_weight(w.detach(), PACK_ROWS) for w in weights}
        self.nbytes = sum(w.numel() * w.element_size() for w in weights)

    def __call__(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed[id(w)], b, "none", [], "")


NATIVE_ROWS = 4  # steps of at most this many rows multiply through step.c's kv_gemm; more: the packed weights


class NativeLinear:
    """`F.linear(x, w, b)` through step.c's multi-row product (kvviz.native, kv_gemm) over row-major copies of
    the plan's column-major weights (the row-major ones read in place): each weight row read once for all of
    the step's rows, at torch's thread count. The runner's decode step on `wide` (medians, in turns with the
    packed product and F.linear in one process): 1 thread, 1 row 9.5 ms against F.linear's 8.9 (noise), 4 rows
    10.7 against the packed product's 12.4, 8 rows 15.2 against 15.3; 2 threads, 1 row 5.6 against F.linear's
    9.3, 4 rows 7.1 against 7.6, 8 rows 10.7 against the packed product's 9.8: hence NATIVE_ROWS."""

    def __init__(self, plan, lib) -> None:
        weights = projections(plan)
        with torch.inference_mode():
            self.rm = {id(w): w.detach().contiguous() for w in weights}
        self.lib = lib

    def __call__(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        m = self.rm[id(w)]
        out, n_in = m.shape
        x2 = x.reshape(-1, n_in).contiguous()
        y = torch.empty(x2.shape[0], out, dtype=x.dtype, device=x.device)
        bias = None if b is None else b.contiguous()
        self.lib.kv_gemm(m.data_ptr(), x2.data_ptr(), y.data_ptr(), n_in, out, x2.shape[0],
                         None if bias is None else bias.data_ptr(), torch.get_num_threads())
        return y.view(*x.shape[:-1], out)


def native_linear(model) -> NativeLinear | None:
    """The multi-row product of step.c where it runs this model (a float32 Llama-family model on a CPU, a C
    compiler that built step.c), else None."""
    from kvviz import native

    if native.why_not(model, "concat") is not None:
        return None
    return NativeLinear(model.plan(), native.load())


class ModelRunner:
    """The server's K/V pool (one (slots, KV, D) tensor per layer, its last block the scratch) and the step's
    forward over it."""

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
        self.linear = None  # F.linear
        if packable(model):
            self.linear = PackedLinear(model.plan())
        self.native = native_linear(model)

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor) -> None:
        """The step's new K/V (N, KV, D) into their pool slots."""
        self.k_pool[layer].index_copy_(0, slots, k)
        self.v_pool[layer].index_copy_(0, slots, v)

    @torch.inference_mode()
    def run(self, rows: list[Row]) -> torch.Tensor:
        """One forward over every row; logits (E, V) of the last position of each row that emits, in
        row order."""
        batch = PagedBatch(self, rows)
        self.thrown_rows = batch.thrown
        n = batch.ids.shape[1]
        if self.native is not None and n <= NATIVE_ROWS:
            linear = self.native
        else:  # one row: F.linear streams each weight faster than the packed product (9.8 against 13.7 ms)
            linear = self.linear if n > 1 else None
        return self.model.forward(batch.ids, attention=batch, linear=linear).logits[0]  # (E, V)


class PagedBatch:
    """The attention hook (kvviz.models.transformer.CacheAttention's members) of one serving step: the flattened
    rows' ids (1, N), positions and pool slots, the rows whose logits are returned, and attention over the
    runner's pool, built once for every layer."""

    mask = None
    weights = None

    def __init__(self, runner: ModelRunner, rows: list[Row]) -> None:
        self.runner = runner
        dev, S = runner.device, runner.block_size
        ids, pos, starts, tables = [], [], [], []
        for row in rows:
            starts.append(len(ids))
            toks = row.seq.tokens
            if row.real:
                ids += toks[row.start:row.start + row.n]
                tables.append(row.seq.block_table)
            else:  # padding and idle slots compute a token that is thrown away, into the scratch block
                ids += [toks[-1]] * row.n
                tables.append([runner.scratch] * ((row.start + row.n - 1) // S + 1))
            pos += range(row.start, row.start + row.n)
        # the batch rows of padding and idle slots (what a test poisons to show that nothing reads them)
        self.thrown = torch.tensor([i for row, s in zip(rows, starts) if not row.real for i in range(s, s + row.n)],
                                   dtype=torch.long, device=dev)
        self.ids = torch.tensor([ids], device=dev)  # (1, N)
        self.positions = torch.tensor(pos, device=dev)  # (N,)
        self.stop = max(pos) + 1
        self.slots = torch.cat([slots(torch.tensor(t), torch.arange(r.start, r.start + r.n), S)
                                for t, r in zip(tables, rows)]).to(dev)  # (N,)
        self.rows = torch.tensor([s + r.n - 1 for r, s in zip(rows, starts) if r.emits], dtype=torch.long,
                                 device=dev)  # (E,)

        # one-token rows (decode, idle): one padded call over each row's history, keys past its length masked
        one = [i for i, r in enumerate(rows) if r.n == 1]
        self.one_q = torch.tensor([starts[i] for i in one], dtype=torch.long, device=dev)
        lens = [rows[i].start + 1 if rows[i].real else 1 for i in one]
        L = max(lens, default=0)
        self.R, self.L = len(one), L
        if one:
            width = max(len(tables[i]) for i in one)
            table = torch.tensor([tables[i] + [runner.scratch] * (width - len(tables[i])) for i in one])  # (R, W)
            # history positions 0 .. len-1 (an idle row: its own position), the padding keys at the last one
            first = torch.tensor([0 if rows[i].real else rows[i].start for i in one])[:, None]
            at = first + torch.minimum(torch.arange(L)[None, :], torch.tensor(lens)[:, None] - 1)  # (R, L)
            self.gather = slots(table, at, S).view(-1).to(dev)  # (R*L,)
        self.key_mask = None
        if len(set(lens)) > 1:
            self.key_mask = (torch.arange(L, device=dev) < torch.tensor(lens, device=dev)[:, None])[:, None, None, :]
        # chunks (n > 1): (first row of the batch, n, history slots or None for own K/V, mask or None)
        self.chunks = []
        for i, r in enumerate(rows):
            if r.n == 1:
                continue
            if not r.real:  # padding: attends over its own slots only
                self.chunks.append((starts[i], r.n, None, None))
                continue
            hist = slots(torch.tensor(tables[i]), torch.arange(r.start + r.n), S).to(dev)
            mask = None if r.start == 0 else torch.ones(r.n, r.start + r.n, dtype=torch.bool, device=dev).tril(r.start)
            self.chunks.append((starts[i], r.n, hist, mask))

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q (1, H, N, D), k and v (1, KV, N, D) -> (1, N, H*D)."""
        q, k, v = q[0].transpose(0, 1), k[0].transpose(0, 1), v[0].transpose(0, 1)  # (N, H|KV, D)
        N, H, D = q.shape
        KV = k.shape[1]
        gqa = H != KV
        self.runner.write(layer, k, v, self.slots)
        kp, vp = self.runner.k_pool[layer], self.runner.v_pool[layer]
        y = torch.empty(N, H, D, device=q.device, dtype=q.dtype)
        if self.R:
            R, L = self.R, self.L
            qd = q.index_select(0, self.one_q).unsqueeze(2)  # (R, H, 1, D)
            # index_select of the flat slots: advanced indexing (kp[gather]) took 23% of a batch-32
            # decode step of `wide` here (2.5 ms a call), index_select a third of that
            kd = kp.index_select(0, self.gather).view(R, L, KV, D).permute(0, 2, 1, 3)  # (R, KV, L, D)
            vd = vp.index_select(0, self.gather).view(R, L, KV, D).permute(0, 2, 1, 3)
            out = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=self.key_mask, enable_gqa=gqa)
            y.index_copy_(0, self.one_q, out.squeeze(2))
        for s, n, hist, mask in self.chunks:
            qc = q[s:s + n].transpose(0, 1).unsqueeze(0)  # (1, H, n, D)
            if hist is None:
                kc, vc = k[s:s + n], v[s:s + n]
            else:
                kc, vc = kp.index_select(0, hist), vp.index_select(0, hist)  # (T_kv, KV, D)
            kc, vc = kc.transpose(0, 1).unsqueeze(0), vc.transpose(0, 1).unsqueeze(0)  # (1, KV, T_kv, D)
            out = F.scaled_dot_product_attention(qc, kc, vc, attn_mask=mask, is_causal=mask is None, enable_gqa=gqa)
            y[s:s + n] = out[0].transpose(0, 1)
        return y.view(1, N, H * D)
