"""`kvviz bench`: the chapter's run.py table, honestly: time, work saved, bytes moved, and a real
comparison of every engine's tokens (exit 1 if they differ). Prints only what it measured.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import dataclass

from kvviz import catalog
from kvviz.format import fmt_bytes
from kvviz.options import (
    add_output,
    add_repeat,
    add_run_options,
    add_tokens,
    bounded,
    check_against_model,
    check_cache_settings,
)


def configure(parser) -> None:
    add_run_options(parser)  # shared with export and shot: kvviz.options, one set of bounds
    add_tokens(parser, [10, 30, 50], many=True, help_text="new-token counts")
    parser.add_argument("--engines", default=",".join(catalog.DEFAULT_ENGINES), help="comma list")
    add_repeat(parser, 3)
    parser.add_argument("--trace", choices=("off", "masks", "full"), default="off",
                        help="what each step copies out: nothing, masks, or masks + layer 0 head 0 weights")
    parser.add_argument("--trace-overhead", action="store_true",
                        help="also time tracing off against full tracing, interleaved, at the largest --tokens")
    parser.add_argument("--reference", action="store_true",
                        help="also time, beside each exact engine, a bare decode loop over the same weights and "
                             "cache rule (no engine, trace or sampler), interleaved, tracing off and full, and "
                             "print kvviz/bare at every --tokens")
    parser.add_argument("--kernels", default=None, metavar="K1,K2",
                        help="a kernel comparison: every engine under each of these kernels, as rows named "
                             "'static · PyTorch', 'static · C step' (replaces --kernel); the speedup column is then "
                             "each row against its engine under the first kernel")
    parser.add_argument("--verbose", action="store_true",
                        help="also print how the read ceiling was probed (method, bursts, median, copy bandwidth)")
    parser.add_argument("--beside", type=bounded("beside"), default=0, metavar="STEPS",
                        help="CPU, --kernel native: after the runs, STEPS decode steps of each static and paged "
                             "row after its last one, in turns with as many products of the read probe, and the "
                             "step's read speed as a share of the probe's in the same seconds (medians; 0: off)")
    add_output(parser, "--json", "json_path", "also write results as JSON (checked before the run)")


@dataclass
class Cell:
    engine: str
    new_tokens: int
    total_ms: float
    wall_ms: float
    step_ms: list[float]
    kv_projections: int
    bytes_copied: int
    bytes_written: int
    bytes_gathered: int
    peak_cache_bytes: int
    token_ids: list[int]
    speedup_vs_naive: float | None = None
    bytes_read: int = 0  # weights + K/V every step must read, summed (kvviz.costs.wall)
    decode_bytes_read: int = 0  # the same over the decode steps alone (prefill excluded)
    mean_kl: float | None = None  # approximate caches: quality against the first exact engine (kvviz.measure.quality)
    top1_agreement: float | None = None
    first_divergence: int | None = None
    cache: str = ""  # the engine the row runs (`engine` is the row's name: "static · C step" in a kernel comparison)
    kernel: str = "torch"  # what ran its decode steps (kvviz.kernels)

    @property
    def read_gbps(self) -> float:
        """The bandwidth achieved: bytes read over the summed step time, in GB/s (10^9 B/s)."""
        from kvviz.costs.wall import achieved_gbps

        return achieved_gbps(self.bytes_read, self.total_ms)

    @property
    def decode_read_gbps(self) -> float:
        """The decode steps' bandwidth alone: their bytes over their summed median step times (prefill, a
        forward over the whole prompt, is left out: the share of the read ceiling is a decode step's)."""
        from kvviz.costs.wall import achieved_gbps

        return achieved_gbps(self.decode_bytes_read, sum(self.step_ms[1:]))

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / (self.total_ms / 1000.0)

    @property
    def tail_step_ms(self) -> float:
        """Median step latency over the last 10% of steps (at least one)."""
        n = max(1, len(self.step_ms) // 10)
        return statistics.median(self.step_ms[-n:])


def setup(args):
    """Validate the shared arguments and return (model, tokenizer, sampling, device)."""
    from kvviz.config import SamplingConfig
    from kvviz.runtime.loading import load_for_run

    sampling = SamplingConfig(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    if not args.prompt:
        raise ValueError("the prompt is empty")
    model, tokenizer, device = load_for_run(args.model, args.device, args.dtype, args.threads)
    return model, tokenizer, sampling, device


def run_once(model, key, prompt_ids, n, sampling, trace, block_size, kernel="torch", **cache_opts):
    """`cache_opts`: window, sinks, residual of the approximate caches; `kernel`: the decode step's (kvviz.kernels)."""
    from kvviz.engines import make_engine

    engine = make_engine(key, model, block_size=block_size, kernel=kernel, **cache_opts)
    t0 = time.perf_counter()
    traces = list(engine.generate(prompt_ids, n, sampling, trace))
    wall_ms = (time.perf_counter() - t0) * 1000.0
    return traces, wall_ms


@dataclass(frozen=True)
class Row:
    """One row of the table: an engine under a kernel, named by the engine alone in a one-kernel run."""
    name: str
    engine: str
    kernel: str


def rows_of(engines, kernels) -> list[Row]:
    """Each engine under each kernel, an engine's kernels side by side ("static · PyTorch", "static · C step")."""
    from kvviz.kernels import row_name

    return [Row(e if len(kernels) == 1 else row_name(e, k), e, k) for e in engines for k in kernels]


BESIDE = ("static", "paged")  # the engines --beside times under the C step: their whole decode step is the C call


def beside_probe(model, keys, prompt_ids, n: int, steps: int, probe, wall, block_size: int) -> list[dict]:
    """The decode step against the read probe in the same seconds: for each of `keys` (static or paged rows
    whose decode steps run on kvviz.native), a run of `n` tokens, then `steps` timed repeats of the step after its
    last one (position prompt + n - 1, the K/V of every earlier position read; nothing committed) and as
    many products of the probe's matrix in each of the native kernel's two layouts, in turns of three steps
    and three products a layout. The first of each three is not timed: it follows the other kind, where a
    step in a run follows a step (and a product a product), each finding what the one before left in the
    last-level cache. Medians of both, and the step's share of the faster layout's: a ratio of two figures
    taken side by side, which the machine's drift (a burst before each run can miss the run's minutes by 30%)
    does not reach."""
    from kvviz import native
    from kvviz.config import TraceOptions
    from kvviz.engines import make_engine

    rows = []
    for key in keys:  # the caller's: engines in BESIDE, run on the native step
        engine = make_engine(key, model, block_size=block_size, kernel="native")
        traces = list(engine.generate(prompt_ids, n, trace=TraceOptions(masks=False)))
        cache, step = engine.cache, engine.native
        cache.reserve(1)  # the next position's slot (paged: its block); never committed
        pos, token = cache.seq_len, traces[-1].token_id
        nbytes = wall.decode(pos + 1).total_bytes
        step_s: list[float] = []
        layouts: dict[str, list[float]] = {}
        for _ in range(-(-steps // 2)):  # turns of three, the last two of each timed
            for i in range(3):
                t0 = time.perf_counter()
                step(token, pos)
                if i:
                    step_s.append(time.perf_counter() - t0)
            for name, secs in native.gemv_seconds(probe.matrix, probe.threads, 3, warm=False).items():
                layouts.setdefault(name, []).extend(probe.nbytes / t / 1e9 for t in secs[1:])
        layout = max(layouts, key=lambda k: statistics.median(layouts[k]))
        step_gbps = nbytes / statistics.median(step_s) / 1e9
        probe_gbps = statistics.median(layouts[layout])
        rows.append(dict(engine=key, position=pos, steps=len(step_s), step_bytes=nbytes,
                         step_ms=1000 * statistics.median(step_s), step_gbps=step_gbps, probe_layout=layout,
                         probe_gbps=probe_gbps, share=step_gbps / probe_gbps))
    return rows


def quality_rows(model, reference, approximate, prompt_ids, n, sampling, row, opts, kernel: str) -> None:
    """Each approximate engine teacher-forced on the reference (exact) engine's tokens: mean KL, top-1
    agreement, and where its own output first parts (kvviz.measure.quality). Untimed runs, after the timed ones."""
    from kvviz.config import TraceOptions
    from kvviz.engines import make_engine
    from kvviz.measure.quality import measure

    if not approximate:
        return
    exact = list(make_engine(reference.engine, model, kernel=kernel).generate(
        prompt_ids, n, sampling, TraceOptions(masks=False, logits=True)))
    for r in approximate:
        eng = make_engine(r.engine, model, kernel=kernel, **opts)
        own = list(eng.generate(prompt_ids, n, sampling, TraceOptions(masks=False)))
        q = measure(eng, prompt_ids, exact, own)
        c = row[r.name]
        c.mean_kl, c.top1_agreement, c.first_divergence = q.mean_kl, q.top1_agreement, q.first_divergence
        parts = "never" if q.first_divergence is None else f"at step {q.first_divergence}"
        print(f"  {n} tokens: {r.name} against {reference.name}, teacher-forced: mean KL {q.mean_kl:.4g} nats, "
              f"top-1 {100 * q.top1_agreement:.1f}%; its own output parts {parts}")


def memory_line(wall, ceiling, device_type: str, llc: int | None) -> str:
    """The bench's one line about the machine: the read ceiling a decode step runs against (kvviz.measure.bandwidth, at
    the run's threads), the CPU's last-level cache, and what a decode step reads."""
    threads = "" if device_type == "cuda" else f" at {ceiling.threads} thread{'s' if ceiling.threads != 1 else ''}"
    cache = f"; last-level cache {fmt_bytes(llc)}" if llc else ""
    return (f"{device_type} read ceiling {ceiling.read_gbps:,.1f} GB/s{threads}{cache}; a decode step reads "
            f"{fmt_bytes(wall.decode(1).weights_bytes)} of weights, and more K/V than that from "
            f"{wall.crossover():,} tokens on")


def probe_line(ceiling, device_type: str) -> str:
    """--verbose: how the read ceiling was probed, and the copy figure beside it, named as what it is."""
    peak = f", nominal peak {ceiling.peak_gbps:,.0f} GB/s" if ceiling.peak_gbps else ""
    copy = (f"; {device_type} copy bandwidth {ceiling.copy_gbps:,.1f} GB/s (read + written, not a decode bound)"
            if ceiling.copy_gbps else "")
    return (f"read probe: {ceiling.method} over {fmt_bytes(ceiling.buffer_bytes)}, fastest of {ceiling.bursts}, "
            f"median {ceiling.median_gbps:,.1f} GB/s{peak}{copy}")


def kernel_line(kernels, engines) -> str:
    """One line: what runs every row's decode steps."""
    from kvviz.kernels import KERNELS

    named = "; ".join(f"{KERNELS[k].label} ({k}): {KERNELS[k].help}" for k in kernels)
    return f"decode kernel{'s' if len(kernels) > 1 else ''}, every engine alike: {named}"


def run(args) -> int:
    from kvviz.config import TraceOptions
    from kvviz.engines import EXACT_KEYS, parse_engines
    from kvviz.fileio import check_writable
    from kvviz.kernels import check_engines, check_model, parse_kernels

    engines = parse_engines(args.engines)
    kernels = parse_kernels(args.kernels) if args.kernels else (args.kernel,)
    for kernel in kernels:  # before the model loads: one line, exit 2
        check_engines(kernel, engines)
    if args.json_path:  # before the run: a refused path must not cost a whole benchmark
        check_writable(args.json_path, "--json")
    model, tokenizer, sampling, device = setup(args)
    cfg = model.cfg
    for kernel in kernels:  # the model and device (it compiles the C step once per machine): one line, exit 2
        check_model(kernel, model)
    rows = rows_of(engines, kernels)
    exact_rows = [r for r in rows if r.engine in EXACT_KEYS]
    width = max(7, *(len(r.name) for r in rows))
    prompt_ids = tokenizer.encode(args.prompt)
    for n in args.tokens:
        check_against_model(cfg, len(prompt_ids), n, block_size=args.block_size, top_k=args.top_k)
        check_cache_settings(engines, len(prompt_ids), n, args.window, args.sinks, args.residual,
                             args.spec_k, args.rollback)
    opts = dict(window=args.window, sinks=args.sinks, residual=args.residual, spec_k=args.spec_k,
                rollback=args.rollback)
    trace = {"off": TraceOptions(masks=False),
             "masks": TraceOptions(masks=True),
             "full": TraceOptions(masks=True, weights_layer=0, weights_head=0)}[args.trace]
    import torch

    from kvviz.costs.wall import WallShape, bytes_read
    from kvviz.measure.bandwidth import last_level_cache_bytes, read_ceiling

    dtype_name = str(next(model.parameters()).dtype).replace("torch.", "")
    wall = WallShape.from_config(cfg, dtype_name)
    # probed now, at this run's threads, beside the engines (and cached for the window): a figure cached
    # in another minute is no ceiling for this one (a probe taken under load once put static at 146%)
    ceiling = read_ceiling(device, refresh=True)
    llc = last_level_cache_bytes() if device.type == "cpu" else None
    print(f"model {cfg.name}: {cfg.n_layer} layers, {cfg.n_head} heads ({cfg.n_kv_head} KV) of {cfg.head_dim}, "
          f"hidden {cfg.d_model}; device {device.type}, {dtype_name}, {torch.get_num_threads()} thread(s); "
          f"prompt {len(prompt_ids)} tokens; trace {args.trace}; median of {args.repeat}")
    print(memory_line(wall, ceiling, device.type, llc))
    if args.verbose:
        print(probe_line(ceiling, device.type))
    print(kernel_line(kernels, engines))
    for r in rows:  # warm-up: first-call allocations, kernel selection and any compile stay out of the figures
        run_once(model, r.engine, prompt_ids, min(4, min(args.tokens)), sampling, trace, args.block_size,
                 r.kernel, **opts)

    # A burst of the probe before every timed run (a CPU's): the ceiling sampled in the same minutes as the
    # runs. Each row's share is against the fastest burst of all (the start's probe included): the read
    # ceiling is the machine's, whatever kernel a row runs; "of med" is against the median burst taken during
    # the runs, what the memory gave most of the time beside them
    from kvviz.measure.bandwidth import ReadProbe

    probe = ReadProbe(torch.get_num_threads(), ceiling.buffer_bytes) if device.type == "cpu" else None

    def fastest() -> float:
        return max([ceiling.read_gbps, *(probe.bursts if probe else ())])

    def median_burst() -> float:
        return statistics.median(probe.bursts) if probe and probe.bursts else ceiling.median_gbps

    compare_kernels = len(kernels) > 1
    versus = f"vs {rows[0].kernel}" if compare_kernels else "speedup"
    cells: list[Cell] = []
    identical = True
    print(f"{'new':>5} {'engine':<{width}} {'total ms':>9} {'tok/s':>8} {versus:>8} {'K/V proj':>9} "
          f"{'copied':>10} {'written':>10} {'gathered':>10} {'peak cache':>10} {'last10% ms':>10} {'read':>10} "
          f"{'GB/s':>7} {'of ceil':>7} {'of med':>7}")
    for n in args.tokens:
        runs: dict[str, list] = {r.name: [] for r in rows}
        for _ in range(args.repeat):  # interleaved, so drift on a noisy machine hits every row alike
            for r in rows:
                if probe is not None:
                    probe.burst()
                runs[r.name].append(run_once(model, r.engine, prompt_ids, n, sampling, trace, args.block_size,
                                             r.kernel, **opts))
        row: dict[str, Cell] = {}
        for r in rows:
            key = r.name
            totals = [sum(t.latency_ms for t in traces) for traces, _ in runs[key]]
            first = runs[key][0][0]
            steps = [statistics.median(x[0][i].latency_ms for x in runs[key]) for i in range(n)]
            row[key] = Cell(
                engine=key, new_tokens=n, total_ms=statistics.median(totals),
                wall_ms=statistics.median(w for _, w in runs[key]), step_ms=steps,
                kv_projections=sum(t.kv_projections for t in first),
                bytes_copied=sum(t.bytes_copied for t in first),
                bytes_written=sum(t.bytes_written for t in first),
                bytes_gathered=sum(t.bytes_gathered for t in first),
                peak_cache_bytes=max(t.cache_bytes for t in first),
                token_ids=[t.token_id for t in first], bytes_read=bytes_read(wall, first),
                decode_bytes_read=bytes_read(wall, first[1:]), cache=r.engine, kernel=r.kernel)
            for traces, _ in runs[key][1:]:  # repeats must agree with themselves too
                if [t.token_id for t in traces] != row[key].token_ids:
                    identical = False
                    print(f"  {key}: repeats produced different tokens", file=sys.stderr)
        for r in rows:
            c = row[r.name]
            # one kernel: each row against naive; a kernel comparison: each against its engine under the first kernel
            ref = row.get(rows_of([r.engine], kernels)[0].name if compare_kernels else "naive")
            if ref is not None:
                c.speedup_vs_naive = ref.total_ms / c.total_ms
            sp = f"{c.speedup_vs_naive:.2f}x" if c.speedup_vs_naive is not None else "-"
            print(f"{n:>5} {r.name:<{width}} {c.total_ms:>9.2f} {c.tokens_per_s:>8.1f} {sp:>8} {c.kv_projections:>9} "
                  f"{fmt_bytes(c.bytes_copied):>10} {fmt_bytes(c.bytes_written):>10} "
                  f"{fmt_bytes(c.bytes_gathered):>10} {fmt_bytes(c.peak_cache_bytes):>10} {c.tail_step_ms:>10.3f} "
                  f"{fmt_bytes(c.bytes_read):>10} {c.read_gbps:>7.2f} {100 * c.read_gbps / fastest():>6.0f}% "
                  f"{100 * c.read_gbps / median_burst():>6.0f}%")
            cells.append(c)
        # the approximate caches may differ: that is their cost
        base = row[exact_rows[0].name].token_ids if exact_rows else []
        for r in exact_rows[1:]:
            if row[r.name].token_ids != base:
                identical = False
                k = next(i for i, (a, b) in enumerate(zip(base, row[r.name].token_ids)) if a != b)
                print(f"  {n} tokens: {r.name} differs from {exact_rows[0].name} first at step {k}")
        for kernel in kernels:
            exact = [r for r in exact_rows if r.kernel == kernel]
            if exact:
                quality_rows(model, exact[0], [r for r in rows if r.kernel == kernel and r not in exact_rows],
                             prompt_ids, n, sampling, row, opts, kernel)
    if probe is not None and probe.bursts and args.verbose:
        n_bursts = f"{len(probe.bursts)} burst{'s' if len(probe.bursts) != 1 else ''}"
        print(f"read ceiling during the runs ({n_bursts}, one before each run): fastest "
              f"{max(probe.bursts):,.1f} GB/s, median {median_burst():,.1f}; 'of ceil' is each row against the "
              f"fastest burst of all ({fastest():,.1f}, the start's probe included), 'of med' against the median")
    decoding = [c for c in cells if c.new_tokens > 1]
    if decoding:
        print("decode steps alone (prefill left out), GB/s, of ceil / of med: " + "; ".join(
            f"{c.engine} at {c.new_tokens} {c.decode_read_gbps:.2f} ({100 * c.decode_read_gbps / fastest():.0f}% / "
            f"{100 * c.decode_read_gbps / median_burst():.0f}%)" for c in decoding))
    beside = []
    if args.beside:
        keys = [e for e in engines if e in BESIDE] if "native" in kernels else []
        if probe is None or not keys:
            print("--beside: no static or paged row decodes on the C step here (a CPU, --kernel native)",
                  file=sys.stderr)
        else:
            n = max(args.tokens)
            beside = beside_probe(model, keys, prompt_ids, n, args.beside, probe, wall, args.block_size)
            print(f"side by side ({beside[0]['steps']} steps and products, in turns, medians): " + "; ".join(
                f"{b['engine']}'s decode step at position {b['position']} {b['step_ms']:.3f} ms, "
                f"{b['step_gbps']:.2f} GB/s, beside the probe's product ({b['probe_layout']}) "
                f"{b['probe_gbps']:.2f} GB/s: {100 * b['share']:.0f}%" for b in beside))
    above = sorted({c.engine for c in cells if c.read_gbps > fastest()})
    if above:
        if llc and wall.weights_bytes <= llc:  # the step's weights can stay in the cache between steps
            why = (f"a step's {fmt_bytes(wall.weights_bytes)} of weights fit in this CPU's {fmt_bytes(llc)} "
                   f"last-level cache, which the probe's {fmt_bytes(ceiling.buffer_bytes)} do not: a model larger "
                   f"than the cache measures against memory")
        else:
            why = "the machine was busier during the probe than during the runs, so rerun for a share"
        print(f"above the read ceiling ({fastest():,.1f} GB/s) probed beside the runs: {', '.join(above)}; {why}")
    if len(exact_rows) > 1:
        which = "" if len(exact_rows) == len(rows) else " (the exact ones; the approximate: above)"
        print(f"tokens identical across engines{' and kernels' if compare_kernels else ''}{which}: "
              + ("yes" if identical else "NO"))
    overhead = []
    if args.trace_overhead:
        n = max(args.tokens)
        modes = {"off": TraceOptions(masks=False), "full": TraceOptions(masks=True, weights_layer=0)}
        print(f"tracing cost at {n} tokens (wall time of the whole loop, trace records included; "
              f"median of {args.repeat}; full = masks + layer 0 head 0 weights):")
        for r in rows:
            walls: dict[str, list[float]] = {m: [] for m in modes}
            for _ in range(args.repeat):
                for mode, mode_opts in modes.items():
                    walls[mode].append(run_once(model, r.engine, prompt_ids, n, sampling, mode_opts, args.block_size,
                                                r.kernel, **opts)[1])
            off, full = statistics.median(walls["off"]), statistics.median(walls["full"])
            pct = (full / off - 1.0) * 100.0
            overhead.append(dict(engine=r.name, new_tokens=n, off_wall_ms=off, full_wall_ms=full, overhead_pct=pct))
            print(f"  {r.name:<{width}} off {off:9.1f} ms   full {full:9.1f} ms   {pct:+.1f}%")
    reference = []
    if args.reference:
        from kvviz.measure.reference import BARE_KERNELS, reference_rows, supports

        if not supports(model):
            print(f"--reference: no bare loop for {cfg.arch} models", file=sys.stderr)
        for kernel in kernels if supports(model) else ():
            if kernel not in BARE_KERNELS:
                print(f"--reference: no bare loop on the {kernel} kernel (the bare loop runs "
                      f"{', '.join(BARE_KERNELS)})", file=sys.stderr)
                continue
            got = reference_rows(model, prompt_ids, args.tokens, engines, repeat=args.repeat,
                                 block_size=args.block_size, kernel=kernel)
            reference += [dict(r, kernel=kernel) for r in got]
        identical = identical and all(r["same_tokens"] for r in reference)
    if args.json_path:
        from kvviz.fileio import write_output

        doc = {
            "identical": identical, "model": cfg.to_dict(), "device": device.type, "dtype": dtype_name,
            "threads": torch.get_num_threads(), "prompt": args.prompt, "prompt_tokens": len(prompt_ids),
            "repeat": args.repeat, "trace": args.trace, "trace_overhead": overhead, "reference": reference,
            "beside": beside, "kernels": list(kernels),
            "wall": dict(weights_read_bytes=wall.weights_bytes, embed_row_bytes=wall.row_bytes,
                         kv_bytes_per_token=wall.kv_bytes_per_token, crossover_tokens=wall.crossover(),
                         read_gbps=ceiling.read_gbps, read_median_gbps=ceiling.median_gbps,
                         read_during_runs_gbps=list(probe.bursts) if probe else [],
                         read_fastest_gbps=fastest(), read_during_median_gbps=median_burst(),
                         read_threads=ceiling.threads, read_buffer_bytes=ceiling.buffer_bytes,
                         read_method=ceiling.method, copy_gbps=ceiling.copy_gbps, peak_gbps=ceiling.peak_gbps,
                         last_level_cache_bytes=llc),
            "results": [dict(row=c.engine, engine=c.cache, kernel=c.kernel, new_tokens=c.new_tokens,
                             total_ms=c.total_ms, wall_ms=c.wall_ms,
                             tokens_per_s=c.tokens_per_s, speedup=c.speedup_vs_naive,
                             speedup_against="the first kernel" if compare_kernels else "naive",
                             kv_projections=c.kv_projections, bytes_copied=c.bytes_copied,
                             bytes_written=c.bytes_written, bytes_gathered=c.bytes_gathered,
                             peak_cache_bytes=c.peak_cache_bytes, token_ids=c.token_ids,
                             tail_step_ms=c.tail_step_ms, bytes_read=c.bytes_read, read_gbps=c.read_gbps,
                             decode_bytes_read=c.decode_bytes_read,
                             decode_read_gbps=c.decode_read_gbps if c.new_tokens > 1 else None,
                             read_share=c.read_gbps / fastest(), read_share_of_median=c.read_gbps / median_burst(),
                             step_ms=c.step_ms, mean_kl=c.mean_kl, top1_agreement=c.top1_agreement,
                             first_divergence=c.first_divergence) for c in cells],
            "cache_settings": dict(window=args.window, sinks=args.sinks, residual=args.residual,
                                   spec_k=args.spec_k, rollback=args.rollback),
        }
        write_output(args.json_path, json.dumps(doc, indent=1) + "\n", "--json")
    return 0 if identical else 1
