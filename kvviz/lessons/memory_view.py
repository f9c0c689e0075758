"""A memory scene's panels as small HTML tables, in English or Chinese: what a token's K/V costs (the model's
shape beside the chapter's), what torch.cat copies against a paged cache, and the roofline of a decode step.
The figures are kvviz.costs.memory's; the presenter (a rich-text label) and the deck show the same HTML.
Stdlib only: no Qt.
"""
from __future__ import annotations

import html

from kvviz.format import fmt_bytes, fmt_count, fmt_figure, fmt_ms

WORDS = {
    "kv_per_token": ("What one token's K/V costs", "一个 token 的 K/V 占用"),
    "copies": ("torch.cat's copies and paged blocks", "torch.cat 的复制量与分页块"),
    "roofline": ("The memory wall: a decode step's reads", "内存墙：一次 decode 读取的字节"),
    "shape": ("shape", "形状"), "published": ("published config", "官方配置"),
    "chapter": ("the chapter's shape", "原文所用形状"), "layers": ("layers", "层数"),
    "kv_heads": ("KV heads", "KV 头数"), "head_dim": ("head_dim", "head_dim"),
    "dtype": ("bytes per value", "每个值的字节"),
    "per_layer": ("K/V per token per layer", "每 token 每层 K/V"), "per_token": ("K/V per token", "每 token K/V"),
    "formula": ("2 × layers × KV heads × head_dim × bytes", "2 × 层数 × KV 头数 × head_dim × 字节"),
    "tokens": ("tokens", "token 数"), "cache": ("KV cache", "KV 缓存"), "step_copy": ("copy at that step", "该步复制"),
    "total_copy": ("copied in all", "累计复制"), "copy_time": ("its time", "耗时"),
    "blocks": ("paged blocks", "分页块数"),
    "wasted": ("empty slots", "空槽位"),
    "kv_len": ("attended length", "注意力长度"),
    "weights_row": ("1 (the weights, one token's K/V)", "1（权重加一个 token 的 K/V）"),
    "read_1": ("read, batch 1", "读取，批大小 1"),
    "tps_1": ("tokens/s, batch 1", "tokens/s，批大小 1"), "read_b": ("read, batch {b}", "读取，批大小 {b}"),
    "tps_b": ("tokens/s, batch {b}", "tokens/s，批大小 {b}"),
    "bandwidth": ("at {bw} GB/s; a decode step reads {w} of weights; from {x} tokens on, one sequence's K/V "
                  "outweighs them", "带宽 {bw} GB/s；每次 decode 读取 {w} 权重；超过 {x} 个 token 后，单个序列的 K/V "
                  "比权重还大"),
    "copy_note": ("at {bw} GB/s, each byte once; blocks of {bs} tokens",
                  "带宽 {bw} GB/s，每字节一次；每块 {bs} 个 token"),
}


def word(key: str, lang: str, **kwargs) -> str:
    en, zh = WORDS[key]
    return (zh if lang == "zh" else en).format(**kwargs)


def title(key: str, lang: str) -> str:
    return word(key, lang)


def _table(head: list[str], rows: list[list[str]]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="memory" cellspacing="0" cellpadding="6" border="1"><tr>{cells}</tr>{body}</table>'


def panel_html(key: str, figures, lang: str) -> str:
    """One memory panel's body (kvviz.lessons.runs.MemoryFigures)."""
    r, ch, roof = figures.report, figures.chapter, figures.roofline
    if key == "kv_per_token":
        rows = [[word(k, lang), *vals] for k, vals in (
            ("layers", (str(r.config.n_layer), str(ch.config.n_layer))),
            ("kv_heads", (str(r.config.n_kv_head), str(ch.config.n_kv_head))),
            ("head_dim", (str(r.config.head_dim), str(ch.config.head_dim))),
            ("dtype", (f"{r.dtype_bytes} B", f"{ch.dtype_bytes} B")),
            ("per_layer", (f"{r.bytes_per_token_per_layer:,} B", f"{ch.bytes_per_token_per_layer:,} B")),
            ("per_token", (f"{r.bytes_per_token:,} B ({fmt_bytes(r.bytes_per_token)})",
                           f"{ch.bytes_per_token:,} B ({fmt_bytes(ch.bytes_per_token)})")))]
        rows += [[f"{fmt_count(f.tokens)} {word('tokens', lang)}", fmt_bytes(f.cache_bytes), fmt_bytes(g.cache_bytes)]
                 for f, g in zip(r.lengths, ch.lengths)]
        return (f"<p><b>{html.escape(r.model)}</b>: {html.escape(word('formula', lang))}</p>"
                + _table([word("shape", lang), word("published", lang), word("chapter", lang)], rows))
    if key == "copies":
        rows = [[fmt_count(f.tokens), fmt_bytes(f.cache_bytes), fmt_bytes(f.step_copy_bytes),
                 fmt_bytes(f.total_copy_bytes), fmt_ms(f.copy_ms), fmt_count(f.blocks), fmt_count(f.wasted_slots)]
                for f in r.lengths]
        note = word("copy_note", lang, bw=fmt_figure(r.bandwidth_gbps), bs=r.block_size)
        return (f"<p>{html.escape(note)}</p>"
                + _table([word(k, lang) for k in ("tokens", "cache", "step_copy", "total_copy", "copy_time", "blocks",
                                                  "wasted")], rows))
    rows = [[word("weights_row", lang) if one.kv_len == 1 else fmt_count(one.kv_len), fmt_bytes(one.bytes_per_step),
             fmt_figure(one.tokens_per_s),
             fmt_bytes(many.bytes_per_step), fmt_figure(many.tokens_per_s)] for one, many in roof.points]
    note = word("bandwidth", lang, bw=fmt_figure(roof.ceiling_gbps), w=fmt_bytes(r.decode_weights_bytes),
                x=fmt_count(r.crossover_tokens))
    head = [word("kv_len", lang), word("read_1", lang), word("tps_1", lang), word("read_b", lang, b=roof.batch),
            word("tps_b", lang, b=roof.batch)]
    return f"<p>{html.escape(note)}</p>" + _table(head, rows)
