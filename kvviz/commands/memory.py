"""`kvviz memory`: what a model's KV cache costs, printed from kvviz.costs.memory's figures (bytes per token,
what torch.cat copies per step and in total, the copy time at a bandwidth, paged blocks and waste), and
the roofline of a decode step: its bytes, its arithmetic intensity at batch 1 and at batch B, and the
tokens/s a read ceiling allows (this machine's, measured with --device), beside a bench run's measured
tokens/s (--measured). torch is imported only for --device."""
from __future__ import annotations

import json
import math
from dataclasses import asdict

from kvviz.costs.cache_math import MLA_PRESETS, SCORE_BYTES, TABLE_STRATEGIES, mla_figures, strategy_figures
from kvviz.costs.memory import (
    DEFAULT_BANDWIDTH_GBPS,
    DEFAULT_BATCH,
    DEFAULT_BLOCK_SIZE,
    DEFAULT_TOKENS,
    MEMORY_PRESETS,
    MemoryReport,
    Roofline,
    chapter_comparison,
    compute,
    measured_from_bench,
    resolve_config,
    roofline,
)
from kvviz.format import fmt_bytes, fmt_count, fmt_figure, fmt_ms
from kvviz.options import add_cache_options, add_model, bounded


def configure(parser) -> None:
    add_model(parser, "qwen3-0.6b", f"a preset ({', '.join(MEMORY_PRESETS)}, or a model preset such as tiny) "
                                    "or a model folder (default: qwen3-0.6b)")
    parser.add_argument("--tokens", type=bounded("tokens"), nargs="+", default=list(DEFAULT_TOKENS),
                        help="cache lengths n (default: 100 500 1000)")
    parser.add_argument("--dtype", default=None, help="fp32, bf16 or fp16 (default: the config's)")
    parser.add_argument("--bandwidth-gbps", type=bounded("bandwidth_gbps"), default=DEFAULT_BANDWIDTH_GBPS,
                        help="memory bandwidth in GB/s, 1 GB = 10^9 B (default: 2000, an A100's ~2 TB/s)")
    parser.add_argument("--block-size", type=bounded("block_size"), default=DEFAULT_BLOCK_SIZE,
                        help="paged cache block size in tokens (default: 16)")
    parser.add_argument("--prompt-tokens", type=bounded("prompt_tokens"), default=0,
                        help="tokens written by one prefill before decoding (copies nothing; default 0)")
    parser.add_argument("--compare-chapter", action="store_true",
                        help="also print the chapter's copy table in its own convention")
    add_cache_options(parser)  # W, S, R: the strategies table
    parser.add_argument("--mla", choices=tuple(MLA_PRESETS), default=None,
                        help="also print multi-head latent attention's cache for a published shape")
    parser.add_argument("--json", dest="json_path", default=None, help="also write the figures as JSON")
    # the roofline
    parser.add_argument("--device", default=None,
                        help="cpu or cuda: measure that device's read ceiling (kvviz.measure.bandwidth, cached "
                             "per machine and thread count on a CPU); it replaces --bandwidth-gbps in the times and "
                             "the roofline")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads for --device cpu (default: torch's)")
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH,
                        help=f"the roofline's batch B beside batch 1 (default {DEFAULT_BATCH})")
    parser.add_argument("--measured", default=None, metavar="BENCH_JSON",
                        help="a `kvviz bench --json` file: its decode tokens/s beside what its read ceiling allows")


def format_report(report: MemoryReport) -> list[str]:

    c = report.config
    lines = [
        f"model {report.model}: {c.n_layer} layers, {c.n_kv_head} KV heads of {c.head_dim}, "
        f"{report.dtype} ({report.dtype_bytes} B)",
        f"KV per token per layer: 2 x {c.n_kv_head} x {c.head_dim} x {report.dtype_bytes} B = "
        f"{report.bytes_per_token_per_layer:,} B ({fmt_bytes(report.bytes_per_token_per_layer)})",
        f"KV per token, {c.n_layer} layers: {report.bytes_per_token:,} B ({fmt_bytes(report.bytes_per_token)})",
        f"concat copy time at {fmt_figure(report.bandwidth_gbps)} GB/s (1 GB = 10^9 B, each byte once); "
        f"paged blocks of {report.block_size} tokens; sizes in KiB/MiB/GiB (2^10/2^20/2^30 B)"
        + (f"; prompt of {report.prompt_tokens} tokens prefilled" if report.prompt_tokens else ""),
        f"{'tokens':>7} {'KV cache':>10} {'step copy':>10} {'its time':>9} {'total copy':>11} {'its time':>10} "
        f"{'blocks':>7} {'wasted':>7} {'wasted B':>10}",
    ]
    for f in report.lengths:
        lines.append(f"{f.tokens:>7} {fmt_bytes(f.cache_bytes):>10} {fmt_bytes(f.step_copy_bytes):>10} "
                     f"{fmt_ms(f.step_copy_ms):>9} {fmt_bytes(f.total_copy_bytes):>11} {fmt_ms(f.copy_ms):>10} "
                     f"{f.blocks:>7} {f.wasted_slots:>7} {fmt_bytes(f.wasted_bytes):>10}")
    lines.append(crossover_line(report))
    lines += [f"note: {n}" for n in report.notes]
    return lines


