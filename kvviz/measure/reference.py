"""A bare decode loop: what kvviz's engines cost measured against plain PyTorch doing the same work. It is a
deliberate second implementation of the forward (beside Transformer.forward, which every engine and the serving
runner run): written out with no hooks, so that the engines' own cost shows against it.

`bare_generate` runs the Llama-family rule (RMSNorm, RoPE, fused QKV, SDPA, SwiGLU) over a kvviz
Transformer's own weight tensors, with one cache rule written out inline (naive: none, the whole
sequence every step; concat: `torch.cat`; static: a preallocated buffer written in place; paged: a
shuffled block pool, written with `index_copy_` and gathered with `index_select`), greedy argmax, and
nothing else: no engine, no cache object, no trace, no sampler. It knows nothing of tracing or of the
app; the bench times it beside the engines. GPT-2 models have no bare loop here.
"""
from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F

from kvviz.caches.slots import slots
from kvviz.runtime.devices import synchronize

RULES = ("naive", "concat", "static", "paged")
BARE_KERNELS = ("torch", "native")  # the kernels the bare loop runs, as the engines run them


def supports(model) -> bool:
    return model.cfg.arch != "gpt2"


def _layer_weights(model):
    out = []
    for block in model.layers:
        a = block.self_attn
        out.append((block.input_layernorm.weight, a.qkv_proj.weight, a.qkv_proj.bias,
                    None if a.q_norm is None else a.q_norm.weight, None if a.k_norm is None else a.k_norm.weight,
                    a.o_proj.weight, block.post_attention_layernorm.weight, block.mlp.gate_up_proj.weight,
                    block.mlp.down_proj.weight))
    return out


def bare_generate(model, prompt_ids: Sequence[int], max_new_tokens: int, rule: str = "concat",
                  *, block_size: int = 16, seed: int = 0, kernel: str = "torch") -> tuple[list[int], list[float]]:
    """Greedy tokens and each step's milliseconds (forward + cache write + argmax, device synchronised,
    as the engines' StepTimer counts them). Prefill is step 0, as in the engines."""
    steps = bare_steps(model, prompt_ids, max_new_tokens, rule, block_size=block_size, seed=seed, kernel=kernel)
    tokens: list[int] = []
    step_ms: list[float] = []
    while True:
        t0 = time.perf_counter()
        token = next(steps, None)
        if token is None:
            return tokens, step_ms
        step_ms.append((time.perf_counter() - t0) * 1000.0)
        tokens.append(token)


