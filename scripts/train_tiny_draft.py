"""Train the draft model the `spec-draft` engine proposes with for the shipped `tiny`: one layer of tiny's
width, the same byte vocabulary, corpus, split and optimiser as `kvviz train` (kvviz.commands.train.train, the
function that command runs), written to assets/tiny-draft with its record and a card stating its bits per byte.

    python scripts/train_tiny_draft.py --threads 1            # ~6 CPU-minutes
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DRAFT_SHAPE = dict(name="tiny-draft", d_model=128, n_layer=1, n_head=4, n_kv_head=4, head_dim=32, d_ff=384)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "assets" / "tiny-draft"))
    parser.add_argument("--steps", type=int, default=700)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--context", type=int, default=256)
    parser.add_argument("--lr", type=float, default=4e-3)
    parser.add_argument("--warmup", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    import torch

    from kvviz.commands.score import bits_per_byte, mean_nats
    from kvviz.commands.train import as_ids, train
    from kvviz.config import ModelConfig
    from kvviz.fileio import atomic_write_text
    from kvviz.models.io import save_model
    from kvviz.training.corpus import CORPUS_NAME, build_corpus, outside_text

    torch.set_num_threads(args.threads)
    cfg = ModelConfig(**DRAFT_SHAPE)
    load_before = os.getloadavg()[0]
    corpus = build_corpus()
    train_ids, val_ids = as_ids(corpus.train), as_ids(corpus.val)
    model, figures = train(cfg, train_ids, val_ids, steps=args.steps, batch_size=args.batch_size,
                           context=args.context, lr=args.lr, warmup=args.warmup, weight_decay=0.1, seed=args.seed,
                           eval_every=0)
    outside, outside_name = outside_text()
    nats, n_outside = mean_nats(model, as_ids(outside), args.context)
    figures.update(outside=outside_name, outside_bits_per_byte=bits_per_byte(nats, n_outside),
                   outside_bytes_scored=n_outside, load_average_before=round(load_before, 2),
                   load_average_after=round(os.getloadavg()[0], 2))
    record = dict(command="python scripts/train_tiny_draft.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                  drafts_for="tiny", corpus=CORPUS_NAME, corpus_sha256=corpus.sha256(),
                  train_bytes=len(train_ids), val_bytes=len(val_ids), val_modules=list(corpus.val_tops),
                  steps=args.steps, batch_size=args.batch_size, context=args.context, lr=args.lr,
                  warmup=args.warmup, weight_decay=0.1, seed=args.seed, python=sys.version.split()[0], **figures)
    out = Path(args.out)
    tmp = Path(tempfile.mkdtemp(prefix=".tiny-draft-", dir=out.parent))
    try:  # written beside the target and renamed: an interrupted run leaves the old folder whole
        save_model(model, tmp)
        atomic_write_text(tmp / "training.json", json.dumps(record, indent=2) + "\n")
        atomic_write_text(tmp / "README.md", card(cfg, record))
        if out.exists():
            shutil.rmtree(out)
        tmp.chmod(0o755)  # mkdtemp's folder is the owner's alone
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    print(f"trained {figures['steps_done']} steps in {figures['train_seconds']:.0f} s "
          f"({figures['cpu_seconds']:.0f} CPU-s); validation {figures['val_bits_per_byte']:.3f} bits per byte; "
          f"outside CPython {figures['outside_bits_per_byte']:.3f}; wrote {out}")
    return 0


def card(cfg, rec: dict) -> str:
    """The model card, every figure read from the training record."""
    tiny = json.loads((ROOT / "assets" / "tiny" / "training.json").read_text(encoding="utf-8"))
    return "\n".join([
        "# tiny-draft: the draft model of `spec-draft` for the shipped tiny",
        "",
        "Trained by `scripts/train_tiny_draft.py` with the function `kvviz train` runs, on the same corpus and "
        "split (training.json holds the raw record).",
        "",
        "| | |", "|---|---|",
        f"| shape | {cfg.n_layer} layer, {cfg.n_head} heads of {cfg.head_dim}, hidden {cfg.d_model}, MLP {cfg.d_ff}, "
        f"byte vocabulary ({cfg.vocab_size}) |",
        f"| parameters | {cfg.param_count():,} (tied embeddings) |",
        f"| corpus | {rec['corpus']} (Python {rec['python']}; sha256 {rec['corpus_sha256'][:12]}...), tiny's split |",
        f"| training | {rec['steps_done']} steps x {rec['batch_size']} windows x {rec['context']} bytes, AdamW "
        f"(peak lr {rec['lr']}, {rec['warmup']} warmup steps, cosine), seed {rec['seed']} |",
        f"| wall time | {rec['train_seconds']:.0f} s on {rec['threads']} CPU thread(s) ({rec['cpu_seconds']:.0f} "
        f"CPU-seconds; load average {rec['load_average_before']} at the start, {rec['load_average_after']} at "
        f"the end), torch {rec['torch_version']} |",
        f"| validation | **{rec['val_bits_per_byte']:.3f} bits per byte** over {rec['val_bytes_scored']:,} bytes "
        f"(tiny: {tiny['val_bits_per_byte']:.3f}; a unigram byte model: {rec['unigram_val_bits_per_byte']:.2f}) |",
        f"| outside CPython | **{rec['outside_bits_per_byte']:.3f} bits per byte** over "
        f"{rec['outside_bytes_scored']:,} bytes of docstrings of {rec['outside']} (tiny: "
        f"{tiny['outside_bits_per_byte']:.3f}) |",
        "",
        "A draft only proposes: `spec-draft` keeps a proposed token only where tiny picks the same one, so its "
        "output is tiny's whatever the draft says. How often tiny agrees is `scripts/bench_spec.py`'s "
        "acceptance figure.",
        "",
        "## Command", "", "```", rec["command"], "```", "",
    ])


if __name__ == "__main__":
    raise SystemExit(main())