def strategy_lines(cfg, tokens, dtype, window: int, sinks: int, residual: int | None,
                   prompt_tokens: int = 0) -> tuple[list[str], list]:
    """Bytes each cache strategy holds at each length (kvviz.costs.cache_math's TABLE_STRATEGIES, the memory
    dialog's columns: the K/V plus the scores kept beside them), and where window stops growing. snapkv cuts a
    prompt of `prompt_tokens` (at most the length) to W once."""
    names = TABLE_STRATEGIES
    rows = [{s: strategy_figures(cfg, s, n, dtype=dtype, window=window, sinks=sinks, residual=residual,
                                 prompt=min(prompt_tokens, n)) for s in names} for n in tokens]
    full, q = rows[0]["full"].bytes_per_token, rows[0]["int8"].bytes_per_token
    lines = [f"strategies: full = every exact cache; window W={window}; sinks S={sinks} of W={window}; tova, h2o, "
             f"knorm hold W tokens chosen by a score (h2o {SCORE_BYTES} B of score per token besides); snapkv cuts "
             f"the prompt to W once; int8 {q:,} B per token ({100 * q / full:.1f}% of {full:,}: 1 B a value + a "
             "4 B scale per KV head)" + (f" + a ring of R={residual} full-precision tokens" if residual else ""),
             f"{'tokens':>7} " + " ".join(f"{s:>10}" for s in names)]
    for n, row in zip(tokens, rows):
        lines.append(f"{n:>7} " + " ".join(f"{fmt_bytes(row[s].total_bytes):>10}" for s in names))
    lines.append(f"window and sinks stop growing at {window:,} tokens: "
                 f"{fmt_bytes(window * full)} however long the run")
    doc = [{s: dict(tokens=f.tokens, held_tokens=f.held_tokens, bytes=f.bytes, score_bytes=f.score_bytes)
            for s, f in row.items()} for row in rows]
    return lines, doc


def mla_lines(name: str, tokens) -> tuple[list[str], dict]:
    shape = MLA_PRESETS[name]
    per, mha = shape.bytes_per_token(), shape.mha_bytes_per_token()
    lines = [f"MLA {name}: (kv_lora_rank {shape.kv_lora_rank} + rope {shape.qk_rope_head_dim}) x "
             f"{per // shape.n_layer // (shape.kv_lora_rank + shape.qk_rope_head_dim)} B x {shape.n_layer} layers = "
             f"{per:,} B per token ({fmt_bytes(per)}); its {shape.n_head} heads uncompressed would hold {mha:,} B "
             f"({100 * per / mha:.1f}%)"]
    lines += [f"{n:>7} {fmt_bytes(mla_figures(shape, n).bytes):>10}" for n in tokens]
    return lines, dict(preset=name, bytes_per_token=per, mha_bytes_per_token=mha)


def crossover_line(report: MemoryReport) -> str:
    return (f"a decode step reads {fmt_bytes(report.decode_weights_bytes)} of weights; from "
            f"{fmt_count(report.crossover_tokens)} tokens on it reads more K/V than weights")


