"""`kvviz bench`: the chapter's run.py table, honestly: time, work saved, bytes moved, and a real
comparison of every engine's tokens (exit 1 if they differ). Prints only what it measured.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import dataclass

from kvviz.format import fmt_bytes
from kvviz.kernels import ROW as OPENBLAS_ROW
from kvviz.native import ROW as NATIVE_ROW
from kvviz.options import (
    add_output,
    add_repeat,
    add_run_options,
    add_tokens,
    bounded,
    check_against_model,
    check_cache_settings,
)

GRAPH = "static+graph"  # --cuda-graph's row: kvviz.engines.graph, the static engine replayed from a CUDA graph
COMPILED = "static+compiled"  # --compile's row: the same static-shape step compiled by torch.compile
OPENBLAS = OPENBLAS_ROW  # --blas openblas's row: static, its projections through numpy's OpenBLAS
NATIVE = NATIVE_ROW  # --blas native's row: static, each decode step one C call (kvviz.native)


def configure(parser) -> None:
    add_run_options(parser)  # shared with export and shot: kvviz.options, one set of bounds
    add_tokens(parser, [10, 30, 50], many=True, help_text="new-token counts")
    parser.add_argument("--engines", default="naive,concat,static,paged", help="comma list")
    add_repeat(parser, 3)
    parser.add_argument("--trace", choices=("off", "masks", "full"), default="off",
                        help="what each step copies out: nothing, masks, or masks + layer 0 head 0 weights")
    parser.add_argument("--trace-overhead", action="store_true",
                        help="also time tracing off against full tracing, interleaved, at the largest --tokens")
    parser.add_argument("--reference", action="store_true",
                        help="also time, beside each exact engine, a bare decode loop over the same weights and "
                             "cache rule (no engine, trace or sampler), interleaved, tracing off and full, and "
                             "print kvviz/bare at every --tokens")
    parser.add_argument("--cuda-graph", action="store_true",
                        help=f"CUDA only: also run static with its decode step replayed from a CUDA graph, as "
                             f"engine {GRAPH!r} beside eager static (added if not named), same tokens checked")
    parser.add_argument("--compile", action="store_true",
                        help=f"also run static with its static-shape decode step compiled by torch.compile, as "
                             f"engine {COMPILED!r} beside eager static (added if not named), same tokens checked; "
                             f"the compile (tens of seconds on a small CPU) happens in the warm-up, outside the "
                             f"figures")
    parser.add_argument("--kernel", choices=("auto", "torch"), default="auto",
                        help="the engines' decode step: auto (default) runs concat, static and paged with each decode "
                             "step one call of kvviz's C step (kvviz.native, compiled at first use) on a CPU in "
                             "float32, torch's ops elsewhere; torch: torch's ops for every engine")
    parser.add_argument("--blas", choices=("torch", "openblas", "native"), default="torch",
                        help=f"openblas: also run static with every projection through numpy's OpenBLAS "
                             f"(kvviz.kernels), as engine {OPENBLAS!r}; native: also run static with each decode "
                             f"step as one call of kvviz's C kernel (kvviz.native, compiled at first use), as "
                             f"engine {NATIVE!r}; beside static (added if not named), same tokens checked, and "
                             f"print that kernel's own read ceiling; CPU float32 only")
    parser.add_argument("--beside", type=bounded("beside"), default=0, metavar="STEPS",
                        help="CPU, the native step: after the runs, STEPS decode steps of each static and paged "
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
    bytes_read: int = 0  # weights + K/V every step must read, summed (kvviz.wall)
    decode_bytes_read: int = 0  # the same over the decode steps alone (prefill excluded)
    mean_kl: float | None = None  # approximate caches: quality against the first exact engine (kvviz.quality)
    top1_agreement: float | None = None
    first_divergence: int | None = None

    @property
    def read_gbps(self) -> float:
        """The bandwidth achieved: bytes read over the summed step time, in GB/s (10^9 B/s)."""
        from kvviz.wall import achieved_gbps

        return achieved_gbps(self.bytes_read, self.total_ms)

    @property
    def decode_read_gbps(self) -> float:
        """The decode steps' bandwidth alone: their bytes over their summed median step times (prefill, a
        forward over the whole prompt, is left out: the issue's target is decode)."""
        from kvviz.wall import achieved_gbps

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
    import torch

    from kvviz.timing import steady_allocator

    steady_allocator()  # the allocator regime of the app's engine process, too

    from kvviz.config import SamplingConfig
    from kvviz.devices import resolve_device, resolve_dtype
    from kvviz.models.presets import load_model, load_tokenizer, preset_warning

    if args.threads is not None:  # bounds: kvviz.options, at parse time
        torch.set_num_threads(args.threads)
    sampling = SamplingConfig(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    if not args.prompt:
        raise ValueError("the prompt is empty")
    device = resolve_device(args.device)
    warning = preset_warning(args.model)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    tokenizer = load_tokenizer(args.model)
    probe = None if args.dtype == "auto" else args.dtype
    model = load_model(args.model, device, None)
    dtype = resolve_dtype(probe, device, model.cfg.dtype)
    model = model.to(dtype)
    return model, tokenizer, sampling, device


def run_once(model, key, prompt_ids, n, sampling, trace, block_size, kernel="auto", **cache_opts):
    """`cache_opts`: window, sinks, residual of the approximate caches; `kernel`: the engines' decode step
    (auto: kvviz.native's where it applies, torch: torch's)."""
    from kvviz.engines import make_engine

    if key == GRAPH:
        engine = make_engine("static", model, block_size=block_size, cuda_graph=True)
    elif key == COMPILED:
        engine = make_engine("static", model, block_size=block_size, compiled=True)
    elif key == OPENBLAS:
        engine = make_engine("static", model, block_size=block_size, blas="openblas")
    elif key == NATIVE:
        engine = make_engine("static", model, block_size=block_size, blas="native")
    else:
        engine = make_engine(key, model, block_size=block_size, blas=kernel, **cache_opts)
    t0 = time.perf_counter()
    traces = list(engine.generate(prompt_ids, n, sampling, trace))
    wall_ms = (time.perf_counter() - t0) * 1000.0
    return traces, wall_ms


BESIDE = ("static", "paged")  # the rows --beside times: their whole decode step is the C call (concat's copy is not)


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
    for key in keys:  # the caller's: rows in BESIDE that decode on the native step (step_kernels)
        engine = make_engine(key, model, block_size=block_size)
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


def step_kernels(model, engines, kernel: str) -> dict[str, str]:
    """Each row's decode-step kernel: "native" (kvviz.native's C step) or "torch", as the engines choose it."""
    from kvviz import native

    fixed = {GRAPH: "torch", COMPILED: "torch", OPENBLAS: "openblas", NATIVE: "native"}
    return {k: fixed.get(k) or ("native" if kernel == "auto" and native.why_not(model, k) is None else "torch")
            for k in engines}


def kernel_line(model, engines, kernel: str) -> str:
    """One line: which rows decode through which kernel, and why not the native step where it is not."""
    from kvviz import native

    groups: dict[str, list[str]] = {}
    for key, kind in step_kernels(model, engines, kernel).items():
        if kind == "native":
            why = ("each decode step one call of kvviz's C step "
                   f"(kvviz.native, vectors of {native.vector_floats()} floats)")
        elif kind != "torch":
            why = f"{kind}'s kernel"
        elif key == "naive":
            why = "torch's ops: no cache, every step a whole-sequence forward"
        elif kernel == "torch" and key in native.MODES:
            why = "torch's ops (--kernel torch)"
        elif key in native.MODES:
            why = f"torch's ops ({native.why_not(model, key)})"
        else:
            why = "torch's ops: a cache step.c does not read"
        groups.setdefault(why, []).append(key)
    return "decode kernel: " + "; ".join(f"{', '.join(keys)}: {why}" for why, keys in groups.items())


def quality_rows(model, reference, approximate, prompt_ids, n, sampling, row, opts) -> None:
    """Each approximate engine teacher-forced on the reference (exact) engine's tokens: mean KL, top-1
    agreement, and where its own output first parts (kvviz.quality). Untimed runs, after the timed ones."""
    from kvviz.config import TraceOptions
    from kvviz.engines import make_engine
    from kvviz.quality import measure

    if not approximate:
        return
    exact = list(make_engine(reference, model).generate(prompt_ids, n, sampling, TraceOptions(masks=False,
                                                                                              logits=True)))
    for key in approximate:
        eng = make_engine(key, model, **opts)
        own = list(eng.generate(prompt_ids, n, sampling, TraceOptions(masks=False)))
        q = measure(eng, prompt_ids, exact, own)
        c = row[key]
        c.mean_kl, c.top1_agreement, c.first_divergence = q.mean_kl, q.top1_agreement, q.first_divergence
        parts = "never" if q.first_divergence is None else f"at step {q.first_divergence}"
        print(f"  {n} tokens: {key} against {reference}, teacher-forced: mean KL {q.mean_kl:.4g} nats, "
              f"top-1 {100 * q.top1_agreement:.1f}%; its own output parts {parts}")


def check_cuda_graph(device, cfg) -> None:
    """--cuda-graph is refused before any run (one line, exit 2) without CUDA or for a GPT-2 model."""
    from kvviz.engines.graph import check_supported

    if device.type != "cuda":
        raise ValueError(f"--cuda-graph needs a CUDA device, not {device.type}")
    check_supported(cfg)


def memory_line(wall, ceiling, device_type: str) -> str:
    """The bench's memory line: what a decode step reads, the read ceiling it runs against (kvviz.bandwidth,
    at the run's threads), and the copy figure beside it, named as what it is."""
    peak = f", nominal peak {ceiling.peak_gbps:,.0f} GB/s" if ceiling.peak_gbps else ""
    threads = "" if device_type == "cuda" else f" at {ceiling.threads} thread(s)"
    copy = (f"; {device_type} copy bandwidth {ceiling.copy_gbps:,.1f} GB/s (read + written, not a decode bound)"
            if ceiling.copy_gbps else "")
    return (f"memory: a decode step reads {fmt_bytes(wall.decode(1).weights_bytes)} of weights, and more K/V than "
            f"that from {wall.crossover():,} tokens on; {device_type} read ceiling {ceiling.read_gbps:,.1f} GB/s"
            f"{threads} ({ceiling.method} over {fmt_bytes(ceiling.buffer_bytes)}, fastest of {ceiling.bursts}; "
            f"median {ceiling.median_gbps:,.1f}){peak}{copy}")


def run(args) -> int:
    from kvviz.config import TraceOptions
    from kvviz.engines import EXACT_KEYS, parse_engines
    from kvviz.fileio import check_writable

    engines = parse_engines(args.engines)
    if args.json_path:  # before the run: a refused path must not cost a whole benchmark
        check_writable(args.json_path, "--json")
    model, tokenizer, sampling, device = setup(args)
    cfg = model.cfg
    graph_rows = ()
    if args.cuda_graph:
        check_cuda_graph(device, cfg)
        graph_rows = (GRAPH,)
    if args.compile:
        from kvviz.engines.graph import check_supported

        check_supported(cfg)
        graph_rows = (*graph_rows, COMPILED)
    if args.blas == "openblas":
        from kvviz.kernels import check_supported as check_openblas

        check_openblas(model)  # before any run: one line, exit 2
        graph_rows = (*graph_rows, OPENBLAS)
    elif args.blas == "native":
        from kvviz.native import check_supported as check_native

        check_native(model)  # before any run (it compiles the kernel once per machine): one line, exit 2
        graph_rows = (*graph_rows, NATIVE)
    bare = engines  # the engines --reference times a bare loop beside
    engines = engines + (("static",) if graph_rows and "static" not in engines else ()) + graph_rows
    exact_keys = (*EXACT_KEYS, *graph_rows)
    width = max(7, *(len(k) for k in engines))
    prompt_ids = tokenizer.encode(args.prompt)
    for n in args.tokens:
        check_against_model(cfg, len(prompt_ids), n, block_size=args.block_size, top_k=args.top_k)
        check_cache_settings(engines, len(prompt_ids), n, args.window, args.sinks, args.residual)
    opts = dict(window=args.window, sinks=args.sinks, residual=args.residual)
    trace = {"off": TraceOptions(masks=False),
             "masks": TraceOptions(masks=True),
             "full": TraceOptions(masks=True, weights_layer=0, weights_head=0)}[args.trace]
    import torch

    from kvviz.bandwidth import READ_BURSTS, read_ceiling
    from kvviz.wall import WallShape, bytes_read

    dtype_name = str(next(model.parameters()).dtype).replace("torch.", "")
    wall = WallShape.from_config(cfg, dtype_name)
    # probed now, at this run's threads, beside the engines (and cached for the window): a figure cached
    # in another minute is no ceiling for this one (a probe taken under load once put static at 146%)
    ceiling = read_ceiling(device, refresh=True)
    print(f"model {cfg.name}: {cfg.n_layer} layers, {cfg.n_head} heads ({cfg.n_kv_head} KV) of {cfg.head_dim}, "
          f"hidden {cfg.d_model}; device {device.type}, {dtype_name}, {torch.get_num_threads()} thread(s); "
          f"prompt {len(prompt_ids)} tokens; trace {args.trace}; median of {args.repeat}")
    print(memory_line(wall, ceiling, device.type))
    print(kernel_line(model, engines, args.kernel))
    openblas_gbps = native_gbps = None
    if args.blas == "openblas":
        from kvviz.kernels import read_ceiling_openblas

        openblas_gbps = read_ceiling_openblas(torch.get_num_threads())
        print(f"OpenBLAS's own read ceiling (numpy.matmul, the same matrix, both layouts, fastest of "
              f"{READ_BURSTS}): {openblas_gbps:,.1f} GB/s at {torch.get_num_threads()} thread(s); "
              f"{OPENBLAS}'s share below is against it")
    elif args.blas == "native":
        from kvviz.native import read_ceiling_native

        native_gbps = read_ceiling_native(torch.get_num_threads())
        print(f"the native kernel's own read ceiling (its matrix-vector product, the same matrix, both layouts, "
              f"fastest of {READ_BURSTS}): {native_gbps:,.1f} GB/s at {torch.get_num_threads()} thread(s); "
              f"{NATIVE}'s share below is against it")
    for key in engines:  # warm-up: first-call allocations and kernel selection stay out of the figures
        run_once(model, key, prompt_ids, min(4, min(args.tokens)), sampling, trace, args.block_size,
                 args.kernel, **opts)

    # A burst of the probe before every timed run (a CPU's): the ceiling sampled in the same minutes as the
    # runs. Each row's share is against the fastest burst of all (the start's probe included); "of med" is
    # against the median burst taken during the runs, what the memory gave most of the time beside them
    from kvviz.bandwidth import ReadProbe

    probe = ReadProbe(torch.get_num_threads(), ceiling.buffer_bytes) if device.type == "cpu" else None

    def fastest() -> float:
        return max([ceiling.read_gbps, *(probe.bursts if probe else ())])

    def median_burst() -> float:
        return statistics.median(probe.bursts) if probe and probe.bursts else ceiling.median_gbps

    def ceiling_of(key: str) -> float:  # what each row's share is against: its own kernel's ceiling
        return openblas_gbps if key == OPENBLAS else native_gbps if key == NATIVE else fastest()

    def median_share(key: str, c) -> str:  # the rows on the probed kernels; the options' own ceilings: "-"
        return "-" if key in (OPENBLAS, NATIVE) else f"{100 * c.read_gbps / median_burst():.0f}%"

    cells: list[Cell] = []
    identical = True
    print(f"{'new':>5} {'engine':<{width}} {'total ms':>9} {'tok/s':>8} {'speedup':>8} {'K/V proj':>9} "
          f"{'copied':>10} {'written':>10} {'gathered':>10} {'peak cache':>10} {'last10% ms':>10} {'read':>10} "
          f"{'GB/s':>7} {'of ceil':>7} {'of med':>7}")
    for n in args.tokens:
        runs: dict[str, list] = {k: [] for k in engines}
        for _ in range(args.repeat):  # interleaved, so drift on a noisy machine hits every engine alike
            for key in engines:
                if probe is not None:
                    probe.burst()
                runs[key].append(run_once(model, key, prompt_ids, n, sampling, trace, args.block_size, args.kernel,
                                          **opts))
        row: dict[str, Cell] = {}
        for key in engines:
            totals = [sum(t.latency_ms for t in traces) for traces, _ in runs[key]]
            first = runs[key][0][0]
            steps = [statistics.median(r[0][i].latency_ms for r in runs[key]) for i in range(n)]
            row[key] = Cell(
                engine=key, new_tokens=n, total_ms=statistics.median(totals),
                wall_ms=statistics.median(w for _, w in runs[key]), step_ms=steps,
                kv_projections=sum(t.kv_projections for t in first),
                bytes_copied=sum(t.bytes_copied for t in first),
                bytes_written=sum(t.bytes_written for t in first),
                bytes_gathered=sum(t.bytes_gathered for t in first),
                peak_cache_bytes=max(t.cache_bytes for t in first),
                token_ids=[t.token_id for t in first], bytes_read=bytes_read(wall, first),
                decode_bytes_read=bytes_read(wall, first[1:]))
            for traces, _ in runs[key][1:]:  # repeats must agree with themselves too
                if [t.token_id for t in traces] != row[key].token_ids:
                    identical = False
                    print(f"  {key}: repeats produced different tokens", file=sys.stderr)
        ref = row.get("naive")
        for key in engines:
            c = row[key]
            if ref is not None:
                c.speedup_vs_naive = ref.total_ms / c.total_ms
            sp = f"{c.speedup_vs_naive:.2f}x" if c.speedup_vs_naive is not None else "-"
            print(f"{n:>5} {key:<{width}} {c.total_ms:>9.2f} {c.tokens_per_s:>8.1f} {sp:>8} {c.kv_projections:>9} "
                  f"{fmt_bytes(c.bytes_copied):>10} {fmt_bytes(c.bytes_written):>10} "
                  f"{fmt_bytes(c.bytes_gathered):>10} {fmt_bytes(c.peak_cache_bytes):>10} {c.tail_step_ms:>10.3f} "
                  f"{fmt_bytes(c.bytes_read):>10} {c.read_gbps:>7.2f} {100 * c.read_gbps / ceiling_of(key):>6.0f}% "
                  f"{median_share(key, c):>7}")
            cells.append(c)
        exact = [k for k in engines if k in exact_keys]  # the approximate caches may differ: that is their cost
        base = row[exact[0]].token_ids if exact else []
        for key in exact[1:]:
            if row[key].token_ids != base:
                identical = False
                k = next(i for i, (a, b) in enumerate(zip(base, row[key].token_ids)) if a != b)
                print(f"  {n} tokens: {key} differs from {exact[0]} first at step {k}")
        if exact:
            quality_rows(model, exact[0], [k for k in engines if k not in exact_keys], prompt_ids, n, sampling,
                         row, opts)
    if probe is not None and probe.bursts:
        n_bursts = f"{len(probe.bursts)} burst{'s' if len(probe.bursts) != 1 else ''}"
        print(f"read ceiling during the runs ({n_bursts}, one before each run): fastest "
              f"{max(probe.bursts):,.1f} GB/s, median {median_burst():,.1f}; 'of ceil' is each row against the "
              f"fastest burst of all ({fastest():,.1f}, the start's probe included), 'of med' against the median")
    decoding = [c for c in cells if c.new_tokens > 1 and c.engine not in (OPENBLAS, NATIVE)]
    if decoding:
        print("decode steps alone (prefill left out), GB/s, of ceil / of med: " + "; ".join(
            f"{c.engine} at {c.new_tokens} {c.decode_read_gbps:.2f} ({100 * c.decode_read_gbps / fastest():.0f}% / "
            f"{100 * c.decode_read_gbps / median_burst():.0f}%)" for c in decoding))
    beside = []
    if args.beside:
        keys = [k for k in engines if k in BESIDE and step_kernels(model, [k], args.kernel)[k] == "native"]
        if probe is None or not keys:
            print("--beside: no static or paged row decodes on the native step here (CPU float32, the default "
                  "kernel)", file=sys.stderr)
        else:
            n = max(args.tokens)
            beside = beside_probe(model, keys, prompt_ids, n, args.beside, probe, wall, args.block_size)
            print(f"side by side ({beside[0]['steps']} steps and products, in turns, medians): " + "; ".join(
                f"{b['engine']}'s decode step at position {b['position']} {b['step_ms']:.3f} ms, "
                f"{b['step_gbps']:.2f} GB/s, beside the probe's product ({b['probe_layout']}) "
                f"{b['probe_gbps']:.2f} GB/s: {100 * b['share']:.0f}%" for b in beside))
    above = sorted({c.engine for c in cells if c.read_gbps > ceiling_of(c.engine)})
    if above:
        named = ", ".join(f"{k} ({ceiling_of(k):,.1f} GB/s)" for k in above)
        from kvviz.bandwidth import last_level_cache_bytes

        llc = last_level_cache_bytes() if device.type == "cpu" else None
        if llc and wall.weights_bytes <= llc:  # the step's weights can stay in the cache between steps
            why = (f"a step's {fmt_bytes(wall.weights_bytes)} of weights fit in this CPU's {fmt_bytes(llc)} "
                   f"last-level cache, which the probe's {fmt_bytes(ceiling.buffer_bytes)} do not: a model larger "
                   f"than the cache measures against memory")
        else:
            why = "the machine was busier during the probe than during the runs, so rerun for a share"
        print(f"above the read ceiling probed beside the runs: {named}; {why}")
    if len([k for k in engines if k in exact_keys]) > 1:
        which = "" if all(k in exact_keys for k in engines) else " (the exact ones; the approximate: above)"
        print(f"tokens identical across engines{which}: " + ("yes" if identical else "NO"))
    overhead = []
    if args.trace_overhead:
        n = max(args.tokens)
        modes = {"off": TraceOptions(masks=False), "full": TraceOptions(masks=True, weights_layer=0)}
        print(f"tracing cost at {n} tokens (wall time of the whole loop, trace records included; "
              f"median of {args.repeat}; full = masks + layer 0 head 0 weights):")
        for key in engines:
            walls: dict[str, list[float]] = {m: [] for m in modes}
            for _ in range(args.repeat):
                for mode, mode_opts in modes.items():
                    walls[mode].append(run_once(model, key, prompt_ids, n, sampling, mode_opts, args.block_size,
                                                args.kernel, **opts)[1])
            off, full = statistics.median(walls["off"]), statistics.median(walls["full"])
            pct = (full / off - 1.0) * 100.0
            overhead.append(dict(engine=key, new_tokens=n, off_wall_ms=off, full_wall_ms=full, overhead_pct=pct))
            print(f"  {key:<{width}} off {off:9.1f} ms   full {full:9.1f} ms   {pct:+.1f}%")
    reference = []
    if args.reference:
        from kvviz.reference import reference_rows, supports

        if supports(model):
            reference = reference_rows(model, prompt_ids, args.tokens, bare, repeat=args.repeat,
                                       block_size=args.block_size, kernel=args.kernel)
            identical = identical and all(r["same_tokens"] for r in reference)
        else:
            print(f"--reference: no bare loop for {cfg.arch} models", file=sys.stderr)
    if args.json_path:
        from kvviz.fileio import write_output

        doc = {
            "identical": identical, "model": cfg.to_dict(), "device": device.type, "dtype": dtype_name,
            "threads": torch.get_num_threads(), "prompt": args.prompt, "prompt_tokens": len(prompt_ids),
            "repeat": args.repeat, "trace": args.trace, "trace_overhead": overhead, "reference": reference,
            "beside": beside,
            "cuda_graph": args.cuda_graph, "compile": args.compile, "blas": args.blas, "kernel": args.kernel,
            "step_kernels": step_kernels(model, engines, args.kernel),
            "openblas_read_gbps": openblas_gbps, "native_read_gbps": native_gbps,
            "wall": dict(weights_read_bytes=wall.weights_bytes, embed_row_bytes=wall.row_bytes,
                         kv_bytes_per_token=wall.kv_bytes_per_token, crossover_tokens=wall.crossover(),
                         read_gbps=ceiling.read_gbps, read_median_gbps=ceiling.median_gbps,
                         read_during_runs_gbps=list(probe.bursts) if probe else [],
                         read_fastest_gbps=fastest(), read_during_median_gbps=median_burst(),
                         read_threads=ceiling.threads, read_buffer_bytes=ceiling.buffer_bytes,
                         read_method=ceiling.method, copy_gbps=ceiling.copy_gbps, peak_gbps=ceiling.peak_gbps),
            "results": [dict(engine=c.engine, new_tokens=c.new_tokens, total_ms=c.total_ms, wall_ms=c.wall_ms,
                             tokens_per_s=c.tokens_per_s, speedup_vs_naive=c.speedup_vs_naive,
                             kv_projections=c.kv_projections, bytes_copied=c.bytes_copied,
                             bytes_written=c.bytes_written, bytes_gathered=c.bytes_gathered,
                             peak_cache_bytes=c.peak_cache_bytes, token_ids=c.token_ids,
                             tail_step_ms=c.tail_step_ms, bytes_read=c.bytes_read, read_gbps=c.read_gbps,
                             decode_bytes_read=c.decode_bytes_read,
                             decode_read_gbps=c.decode_read_gbps if c.new_tokens > 1 else None,
                             read_share=c.read_gbps / ceiling_of(c.engine),
                             read_share_of_median=(None if c.engine in (OPENBLAS, NATIVE)
                                                   else c.read_gbps / median_burst()),
                             step_ms=c.step_ms, mean_kl=c.mean_kl, top1_agreement=c.top1_agreement,
                             first_divergence=c.first_divergence) for c in cells],
            "cache_settings": dict(window=args.window, sinks=args.sinks, residual=args.residual),
        }
        write_output(args.json_path, json.dumps(doc, indent=1) + "\n", "--json")
    return 0 if identical else 1
