"""The approximate caches' benchmark: window (W) and int8 against static, side by side in one run, and their quality.

Part 1 (cost): on `--model` (default `wide`, random weights) at `--tokens` new tokens, the engines run
in lockstep (one step of each in turn, so machine load hits them alike); per decode step latency
(median, p90) and resident KV bytes at the end. Part 2 (quality): on the trained `tiny` model over a
held-out prompt (the validation split's text: modules never trained on, kvviz.training.corpus), each approximate
engine teacher-forced on static's tokens: mean KL(exact || engine) and top-1 agreement, and the step
where its own output first parts. Prints a Markdown table and writes JSON with --json.

    python scripts/bench_caches.py --threads 1 --tokens 2000 --json /tmp/caches.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

from kvviz.config import TraceOptions
from kvviz.engines import make_engine
from kvviz.format import fmt_bytes
from kvviz.measure.quality import measure
from kvviz.models.presets import load_model
from kvviz.training.corpus import build_corpus


def cost(model_name: str, tokens: int, window: int, prompt_len: int) -> dict:
    model = load_model(model_name, torch.device("cpu"))
    prompt = list(range(65, 65 + prompt_len))
    keys = ("static", "window", "int8")
    streams = {k: make_engine(k, model, window=window).generate(prompt, tokens, trace=TraceOptions(masks=False))
               for k in keys}
    ms = {k: [] for k in keys}
    last = {}
    for _ in range(tokens):
        for k in keys:
            t = next(streams[k])
            if t.phase == "decode":
                ms[k].append(t.latency_ms)
            last[k] = t
    out = {}
    for k in keys:
        xs = sorted(ms[k])
        out[k] = dict(median_ms=statistics.median(xs), p90_ms=xs[int(0.9 * (len(xs) - 1))],
                      cache_bytes=last[k].cache_bytes, cache_len=last[k].cache_len)
    return out


def quality(window: int, tokens: int, prompt_bytes: int) -> dict:
    model = load_model("tiny", torch.device("cpu"))
    text = build_corpus().val[:prompt_bytes]
    prompt = list(text)  # the byte tokenizer: one token per byte
    exact = list(make_engine("static", model).generate(prompt, tokens, trace=TraceOptions(masks=False, logits=True)))
    out = {}
    for key in ("window", "int8"):
        eng = make_engine(key, model, window=window)
        own = list(eng.generate(prompt, tokens, trace=TraceOptions(masks=False)))
        q = measure(eng, prompt, exact, own)
        out[key] = dict(mean_kl=q.mean_kl, top1_agreement=q.top1_agreement, first_divergence=q.first_divergence,
                        kl_after_window=float(np.mean(q.kl[max(0, window - len(prompt)):])))
    return dict(prompt_bytes=len(prompt), prompt_head=text[:60].decode("utf-8", "replace"), engines=out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="wide")
    p.add_argument("--tokens", type=int, default=2000)
    p.add_argument("--window", type=int, default=256)
    p.add_argument("--prompt-len", type=int, default=16)
    p.add_argument("--quality-tokens", type=int, default=700)
    p.add_argument("--quality-prompt", type=int, default=300, help="held-out prompt bytes for the quality part")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    c = cost(a.model, a.tokens, a.window, a.prompt_len)
    t1 = time.perf_counter()
    q = quality(a.window, a.quality_tokens, a.quality_prompt)
    t2 = time.perf_counter()
    print(f"cost: {a.model}, {a.tokens} new tokens after {a.prompt_len}, W={a.window}, threads {a.threads} "
          f"({t1 - t0:.0f} s)")
    print("| engine | decode step median | p90 | resident KV at the end | positions held |")
    print("|---|---|---|---|---|")
    for k, r in c.items():
        print(f"| {k} | {r['median_ms']:.2f} ms | {r['p90_ms']:.2f} ms | {fmt_bytes(r['cache_bytes'])} | "
              f"{r['cache_len']:,} |")
    print(f"\nquality: tiny (trained), held-out prompt of {q['prompt_bytes']} bytes "
          f"({q['prompt_head']!r}...), {a.quality_tokens} tokens teacher-forced on static's ({t2 - t1:.0f} s)")
    print("| engine | mean KL (nats) | top-1 agreement | own output parts at step |")
    print("|---|---|---|---|")
    for k, r in q["engines"].items():
        print(f"| {k} | {r['mean_kl']:.4g} | {100 * r['top1_agreement']:.1f}% | {r['first_divergence']} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(args=vars(a), cost=c, quality=q), f, indent=2)


if __name__ == "__main__":
    main()