def bare_steps(model, prompt_ids: Sequence[int], max_new_tokens: int, rule: str = "concat",
               *, block_size: int = 16, seed: int = 0, kernel: str = "torch") -> Iterator[int]:
    """The bare loop one step at a time: set up now (weights, tables, the cache), then each next() runs
    one step, device synchronised, and gives its greedy token.

    `kernel`: the decode step's, the run's (kvviz.kernels): "torch" runs torch's ops; "native" runs a concat,
    static or paged decode step as one call of kvviz's C step (kvviz.native), over the loop's own buffers, as
    the engine does, so that kvviz/bare measures the instrument under the same kernel. The other kernels have
    no bare loop (BARE_KERNELS); asking for one is refused in one line."""
    if kernel not in BARE_KERNELS:
        raise ValueError(f"no bare loop on the {kernel!r} kernel; the bare loop runs {', '.join(BARE_KERNELS)}")
    if rule not in RULES:
        raise ValueError(f"unknown cache rule {rule!r}; choose from {', '.join(RULES)}")
    if not supports(model):
        raise ValueError(f"no bare loop for {model.cfg.arch} models")
    cfg = model.cfg
    H, KV, D, eps = cfg.n_head, cfg.n_kv_head, cfg.head_dim, cfg.norm_eps
    param = model.embed_tokens.weight
    device, dtype = param.device, param.dtype
    total = len(prompt_ids) + max_new_tokens
    model.plan()  # the weights in the layout the engines read them in (Transformer._read_layout), before any step
    cos_all, sin_all = model.rope_tables(total, device)
    emb = model.embed_tokens.weight
    head = emb if model.lm_head is None else model.lm_head.weight
    final_norm = model.norm.weight
    layers = _layer_weights(model)
    low = dtype != torch.float32
    gqa = H != KV

    # The same kernels as kvviz's model, so that the ratio measures the instrument, not a choice of op:
    # the fused RMSNorm where torch has one for the CPU, and RoPE as x*cos + roll(x)*(sin, first half negated)
    fused = getattr(torch, "_fused_rms_norm", None) if device.type == "cpu" else None

    def norm(x, w):
        if not low:
            if fused is not None:
                return fused(x, (x.shape[-1],), w, eps)[0]
            return F.rms_norm(x, (x.shape[-1],), w, eps)
        return (F.rms_norm(x.float(), (x.shape[-1],), None, eps) * w.float()).to(x.dtype)

    half = D // 2
    sin_all = torch.cat((-sin_all[:, :half], sin_all[:, half:]), dim=-1)

    def rot(x, cos, sin):
        return torch.addcmul(x * cos, x.roll(half, -1), sin)

    # the cache, one rule, kept in plain lists
    n_layer = len(layers)
    if rule == "static":
        shape = (1, KV, total, D)
        kbuf = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layer)]
        vbuf = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layer)]
    elif rule == "paged":
        n_blocks = -(-total // block_size)
        shape = (n_blocks, block_size, KV, D)
        kbuf = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layer)]
        vbuf = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layer)]
        order = torch.randperm(n_blocks, generator=torch.Generator().manual_seed(seed)).tolist()
        free, table = order[::-1], []
    else:  # concat grows these; naive keeps nothing
        kbuf, vbuf = [None] * n_layer, [None] * n_layer

    ids = [int(i) for i in prompt_ids]
    step_c = None  # the native decode step, as the engine runs it
    if kernel == "native":
        from kvviz import native
        from kvviz.kernels import check_engines

        check_engines(kernel, (rule,))
        native.check_supported(model)
        step_c = native.NativeStep(model, torch.get_num_threads(), mode=rule, k=kbuf, v=vbuf, max_len=total,
                                   table=table if rule == "paged" else None, block_size=block_size)
        slot = torch.zeros((1, KV, 1, D), device=device, dtype=dtype)

    def c_step(token: int, past: int, stop: int) -> int:  # the whole decode step in C, the cache rule around it
        if rule == "paged":
            while len(table) * block_size < stop:
                table.append(free.pop())
        elif rule == "concat":  # the history copied one row longer, as torch.cat([past, k]) does
            for li in range(n_layer):
                kbuf[li] = torch.cat((kbuf[li], slot), dim=2)
                vbuf[li] = torch.cat((vbuf[li], slot), dim=2)
            step_c.rebind()
        logits, _, pick = step_c(token, past)  # the kernel's greedy pick, as the engine takes it
        return int(logits[0].argmax()) if pick is None else pick

    def steps() -> Iterator[int]:  # a closure: the set-up above runs at the call, not at the first step
        past = 0
        for step in range(max_new_tokens):
            if rule == "naive":
                past = 0  # nothing kept: every position again
            new = ids if step == 0 or rule == "naive" else ids[-1:]
            T = len(new)
            stop = past + T
            if step_c is not None and step > 0:
                with torch.inference_mode():
                    token = c_step(new[0], past, stop)
                ids.append(token)
                past = stop
                yield token
                continue
            with torch.inference_mode():
                if rule == "paged":
                    while len(table) * block_size < stop:
                        table.append(free.pop())
                    pos = torch.arange(past, stop)
                    tab = torch.tensor(table)
                    slot_idx = slots(tab, pos, block_size).to(device)
                    gather = tab.to(device)
                x = F.embedding(torch.tensor([new], device=device), emb)  # (1, T, C)
                cos, sin = cos_all[past:stop], sin_all[past:stop]
                for li, (ln1, wqkv, bqkv, qn, kn, wo, ln2, wgu, wdown) in enumerate(layers):
                    h = norm(x, ln1)
                    qkv = F.linear(h, wqkv, bqkv).view(1, T, H + 2 * KV, D)
                    if qn is not None:
                        q = norm(qkv[:, :, :H], qn).transpose(1, 2)  # (1, H, T, D)
                        k = norm(qkv[:, :, H:H + KV], kn).transpose(1, 2)  # (1, KV, T, D)
                        q = rot(q, cos, sin)
                        k = rot(k, cos, sin)
                    else:
                        qk = qkv[:, :, :H + KV].transpose(1, 2)  # (1, H+KV, T, D)
                        qk = rot(qk, cos, sin)
                        q, k = qk[:, :H], qk[:, H:]
                    v = qkv[:, :, H + KV:].transpose(1, 2)  # (1, KV, T, D)
                    if rule == "concat":
                        if kbuf[li] is not None:
                            k = torch.cat([kbuf[li], k], dim=2)  # (1, KV, past + T, D)
                            v = torch.cat([vbuf[li], v], dim=2)
                        kbuf[li], vbuf[li] = k, v
                    elif rule == "static":
                        kbuf[li][:, :, past:stop].copy_(k)
                        vbuf[li][:, :, past:stop].copy_(v)
                        k, v = kbuf[li][:, :, :stop], vbuf[li][:, :, :stop]
                    elif rule == "paged":
                        kp, vp = kbuf[li], vbuf[li]
                        kp.view(-1, KV, D).index_copy_(0, slot_idx, k[0].transpose(0, 1))  # (T, KV, D)
                        vp.view(-1, KV, D).index_copy_(0, slot_idx, v[0].transpose(0, 1))
                        n_used = len(table)
                        k = kp.index_select(0, gather).view(n_used * block_size, KV, D)[:stop].transpose(0, 1)[None]
                        v = vp.index_select(0, gather).view(n_used * block_size, KV, D)[:stop].transpose(0, 1)[None]
                    y = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1, enable_gqa=gqa)
                    x = x + F.linear(y.transpose(1, 2).reshape(1, T, H * D), wo)
                    gate, up = F.linear(norm(x, ln2), wgu).chunk(2, dim=-1)
                    x = x + F.linear(F.silu(gate) * up, wdown)
                logits = F.linear(norm(x[:, -1:], final_norm), head)  # (1, 1, V)
                token = int(logits[0, -1].argmax())
                synchronize(device)
            ids.append(token)
            past = stop
            yield token

    synchronize(device)
    return steps()