def run(args) -> int:
    if args.prompt_tokens < 0:
        raise ValueError(f"--prompt-tokens must be at least 0, got {args.prompt_tokens}")
    for n in args.tokens:
        if n < 1:
            raise ValueError(f"--tokens must be at least 1, got {n}")
    if not (math.isfinite(args.bandwidth_gbps) and args.bandwidth_gbps > 0):
        raise ValueError(f"--bandwidth-gbps must be a positive number, got {args.bandwidth_gbps}")
    if args.block_size < 1:
        raise ValueError(f"--block-size must be at least 1, got {args.block_size}")
    if args.batch < 1:
        raise ValueError(f"--batch must be at least 1, got {args.batch}")
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be at least 1, got {args.threads}")
    if args.sinks >= args.window:
        raise ValueError(f"--sinks ({args.sinks}) must be fewer than --window ({args.window})")
    if args.json_path:  # before the report: a refused path prints nothing
        from kvviz.fileio import check_writable

        check_writable(args.json_path, "--json")
    measured = measured_from_bench(_read_json(args.measured)) if args.measured else None  # before any probe
    cfg = resolve_config(args.model)
    ceiling_gbps, ceiling_name, probe = _ceiling(args)
    report = compute(cfg, args.tokens, dtype=args.dtype, bandwidth_gbps=ceiling_gbps,
                     block_size=args.block_size, prompt_tokens=args.prompt_tokens)
    for line in format_report(report):
        print(line)
    doc = report.to_dict()
    roof = roofline(cfg, args.tokens, ceiling_gbps=ceiling_gbps, ceiling=ceiling_name, batch=args.batch,
                    dtype=report.dtype)
    print()
    print("\n".join(roofline_lines(roof)))
    doc["roofline"] = roof.to_dict()
    if probe is not None:
        doc["read_ceiling"] = probe
    if measured is not None:
        lines, doc["measured"] = measured_lines(*measured)
        print("\n".join(lines))
    lines, doc["strategies"] = strategy_lines(cfg, args.tokens, report.dtype, args.window, args.sinks, args.residual,
                                               args.prompt_tokens)
    print()
    print("\n".join(lines))
    if args.mla:
        lines, doc["mla"] = mla_lines(args.mla, args.tokens)
        print("\n".join(lines))
    if args.compare_chapter:
        lines = chapter_comparison(cfg, args.tokens, dtype=report.dtype, bandwidth_gbps=ceiling_gbps)
        print()
        for line in lines:
            print(line)
        doc["chapter_comparison"] = lines
    if args.json_path:
        from kvviz.fileio import write_output

        write_output(args.json_path, json.dumps(doc, indent=1) + "\n", "--json")
    return 0


def _ceiling(args) -> tuple[float, str, dict | None]:
    """(GB/s, what it is, the probe's record) for the times and the roofline: --device's read ceiling
    (measured; a CPU's cached per machine and thread count), else --bandwidth-gbps."""
    if args.device is None:
        if args.threads is not None:
            raise ValueError("--threads needs --device cpu")
        return args.bandwidth_gbps, "--bandwidth-gbps", None
    import torch

    from kvviz.measure.bandwidth import read_ceiling
    from kvviz.runtime.devices import resolve_device

    device = resolve_device(args.device)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    c = read_ceiling(device)
    where = device.type if device.type == "cuda" else f"cpu, {c.threads} thread{'s' if c.threads > 1 else ''}"
    copy = f"; copy {c.copy_gbps:,.1f} GB/s (read + written, not a decode bound)" if c.copy_gbps else ""
    print(f"{device.type} read ceiling {c.read_gbps:,.1f} GB/s ({c.method} over {fmt_bytes(c.buffer_bytes)}, "
          f"fastest of {c.bursts}, median {c.median_gbps:,.1f}){copy}; used below in place of --bandwidth-gbps")
    return c.read_gbps, f"read ceiling, {where}", asdict(c)


BENCH_MAX_BYTES = 256 << 20  # eight engines' step times at a million tokens each take some 180 MB
BENCH_MAX_DEPTH = 8  # {"results": [{"reference": {...: [...]}}]}


def _read_json(path: str) -> dict:
    """A `kvviz bench --json` file through kvviz.fileio's reader: a FIFO, a device or a file past
    BENCH_MAX_BYTES is refused in one line at once, never read whole."""
    from kvviz.fileio import read_json

    return read_json(path, max_depth=BENCH_MAX_DEPTH, max_bytes=BENCH_MAX_BYTES, kind="bench file")


def roofline_lines(roof: Roofline) -> list[str]:
    b = roof.batch
    lines = [f"roofline of a decode step at {roof.ceiling_gbps:,.1f} GB/s ({roof.ceiling}), {roof.dtype}: bytes "
             f"read per step (the weights once, K/V per sequence), FLOP per byte read, and the tokens/s that "
             f"ceiling allows (batch {b}: all {b} sequences' tokens)",
             f"{'kv len':>7} {'bytes B=1':>10} {'FLOP/B':>7} {'tok/s':>9}   {f'bytes B={b}':>10} {'FLOP/B':>7} "
             f"{'tok/s':>9}"]
    for one, many in roof.points:
        lines.append(f"{one.kv_len:>7} {fmt_bytes(one.bytes_per_step):>10} {one.intensity:>7.3g} "
                     f"{one.tokens_per_s:>9,.1f}   {fmt_bytes(many.bytes_per_step):>10} {many.intensity:>7.3g} "
                     f"{many.tokens_per_s:>9,.1f}")
    return lines


def measured_lines(rows, gbps: float, kind: str) -> tuple[list[str], list[dict]]:
    lines = [f"measured (the bench file's decode steps, prefill left out) against its {kind}, {gbps:,.1f} GB/s:"]
    doc = []
    for m in rows:
        lines.append(f"  {m.label:<24} {m.tokens_per_s:>9,.1f} tok/s measured, {m.allowed_tokens_per_s:>9,.1f} "
                     f"allowed: {100 * m.share:.0f}% of the ceiling")
        doc.append(dict(asdict(m), share=m.share))
    return lines, doc
