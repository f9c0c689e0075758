"""Speculative decoding against plain decoding: tokens per target forward, draft acceptance and the wall-time
speedup of spec-lookup and spec-draft over static, per model, under each rollback rule.

    python scripts/bench_spec.py --threads 1                       # tiny and wide, 200 new tokens, 5 repeats

Each repeat runs every engine once in turn on the same prompts (greedy), so the sides share the machine's load;
the figures are medians over the repeats. Tokens are checked equal to static's before anything is printed.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# tiny's model card prompts and two with text that recurs, as code and docs do
PROMPTS = ("The key of a dictionary", "A function is", "The file is opened",
           "def area(width, height):\n    return width * height\n\ndef volume(width, height, depth):\n    return ",
           "Return the number of items in the list. Return the number of")


def run_once(model, key, ids, n, **kw):
    from kvviz.config import TraceOptions
    from kvviz.engines import make_engine

    engine = make_engine(key, model, **kw)
    t0 = time.perf_counter()
    traces = list(engine.generate(ids, n, trace=TraceOptions(masks=False)))
    return time.perf_counter() - t0, traces


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,wide")
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--prompts", type=int, default=len(PROMPTS), help=f"the first N of the {len(PROMPTS)} prompts")
    parser.add_argument("--k", type=int, default=4, help="drafts per round")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.tokens < 2 or args.repeat < 1 or not 1 <= args.prompts <= len(PROMPTS):
        raise SystemExit(f"--tokens must be at least 2, --repeat at least 1, --prompts 1..{len(PROMPTS)}")

    import os

    import torch

    from kvviz.models.presets import load_model
    from kvviz.tokenizer import ByteTokenizer

    torch.set_num_threads(args.threads)
    tok = ByteTokenizer()
    sides = [("static", {}), *[(key, dict(rollback=rule, spec_k=args.k)) for key in ("spec-lookup", "spec-draft")
                               for rule in ("overwrite", "crop")]]
    print(f"{args.tokens} new tokens x {args.prompts} prompts, k={args.k}, greedy, {args.threads} thread(s), "
          f"median of {args.repeat} repeats (sides in turns); load average {os.getloadavg()[0]:.2f} at the start")
    for name in args.models.split(","):
        model = load_model(name, torch.device("cpu"))
        prompts = [tok.encode(p) for p in PROMPTS[:args.prompts]]
        times: dict[str, list[float]] = {}
        stats: dict[str, tuple[int, int, int, int]] = {}
        reference: dict[int, list[int]] = {}  # static's tokens per prompt
        for _ in range(args.repeat):
            for key, kw in sides:
                label = key if not kw else f"{key} {kw['rollback']}"
                total, tokens, forwards, proposed, accepted = 0.0, 0, 0, 0, 0
                for i, ids in enumerate(prompts):
                    seconds, traces = run_once(model, key, ids, args.tokens, **kw)
                    total += seconds
                    tokens += len(traces)
                    forwards += traces[-1].target_forwards if kw else len(traces)
                    firsts = [t for t in traces if kw and t.spec_index == 0]
                    proposed += sum(t.spec_proposed for t in firsts)
                    accepted += sum(t.spec_accepted for t in firsts)
                    ref = reference.setdefault(i, [t.token_id for t in traces])
                    if [t.token_id for t in traces] != ref:
                        raise SystemExit(f"{name}: {label} gave other tokens than static")
                times.setdefault(label, []).append(total)
                stats[label] = (tokens, forwards, proposed, accepted)
        base = statistics.median(times["static"])
        draft = "tiny-draft" if name == "tiny" else f"its first {max(1, model.cfg.n_layer // 2)} layers"
        print(f"\n{name} ({model.cfg.n_layer} layers, d_model {model.cfg.d_model}; spec-draft drafts with {draft})")
        print(f"{'engine':<24}{'tokens/fwd':>11}{'accepted':>10}{'median s':>10}{'speedup':>9}")
        for label, runs in times.items():
            tokens, forwards, proposed, accepted = stats[label]
            share = f"{100 * accepted / proposed:.0f}%" if proposed else "-"
            med = statistics.median(runs)
            print(f"{label:<24}{tokens / forwards:>11.2f}{share:>10}{med:>10.3f}{base / med:>8.2f}x")
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