# -- kvviz against the bare loop ----------------------------------------------------------------
BURST = 8  # steps a side takes before the next side takes as many
TRACE_MODES = ("off", "full")  # off: nothing copied out; full: the app's default (masks + layer 0 head 0)


def trace_options(mode: str):
    from kvviz.config import TraceOptions

    if mode == "off":
        return TraceOptions(masks=False)
    if mode == "full":
        return TraceOptions(masks=True, weights_layer=0, weights_head=0)
    raise ValueError(f"unknown trace mode {mode!r}; choose from {', '.join(TRACE_MODES)}")


def compare(model, prompt_ids: Sequence[int], n: int, rule: str, *, repeat: int = 5, block_size: int = 16,
            modes: Sequence[str] = TRACE_MODES, kernel: str = "torch") -> dict:
    """kvviz's `rule` engine (once per trace mode) and the bare loop, `repeat` times, in turns.

    Within a repeat the sides take BURST steps each in turn (the order rotating every turn), and each
    side's time is the sum of its own calls: its set-up (the engine and its cache, the bare loop's
    buffers) and every step, trace records included and kept. On a shared machine the same run's time
    moves by half from one second to the next; run by run, kvviz/bare of the same pair ranged
    0.5-1.5x. Turns of a few milliseconds meet the same interference, so the sums compare the work
    itself; a burst rather than a single step keeps each side's caches warm (in `kvviz hfbench`, one
    step each in turn put kvviz at 2.26x transformers' speed, turns of 8 at 2.66x, run after run).
    The ratio is bare time / kvviz time in each repeat (kvviz's tokens/s as a fraction of the bare
    loop's), then the median over repeats."""
    import statistics

    from kvviz.config import SamplingConfig
    from kvviz.engines import make_engine

    options = {m: trace_options(m) for m in modes}
    sides = ["bare", *modes]
    walls: dict[str, list[float]] = {k: [] for k in sides}
    tokens: dict[str, list[int]] = {}
    device = model.embed_tokens.weight.device
    clock = time.perf_counter
    for i in range(repeat):
        spent = dict.fromkeys(sides, 0.0)
        steps, got, kept = {}, {k: [] for k in sides}, []
        synchronize(device)
        for side in sides:
            t0 = clock()
            if side == "bare":
                steps[side] = bare_steps(model, prompt_ids, n, rule, block_size=block_size, kernel=kernel)
            else:
                steps[side] = make_engine(rule, model, block_size=block_size, kernel=kernel).generate(
                    prompt_ids, n, SamplingConfig(), options[side])
            spent[side] += clock() - t0
        order = sides if i % 2 == 0 else sides[::-1]
        for turn, first in enumerate(range(0, n, BURST)):
            burst = range(first, min(n, first + BURST))
            turn %= len(order)
            for side in order[turn:] + order[:turn]:
                it, tokens_of = steps[side], got[side]
                for _ in burst:
                    t0 = clock()
                    item = next(it)
                    spent[side] += clock() - t0
                    if side == "bare":
                        tokens_of.append(item)
                    else:
                        kept.append(item)  # as the bench and the app keep every record
                        tokens_of.append(item.token_id)
        for side in sides:
            walls[side].append(spent[side] * 1000.0)
        tokens = got
        del kept
    med = {k: statistics.median(v) for k, v in walls.items()}
    ratio = {m: statistics.median(b / k for b, k in zip(walls["bare"], walls[m])) for m in modes}
    return dict(engine=rule, new_tokens=n, repeat=repeat, bare_ms=med["bare"],
                kvviz_ms={m: med[m] for m in modes}, ratio=ratio, walls_ms=walls,
                same_tokens=all(tokens[m] == tokens["bare"] for m in modes))


