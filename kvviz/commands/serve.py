"""`kvviz serve`: many requests through one model under each scheduler (kvviz.serving), measured: steps,
time, throughput, TTFT/TPOT, padding and idle waste, the pool's use, preemptions and prefix reuse; and
every request's tokens under every scheduler checked against its own solo run (kvviz.serving.solo: the request
alone through the static engine), one line per scheduler (exit 1 if any differs).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from kvviz import catalog
from kvviz.format import fmt_bytes
from kvviz.options import add_kernel, add_output, add_seed, add_threads, bounded

SCHEDULER_KEYS = ",".join(catalog.scheduler_keys())  # every scheduler, in the catalog's order


def configure(parser) -> None:
    parser.add_argument("--workload", default=None, metavar="PRESET|FILE",
                        help="course-batch, shared-prefix, chat, random:N[:SEED], or a JSON file "
                             '{"requests": [{"prompt": "...", "new_tokens": 12, "arrival": 0}, ...]}')
    parser.add_argument("--schedulers", default=SCHEDULER_KEYS, help=f"comma list (default {SCHEDULER_KEYS})")
    parser.add_argument("--model", default="tiny",
                        help="preset name, model folder, or cached hub id ORG/NAME[@REV] (default: tiny)")
    parser.add_argument("--device", default="auto", help="auto (CUDA, then MPS, then CPU), cpu, cuda, mps")
    parser.add_argument("--dtype", default="auto", help="fp32, bf16, fp16 (default: bf16 on CUDA, else the model's)")
    parser.add_argument("--max-batch", type=bounded("batch_size"), default=8, metavar="N",
                        help="most requests running at once (default 8)")
    parser.add_argument("--blocks", type=bounded("blocks"), default=None, metavar="N",
                        help="blocks in the pool of paged, prefix and reserve (default: room for --max-batch of "
                             "the largest requests; the other schedulers always get that)")
    parser.add_argument("--block-size", type=bounded("block_size"), default=16, metavar="N",
                        help="tokens per block (default 16)")
    parser.add_argument("--token-budget", type=bounded("token_budget"), default=None, metavar="N",
                        help="chunked: tokens one step may compute, at least one block (default 64)")
    add_seed(parser, "sampling seed: request i samples with seed + i unless the workload gives its own")
    parser.add_argument("--temperature", type=bounded("temperature"), default=0.0, help="0 = greedy (default)")
    parser.add_argument("--top-k", type=bounded("top_k"), default=None)
    parser.add_argument("--top-p", type=bounded("top_p"), default=None)
    add_threads(parser)
    add_kernel(parser)
    parser.add_argument("--against", choices=("vllm",), default=None,
                        help="also run the workload through a real vLLM, scheduler by scheduler (continuous, "
                             "chunked, paged, prefix), and compare request by request (docs/vllm.md)")
    parser.add_argument("--vllm-python", default=None, metavar="PYTHON",
                        help="the interpreter with vLLM installed (default: this one, else $KVVIZ_VLLM_PYTHON)")
    add_output(parser, "--json", "json_path", "also write every run (figures, tokens, per-step records) as JSON")
    parser.add_argument("--decode-sweep", type=_batch_list, default=None, metavar="B,B,...",
                        help="instead of a workload: decode throughput at these batch sizes (B requests of 32 "
                             "tokens decoding together), with the bytes each step reads")


def _batch_list(text: str) -> tuple[int, ...]:
    parse = bounded("batch_size")
    items = tuple(parse(t.strip()) for t in text.split(",") if t.strip())
    if not items:
        raise argparse.ArgumentTypeError("no batch sizes given")
    return items


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def run(args) -> int:
    from kvviz.fileio import check_writable
    from kvviz.serving.engine import ample_blocks, blocks_word, check_workload, parse_schedulers, serve, tokenize
    from kvviz.serving.record import SchedulerSettings, runs_to_dict
    from kvviz.serving.workload import load_workload

    if (args.workload is None) == (args.decode_sweep is None):
        raise ValueError("give --workload PRESET|FILE, or --decode-sweep B,B,... (one of them)")
    schedulers = parse_schedulers(args.schedulers)
    if args.kernel != "torch":  # before the model loads: one line, exit 2
        raise ValueError(f"kvviz serve's batched step runs on PyTorch's ops only (--kernel torch), not "
                         f"--kernel {args.kernel}: the other kernels decode one request at a time")
    if args.against:
        from kvviz.peers.vllm import COMPARABLE, find_vllm_python

        find_vllm_python(args.vllm_python)  # vLLM missing: one line saying how to install it, exit 2
        if not set(schedulers) & set(COMPARABLE):
            raise ValueError(f"--against vllm compares {', '.join(COMPARABLE)}; none of them was asked for")
    workload = load_workload(args.workload) if args.workload is not None else None
    if args.json_path:
        check_writable(args.json_path, "--json")
    from kvviz.commands.bench import setup
    from kvviz.serving.model_runner import check_supported

    # bench's setup validates and loads the shared options; serve has no --prompt of its own
    model, tokenizer, _, device = setup(argparse.Namespace(**vars(args), prompt=args.workload or "sweep"))
    check_supported(model)
    if workload is None:
        return sweep(args, model, tokenizer, device)
    cfg = model.cfg
    prompts = tokenize(workload, tokenizer)
    settings = SchedulerSettings(max_batch=args.max_batch, blocks=args.blocks or 1, block_size=args.block_size,
                                 token_budget=args.token_budget, temperature=args.temperature, top_k=args.top_k,
                                 top_p=args.top_p, seed=args.seed)  # blocks: see below
    if args.block_size > cfg.max_seq_len:
        raise ValueError(f"block size {args.block_size} is larger than the model's context of {cfg.max_seq_len}")
    if args.top_k is not None and args.top_k > cfg.vocab_size:
        raise ValueError(f"top-k {args.top_k} is more than the model's vocabulary of {cfg.vocab_size}")
    if args.blocks is None:
        settings = dataclasses.replace(settings, blocks=ample_blocks(prompts, workload, settings))
    check_workload(cfg, prompts, workload, settings, schedulers)
    import torch

    from kvviz.measure.bandwidth import read_ceiling

    ceiling = read_ceiling(device)
    dtype_name = str(next(model.parameters()).dtype).replace("torch.", "")
    n_new = sum(r.new_tokens for r in workload.requests)
    print(f"model {cfg.name}: {cfg.n_layer} layers, {cfg.n_head} heads ({cfg.n_kv_head} KV) of {cfg.head_dim}; "
          f"device {device.type}, {dtype_name}, {torch.get_num_threads()} thread(s); {ceiling_words(ceiling, device)}")
    print(f"workload {workload.name}: {len(prompts)} requests, {sum(map(len, prompts)):,} prompt tokens, "
          f"{n_new:,} new tokens; max batch {settings.max_batch}, blocks of {settings.block_size}, pool "
          f"{blocks_word(settings.blocks)} for paged/prefix/reserve")
    serve(model, tokenizer, workload, schedulers[0], settings)  # warm-up: first-call allocations out of the figures
    runs = []
    head = (f"{'scheduler':<10} {'steps':>5} {'wall ms':>9} {'tok/s':>8} {'TTFT ms med/p90':>16} "
            f"{'TPOT ms med/p90':>16} {'padding':>12} {'idle':>12} {'pool mean/peak':>16} {'preempt':>7} "
            f"{'hit rate':>8} {'prefill computed/no reuse':>26} {'GB/s':>6} {'longest step ms':>15}")
    print(head)
    for key in schedulers:
        r = serve(model, tokenizer, workload, key, settings)
        runs.append(r)
        s = r.summary()
        read = sum(st.bytes_read for st in r.steps)
        gbps = read / (s.wall_ms * 1e-3) / 1e9 if s.wall_ms > 0 else float("nan")
        print(f"{key:<10} {s.steps:>5} {s.wall_ms:>9.1f} {s.tokens_per_s:>8.1f} "
              f"{_ms(s.ttft_ms_median) + '/' + _ms(s.ttft_ms_p90):>16} "
              f"{_ms(s.tpot_ms_median) + '/' + _ms(s.tpot_ms_p90):>16} "
              f"{f'{s.padding_slots}/{s.prefill_slots} {100 * s.padding_share:.0f}%':>12} "
              f"{f'{s.idle_slots}/{s.generation_slots} {100 * s.idle_share:.0f}%':>12} "
              f"{f'{s.pool_mean_blocks:.1f}/{s.pool_peak_blocks} of {s.pool_blocks}':>16} {s.preemptions:>7} "
              f"{100 * s.prefix_hit_rate:>7.1f}% {f'{s.prefill_computed:,}/{s.prompt_tokens:,}':>26} {gbps:>6.2f} "
              f"{max(st.latency_ms for st in r.steps):>15.1f}")  # the longest stall of everyone's decode
    if "reserve" in schedulers and "paged" in schedulers:
        res, pag = (next(r for r in runs if r.scheduler == k).summary() for k in ("reserve", "paged"))
        print(f"one pool of {blocks_word(settings.blocks)}: paged ran up to {pag.peak_running} requests at once, "
              f"reserve {res.peak_running} (reserve held up to {res.peak_reserved_bytes:,} B for "
              f"{res.peak_used_bytes:,} B written)")
    import time

    from kvviz.serving.record import solo_checks
    from kvviz.serving.solo import run_with_solo, solo_runs

    t0 = time.perf_counter()
    solo = solo_runs(model, prompts, workload, settings)
    solo_s = time.perf_counter() - t0
    runs = [run_with_solo(r, solo) for r in runs]
    checks = {r.scheduler: solo_checks(r) for r in runs}
    for line in solo_lines(checks):
        print(line)
    serve_s = sum(r.summary().wall_ms for r in runs) / 1000.0
    print(f"solo runs: {len(solo)} requests alone through the static engine in {solo_s:.2f} s (the "
          f"{len(runs)} serve run{'s' if len(runs) != 1 else ''} took {serve_s:.2f} s)")
    identical = all(c.equal for cs in checks.values() for c in cs)
    if not identical:
        print("some request's tokens differ from its own solo run", file=sys.stderr)
    reports = against_vllm(args, runs, model) if args.against else []
    if args.json_path:
        from kvviz.fileio import write_output
        from kvviz.peers.compare import report_to_dict

        doc = runs_to_dict(runs)
        doc["identical"] = identical
        if reports:
            doc["vllm"] = [report_to_dict(r) for r in reports]
        doc["read_gbps"], doc["copy_gbps"] = ceiling.read_gbps, ceiling.copy_gbps
        write_output(args.json_path, json.dumps(doc, separators=(",", ":")) + "\n", "--json")
    return 0 if identical else 1


def against_vllm(args, runs, model) -> list:
    """vLLM's run of each comparable scheduler's workload beside kvviz's (kvviz.peers.compare), printed as it
    comes: one vLLM start-up per scheduler, since the settings (prefix caching) differ."""
    from kvviz.models.presets import resolve_name
    from kvviz.peers.compare import report_lines, run_against
    from kvviz.peers.vllm import COMPARABLE

    checkpoint = None if model.cfg.tokenizer == "bytes" else resolve_name(args.model)
    reports = []
    for r in runs:
        if r.scheduler in COMPARABLE:
            print(f"\nvLLM beside kvviz's {r.scheduler} (starting vLLM: about a minute on a CPU)", flush=True)
            reports.append(run_against(r, model, checkpoint=checkpoint, vllm_python=args.vllm_python,
                                       threads=args.threads))
            print("\n".join(report_lines(reports[-1])))
    return reports


def ceiling_words(ceiling, device) -> str:
    """The read ceiling a decode step runs against (kvviz.measure.bandwidth, at the run's threads), as the main
    window and `kvviz bench` state it: "read ceiling 22.7 GB/s at 1 thread" (a GPU's: no threads)."""
    if device.type == "cuda":
        return f"read ceiling {ceiling.read_gbps:,.1f} GB/s"
    plural = "s" if ceiling.threads != 1 else ""
    return f"read ceiling {ceiling.read_gbps:,.1f} GB/s at {ceiling.threads} thread{plural}"


def solo_lines(checks: dict) -> list[str]:
    """One line per scheduler: its requests' tokens against their own solo runs (kvviz.serving.record.SoloCheck),
    requests numbered from 1 as the Serve view's workload table numbers them."""
    from kvviz.serving.engine import request_name

    out = []
    for key, cs in checks.items():
        same = sum(c.equal for c in cs)
        if same == len(cs):
            out.append(f"{key}: every request's tokens equal its own solo run ({same} of {len(cs)})")
            continue
        where = ", ".join(f"{request_name(c.request)} from token {c.token + 1}"
                          + (f" (step {c.step})" if c.step is not None else " (it stopped short)")
                          for c in cs if not c.equal)
        out.append(f"{key}: tokens DIFFER from the solo runs: {where}; {same} of {len(cs)} requests equal")
    return out


def sweep(args, model, tokenizer, device) -> int:
    import torch

    from kvviz.measure.bandwidth import read_ceiling
    from kvviz.serving.sweep import SWEEP_NEW, SWEEP_PROMPT, decode_sweep

    ceiling = read_ceiling(device)
    cfg = model.cfg
    print(f"model {cfg.name}: {cfg.n_layer} layers, hidden {cfg.d_model}; device {device.type}, "
          f"{torch.get_num_threads()} thread(s); each request {SWEEP_PROMPT} prompt + {SWEEP_NEW} new tokens; "
          f"decode-only steps, median of 3 turns; {ceiling_words(ceiling, device)}")
    rows = decode_sweep(model, tokenizer, args.decode_sweep, args.block_size)
    print(f"{'batch':>5} {'step ms':>8} {'tok/s':>9} {'x batch 1':>9} {'read/step':>10} {'read/token':>11} "
          f"{'GB/s':>6} {'of read':>8}")
    for r in rows:
        print(f"{r.batch:>5} {r.step_ms:>8.2f} {r.tokens_per_s:>9.1f} {r.speedup(rows[0]):>8.2f}x "
              f"{fmt_bytes(r.bytes_per_step):>10} {fmt_bytes(r.bytes_per_token):>11} {r.gbps:>6.2f} "
              f"{ceiling.percent_of(r.gbps):>7.0f}%")
    if args.json_path:
        from kvviz.fileio import write_output

        doc = {"model": cfg.name, "device": device.type, "threads": torch.get_num_threads(),
               "read_gbps": ceiling.read_gbps, "copy_gbps": ceiling.copy_gbps,
               "rows": [dataclasses.asdict(r) for r in rows]}
        write_output(args.json_path, json.dumps(doc, indent=1) + "\n", "--json")
    return 0
