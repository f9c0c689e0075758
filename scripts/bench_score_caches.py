"""Which positions to forget, at one budget: the eviction rules' quality on held-out text beside window and sinks.

On the trained `tiny` over stretches of the validation split's text (modules never trained on,
kvviz.training.corpus): a short prompt, then `--tokens` tokens of the text fed to every engine (kvviz.measure.quality
.on_text), each approximate cache at the same W (sinks with S of them pinned). Per engine: mean KL(exact || engine)
in nats and top-1 agreement with the exact cache over every step of every stretch, the spread over stretches, and
the mean KL split at the context `tiny` was trained on (assets/tiny/training.json): past it the exact cache reads
positions the model never learned to use. Prints a Markdown table; --json writes the figures.

    python scripts/bench_score_caches.py --threads 1 --window 64 --tokens 700 --stretches 4
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from kvviz.engines import make_engine
from kvviz.measure.quality import on_text
from kvviz.models.presets import TINY_DIR, load_model
from kvviz.training.corpus import build_corpus

RULES = ("window", "sinks", "tova", "h2o", "knorm")


def stretches(text: bytes, n: int, length: int) -> list[bytes]:
    """`n` stretches of `length` bytes, evenly spaced over the text, each starting after a paragraph break."""
    if n * length > len(text):
        raise ValueError(f"{n} stretches of {length} bytes do not fit in {len(text):,} bytes of held-out text")
    out = []
    for i in range(n):
        start = i * (len(text) - length) // max(1, n - 1) if n > 1 else 0
        cut = text.find(b"\n\n", start, start + length)
        start = cut + 2 if cut >= 0 and cut + 2 + length <= len(text) else start
        out.append(text[start:start + length])
    return out


def evictions(engine, ids: list[int], n_prompt: int) -> dict:
    """What an engine whose cache says what it holds (`held_positions`) evicts, fed `ids`: how many positions, how
    many of them the token written the step before, and their median age in steps."""
    before, ages, newest = None, [], 0
    for t in engine.generate(ids[:n_prompt], len(ids) - n_prompt, forced_tokens=ids[n_prompt:]):
        held = set(engine.cache.held_positions().tolist())
        if before is not None:
            for p in before - held:
                ages.append(t.pos_start - p)
                newest += p == t.pos_start - 1
        before = held
    return dict(evicted=len(ages), newest=newest, median_age=float(np.median(ages)) if ages else None)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--sinks", type=int, default=4)
    p.add_argument("--tokens", type=int, default=700, help="text tokens fed after the prompt, per stretch")
    p.add_argument("--prompt", type=int, default=16, help="prompt bytes before them")
    p.add_argument("--stretches", type=int, default=4)
    p.add_argument("--engines", default=",".join(RULES))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    model = load_model("tiny", torch.device("cpu"))
    keys = a.engines.split(",")
    texts = stretches(build_corpus().val, a.stretches, a.prompt + a.tokens)
    trained = json.loads(Path(TINY_DIR / "training.json").read_text())["context"]
    inside = np.arange(a.tokens) + a.prompt < trained  # steps predicting a position inside the trained context
    kl = {k: [] for k in keys}
    top1 = {k: [] for k in keys}
    t0 = time.perf_counter()
    for text in texts:
        ids = list(text)  # the byte tokenizer: one token per byte
        engines = [make_engine(k, model, window=a.window, sinks=a.sinks) for k in keys]
        for key, q in on_text(make_engine("static", model), engines, ids[:a.prompt], ids[a.prompt:]).items():
            kl[key].append(q.kl)
            top1[key].append(q.top1)
    print(f"tiny (trained on a {trained}-token context), {len(texts)} held-out stretches of {a.prompt} prompt bytes "
          f"+ {a.tokens} text tokens, "
          f"W={a.window} (sinks: S={a.sinks}), every engine fed the text; threads {a.threads}, "
          f"{time.perf_counter() - t0:.0f} s")
    print(f"| engine | mean KL (nats) | top-1 agreement | mean KL per stretch | top-1 per stretch | "
          f"mean KL, positions < {trained} | mean KL, positions >= {trained} |")
    print("|---|---|---|---|---|---|---|")
    out = {}
    for k in keys:
        per_kl = [float(np.mean(x)) for x in kl[k]]
        per_top = [float(np.mean(x)) for x in top1[k]]
        steps = np.array(kl[k])  # (stretches, tokens)
        split = [float(steps[:, part].mean()) if part.any() else float("nan") for part in (inside, ~inside)]
        out[k] = dict(mean_kl=float(steps.mean()), top1_agreement=float(np.mean(top1[k])), kl_per_stretch=per_kl,
                      top1_per_stretch=per_top, kl_inside_context=split[0], kl_past_context=split[1])
        print(f"| {k} | {out[k]['mean_kl']:.4f} | {100 * out[k]['top1_agreement']:.1f}% | "
              f"{', '.join(f'{x:.4f}' for x in per_kl)} | {', '.join(f'{100 * x:.1f}%' for x in per_top)} | "
              f"{split[0]:.4f} | {split[1]:.4f} |")
    ids = list(texts[0])
    for k in keys:
        engine = make_engine(k, model, window=a.window, sinks=a.sinks)
        if hasattr(engine.cache_cls, "held_positions"):
            out[k]["evictions"] = e = evictions(engine, ids, a.prompt)
            share = f"{100 * e['newest'] / e['evicted']:.0f}%" if e["evicted"] else "-"
            print(f"{k} on the first stretch: {e['evicted']} evicted after the prefill, {e['newest']} ({share}) of "
                  f"them the token written the step before; median age {e['median_age']} steps")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(args=vars(a), engines=out), f, indent=2)


if __name__ == "__main__":
    main()