TARGETS = {"off": 0.95, "full": 0.85}  # kvviz/bare at least this, tracing off and full


def reference_rows(model, prompt_ids: Sequence[int], tokens: Sequence[int], engines: Sequence[str], *,
                   repeat: int, block_size: int = 16, out=print, kernel: str = "torch") -> list[dict]:
    """`kvviz bench --reference`: compare() for every engine with a bare rule at every length, printed
    as a table (one line a row, as it is measured) and returned as JSON-ready rows."""
    keys = [e for e in engines if e in RULES]
    skipped = [e for e in engines if e not in RULES]
    out(f"kvviz against a bare loop (the same weights and cache rule, no engine, trace or sampler): wall time of "
        f"the whole generation (set-up, every step, trace records included and kept), the sides taking turns of "
        f"{BURST} steps, each side's decode step through the same kernel (--kernel {kernel}); kvviz/bare = the "
        f"median over {repeat} repeats of bare time / kvviz time; off = no "
        f"tracing, full = the app's (masks + layer 0 head 0 weights)"
        + (f"; no bare loop for {', '.join(skipped)}" if skipped else ""))
    out(f"{'new':>5} {'engine':<7} {'bare ms':>9} {'off ms':>9} {'kvviz/bare':>10} {'full ms':>9} "
        f"{'kvviz/bare':>10}  same tokens")
    rows = []
    for n in tokens:
        for key in keys:
            row = compare(model, prompt_ids, n, key, repeat=repeat, block_size=block_size, kernel=kernel)
            rows.append(row)
            out(f"{n:>5} {key:<7} {row['bare_ms']:>9.1f} {row['kvviz_ms']['off']:>9.1f} "
                f"{row['ratio']['off']:>9.2f}x {row['kvviz_ms']['full']:>9.1f} {row['ratio']['full']:>9.2f}x  "
                f"{'yes' if row['same_tokens'] else 'NO'}")
    missed = [f"{r['engine']} at {r['new_tokens']} ({m} {r['ratio'][m]:.2f}x)" for r in rows
              for m, least in TARGETS.items() if r["ratio"][m] < least]
    out(f"targets: >= {TARGETS['off']}x off, >= {TARGETS['full']}x full: "
        + ("met" if not missed else "missed by " + ", ".join(missed)))
    return rows
