"""`kvviz train`: train the chapter's shape, or a shape of the user's (a smaller draft for a shipped model:
--draft-for, --layers, --d-model, ...), on the English every CPython carries (kvviz.training.corpus:
pydoc_data.topics and the standard library's docstrings).

Byte-level. Validation is modules held out by name; text from outside CPython (pip's and setuptools'
docstrings) is scored too. Writes weights, config, a record of the run (training.json) and the model card;
it knows nothing about engines or caches beyond using one to write the card's sample continuations.
"""
from __future__ import annotations

import json
import math
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from kvviz.commands.score import bits_per_byte, mean_nats
from kvviz.config import ModelConfig
from kvviz.models.transformer import Transformer
from kvviz.options import add_seed, add_threads, bounded
from kvviz.training.corpus import CORPUS_NAME, build_corpus, outside_text
from kvviz.training.shape import SHAPE_FIELDS, base_config, training_config

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "assets" / "tiny"
RECORD_NAME = "training.json"
CARD_NAME = "README.md"
CARD_PROMPTS = ("The key of a dictionary", "A function is", "The file is opened")
CARD_TOKENS = 60
CARD_SAMPLING = dict(temperature=0.8, top_k=40, seed=0)


def as_ids(data: bytes) -> torch.Tensor:
    """Bytes as a (N,) tensor of token ids."""
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).long()


def init_for_training(model: Transformer, seed: int) -> Transformer:
    """GPT-2 style init (N(0, 0.02), residual outputs scaled by 1/sqrt(2 n_layer)), seeded."""
    gen = torch.Generator().manual_seed(seed)
    resid_std = 0.02 / math.sqrt(2 * model.cfg.n_layer)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif name.endswith(".bias"):
                p.zero_()
            else:
                std = resid_std if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                p.copy_(torch.randn(p.shape, generator=gen) * std)
    return model


def lr_at(step: int, steps: int, peak: float, warmup: int, floor: float = 0.1) -> float:
    """Linear warmup to `peak`, then cosine decay to `floor * peak` at the last step."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def sample_batch(data: torch.Tensor, batch_size: int, context: int, gen: torch.Generator):
    """Random windows: inputs (B, T) and the next byte of each position (B, T)."""
    starts = torch.randint(0, len(data) - context - 1, (batch_size,), generator=gen)
    rows = torch.stack([data[s:s + context + 1] for s in starts.tolist()])  # (B, T+1)
    return rows[:, :-1], rows[:, 1:]


def unigram_bits_per_byte(train_ids: torch.Tensor, val_ids: torch.Tensor) -> float:
    """The baseline: validation bytes coded with the training bytes' frequencies (add-one smoothed)."""
    counts = torch.bincount(train_ids, minlength=256).double() + 1  # (256,)
    logp = (counts / counts.sum()).log2()
    return float(-logp[val_ids].mean())


@dataclass
class Progress:
    """A plain-text bar on stderr, redrawn in place with `\\r`."""

    total: int
    width: int = 30
    t0: float = 0.0

    def __post_init__(self) -> None:
        self.t0 = time.perf_counter()

    def show(self, step: int, loss: float, lr: float, extra: str = "") -> None:
        done = step / self.total
        elapsed = time.perf_counter() - self.t0
        eta = elapsed / done * (1 - done) if done > 0 else 0.0
        bar = "#" * int(done * self.width) + "." * (self.width - int(done * self.width))
        sys.stderr.write(f"\r[{bar}] {step}/{self.total} loss {loss:.3f} ({loss / math.log(2):.2f} bpb) "
                         f"lr {lr:.1e} {_mmss(elapsed)} elapsed, {_mmss(eta)} left{extra}   ")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")
        sys.stderr.flush()


def _mmss(seconds: float) -> str:
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


def train(cfg: ModelConfig, train_ids: torch.Tensor, val_ids: torch.Tensor, *, steps: int, batch_size: int,
          context: int, lr: float, warmup: int, weight_decay: float, seed: int, time_limit: float | None = None,
          eval_every: int = 0, progress: bool = True) -> tuple[Transformer, dict]:
    """Train from a seeded init; returns the model (eval mode) and the measured figures of the run."""
    if context + 1 > len(train_ids):
        raise ValueError(f"--context {context} is longer than the training text ({len(train_ids)} bytes)")
    if context > cfg.max_seq_len:
        raise ValueError(f"--context {context} exceeds the model's maximum of {cfg.max_seq_len}")
    torch.manual_seed(seed)
    model = init_for_training(Transformer(cfg), seed).train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(seed)
    bar = Progress(steps) if progress else None
    losses: list[float] = []
    t0, cpu0 = time.perf_counter(), time.process_time()
    stopped_early = False
    for step in range(steps):
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            stopped_early = True
            break
        rate = lr_at(step, steps, lr, warmup)
        for group in opt.param_groups:
            group["lr"] = rate
        x, y = sample_batch(train_ids, batch_size, context, gen)
        logits = model(x, all_logits=True).logits  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        extra = ""
        if eval_every and (step + 1) % eval_every == 0:
            nats, n = mean_nats(model, val_ids, context, max_windows=8)
            extra = f", val {bits_per_byte(nats, n):.2f} bpb"
        if bar is not None and (step % 5 == 0 or step == steps - 1 or extra):
            bar.show(step + 1, sum(losses[-20:]) / len(losses[-20:]), rate, extra)
    train_s, cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    if bar is not None:
        bar.close()
    model.eval()
    nats, n = mean_nats(model, val_ids, context)
    figures = dict(steps_done=len(losses), stopped_early=stopped_early, train_seconds=round(train_s, 1),
                   cpu_seconds=round(cpu_s, 1),
                   first_loss=losses[0] if losses else None,
                   final_train_loss=sum(losses[-50:]) / len(losses[-50:]) if losses else None,
                   val_bits_per_byte=bits_per_byte(nats, n), val_bytes_scored=n,
                   unigram_val_bits_per_byte=unigram_bits_per_byte(train_ids, val_ids),
                   threads=torch.get_num_threads(), torch_version=torch.__version__)
    return model, figures


def configure(parser) -> None:
    parser.add_argument("--out", default=None,
                        help="output folder (default: assets/tiny, for tiny's own shape only); its name names the "
                             "model")
    parser.add_argument("--draft-for", default=None, metavar="MODEL",
                        help="train a draft for MODEL (a shipped model or a kvviz model folder): its vocabulary, "
                             "context and architecture, half its layers unless --layers says otherwise")
    shape = parser.add_argument_group("shape (default: tiny's, or the --draft-for model's)")
    for option, what in (("layers", "transformer layers"), ("d_model", "hidden width"),
                         ("heads", "query heads (head_dim = d-model / heads unless --head-dim)"),
                         ("kv_heads", "KV heads (default: one per query head where --heads is given)"),
                         ("head_dim", "dimensions per head"),
                         ("d_ff", "MLP width (default: the base's ratio to d-model)")):
        shape.add_argument("--" + option.replace("_", "-"), type=int, default=None, help=what)
    parser.add_argument("--steps", type=bounded("train_steps"), default=600, help="optimizer steps (default 600)")
    parser.add_argument("--batch-size", type=bounded("batch_size"), default=32, help="windows per step (default 32)")
    parser.add_argument("--context", type=bounded("context"), default=256,
                        help="trained context in bytes (default 256)")
    parser.add_argument("--lr", type=bounded("learning_rate"), default=4e-3, help="peak learning rate (default 4e-3)")
    parser.add_argument("--warmup", type=bounded("warmup"), default=60, help="linear warmup steps (default 60)")
    parser.add_argument("--weight-decay", type=bounded("weight_decay"), default=0.1)
    add_seed(parser, "seed of the initial weights and the batches")
    add_threads(parser)
    parser.add_argument("--time-limit", type=bounded("time_limit"), default=None,
                        help="stop after this many seconds of training, even before --steps")
    parser.add_argument("--eval-every", type=bounded("eval_every"), default=250,
                        help="quick validation every N steps (0: never)")
    parser.add_argument("--no-card", action="store_true", help="do not write README.md (the model card)")


def run(args) -> int:
    for name in ("steps", "batch_size", "context", "warmup"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if not args.lr > 0:
        raise ValueError(f"--lr must be positive, got {args.lr}")
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be at least 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    cfg = shape_of(args)
    from kvviz.models.io import check_memory

    # float32 weights, their gradients and AdamW's two moments: 16 B a parameter before any activation
    check_memory(16 * cfg.param_count(), f"training {cfg.name} ({cfg.param_count():,} parameters)")
    out = Path(args.out).expanduser() if args.out else DEFAULT_OUT
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: --out must be a folder")
    from kvviz.fileio import check_writable

    # before the training: the folder is made if missing, its parent must exist and take files
    check_writable(out / RECORD_NAME if out.is_dir() else out, "--out")
    if args.context > cfg.max_seq_len:
        raise ValueError(f"--context {args.context} exceeds the model's maximum of {cfg.max_seq_len}")
    load_before = os.getloadavg()[0]
    corpus = build_corpus()
    train_ids, val_ids = as_ids(corpus.train), as_ids(corpus.val)
    print(f"corpus {CORPUS_NAME}: train {len(train_ids)} bytes ({len(corpus.train_modules)} modules), validation "
          f"{len(val_ids)} bytes ({', '.join(corpus.val_tops)}: held out by name); model "
          f"{cfg.param_count() / 1e6:.3f}M params; {args.steps} steps x {args.batch_size} x {args.context} bytes; "
          f"{torch.get_num_threads()} thread(s)", file=sys.stderr)
    model, figures = train(cfg, train_ids, val_ids, steps=args.steps, batch_size=args.batch_size,
                           context=args.context, lr=args.lr, warmup=args.warmup, weight_decay=args.weight_decay,
                           seed=args.seed, time_limit=args.time_limit, eval_every=args.eval_every)
    from kvviz.fileio import atomic_write_text
    from kvviz.models.io import save_model

    outside, outside_name = outside_text()
    nats, n_outside = mean_nats(model, as_ids(outside), args.context)
    figures.update(outside=outside_name, outside_bits_per_byte=bits_per_byte(nats, n_outside),
                   outside_bytes_scored=n_outside, load_average_before=round(load_before, 2),
                   load_average_after=round(os.getloadavg()[0], 2))
    save_model(model, out)
    argv = sys.argv[1:] if sys.argv and sys.argv[0].endswith(("kvviz", "__main__.py")) else None
    record = dict(command="kvviz " + shlex.join(argv) if argv else None, drafts_for=args.draft_for,
                  corpus=CORPUS_NAME, corpus_sha256=corpus.sha256(), topics_bytes=corpus.topics_bytes,
                  train_bytes=len(train_ids), train_modules=len(corpus.train_modules), val_bytes=len(val_ids),
                  val_modules=list(corpus.val_tops), steps=args.steps,
                  batch_size=args.batch_size, context=args.context, lr=args.lr, warmup=args.warmup,
                  weight_decay=args.weight_decay, seed=args.seed, time_limit=args.time_limit,
                  python=sys.version.split()[0], **figures)
    atomic_write_text(out / RECORD_NAME, json.dumps(record, indent=2) + "\n")
    if not args.no_card:
        write_card(out)
    if figures["stopped_early"]:
        print(f"stopped by --time-limit after {figures['steps_done']} of {args.steps} steps", file=sys.stderr)
    print(f"trained {figures['steps_done']} steps in {figures['train_seconds']:.0f} s; "
          f"validation {figures['val_bits_per_byte']:.3f} bits per byte over {figures['val_bytes_scored']} bytes; "
          f"outside CPython ({outside_name}) {figures['outside_bits_per_byte']:.3f}; wrote {out}")
    return 0


def shape_of(args) -> ModelConfig:
    """The config `kvviz train` trains: tiny's, or the --draft-for model's with half its layers, the shape
    options applied (kvviz.training.shape); a shape other than tiny's needs an --out of its own."""
    base = base_config(args.draft_for) if args.draft_for else ModelConfig(name="tiny")
    given = {option: getattr(args, option) for option in SHAPE_FIELDS}
    if args.draft_for and given["layers"] is None:
        given["layers"] = max(1, base.n_layer // 2)
    custom = args.draft_for or any(v is not None for v in given.values())
    name = (Path(args.out).resolve().name or "model") if custom and args.out else "tiny"
    cfg = training_config(base, name=name, **given)
    if args.out is None and cfg != ModelConfig(name="tiny"):
        raise ValueError(f"give --out: {DEFAULT_OUT} holds the shipped tiny, and this shape ({cfg.n_layer} layers, "
                         f"d_model {cfg.d_model}, {cfg.n_head} heads) is not tiny's")
    return cfg


def sample_continuations(folder: Path, n_tokens: int = CARD_TOKENS) -> list[dict]:
    """Greedy and seeded sampled continuations of CARD_PROMPTS by the model in `folder` (cached engine)."""
    from kvviz.config import SamplingConfig
    from kvviz.engines import make_engine
    from kvviz.models.io import load_model_folder
    from kvviz.tokenizer import ByteTokenizer

    model = load_model_folder(folder).eval()
    tok = ByteTokenizer()
    rows = []
    for prompt in CARD_PROMPTS:
        ids = tok.encode(prompt)
        row = {"prompt": prompt}
        for label, sampling in (("greedy", SamplingConfig()),
                                ("sampled", SamplingConfig(**CARD_SAMPLING))):
            engine = make_engine("static", model)
            row[label] = tok.decode([t.token_id for t in engine.generate(ids, n_tokens, sampling)])
        rows.append(row)
    return rows


def write_card(folder: Path) -> Path:
    """README.md next to the weights, every figure read from training.json or measured here."""
    from kvviz.fileio import atomic_write_text

    folder = Path(folder)
    rec = json.loads((folder / RECORD_NAME).read_text(encoding="utf-8"))
    cfg = ModelConfig.load_json(folder / "config.json")
    rows = sample_continuations(folder)
    command = rec.get("command") or "kvviz train (run from Python; arguments in training.json)"
    title = (f"# {cfg.name}: a draft for {rec['drafts_for']}, trained on the English every CPython carries"
             if rec.get("drafts_for") else
             f"# {cfg.name}: the chapter's shape, trained on the English every CPython carries" if cfg.name == "tiny"
             else f"# {cfg.name}: trained on the English every CPython carries")
    lines = [
        title,
        "",
        "Generated by `kvviz train` from its own measurements (training.json holds the raw record)."
        + (f" Load it as `spec-draft`'s draft for {rec['drafts_for']} (kvviz.engines.drafts.draft_model_for)."
           if rec.get("drafts_for") else ""),
        "",
        "| | |", "|---|---|",
        f"| shape | {cfg.n_layer} layers, {cfg.n_head} heads of {cfg.head_dim}, hidden {cfg.d_model}, "
        f"MLP {cfg.d_ff}, byte vocabulary ({cfg.vocab_size}), max context {cfg.max_seq_len} |",
        f"| parameters | {cfg.param_count():,} (tied embeddings) |",
        f"| corpus | {rec['corpus']} (Python {rec['python']}; sha256 {rec['corpus_sha256'][:12]}...) |",
        f"| split | train {rec['train_bytes']:,} bytes ({rec['topics_bytes']:,} of pydoc topics, then the "
        f"docstrings of {rec['train_modules']} modules); validation {rec['val_bytes']:,} bytes, the docstrings "
        f"of the modules held out by name ({', '.join(rec['val_modules'])}), never trained on |",
        f"| training | {rec['steps_done']} steps x {rec['batch_size']} windows x {rec['context']} bytes, AdamW "
        f"(peak lr {rec['lr']}, {rec['warmup']} warmup steps, cosine), seed {rec['seed']} |",
        f"| trained context | {rec['context']} bytes (runs up to {cfg.max_seq_len}; quality past "
        f"{rec['context']} is not trained) |",
        f"| wall time | {rec['train_seconds']:.0f} s on {rec['threads']} CPU thread(s), torch {rec['torch_version']}"
        + (f" ({rec['cpu_seconds']:.0f} CPU-seconds; the wall time includes any other load on the machine"
           + (f": load average {rec['load_average_before']} at the start, {rec['load_average_after']} at the end"
              if rec.get("load_average_before") is not None else "") + ")"
           if rec.get("cpu_seconds") is not None else "") + " |",
        f"| validation | **{rec['val_bits_per_byte']:.3f} bits per byte** over {rec['val_bytes_scored']:,} bytes "
        f"(a unigram byte model fitted to the training bytes: {rec['unigram_val_bits_per_byte']:.2f}) |",
        f"| outside CPython | **{rec['outside_bits_per_byte']:.3f} bits per byte** over "
        f"{rec['outside_bytes_scored']:,} bytes of docstrings of {rec['outside']} (never trained on) |",
        "",
        "Reproducible as far as floating point allows. The same command on the same Python (the corpus is its "
        "standard library: training.json records the corpus's sha256) should give the same validation figure to "
        "three decimals on any machine; the weights are byte-identical only on one machine, since another CPU or "
        "torch build rounds differently (an earlier tiny, rerun on another machine, matched its validation "
        "figure to three decimals while its weights differed by up to 1e-4). A wall time measured while other "
        "jobs share the cores is pessimistic: the CPU-seconds are the steadier figure.",
        "",
        "## Command", "", "```", command, "```", "",
        f"## Sample continuations ({CARD_TOKENS} bytes each)", "",
        "Greedy, and sampled with " + ", ".join(f"{k} {v}" for k, v in CARD_SAMPLING.items())
        + " (the static-cache engine, real outputs of the weights in this folder).", "",
    ]
    for row in rows:
        lines += [f"**Prompt:** `{row['prompt']}`", ""]
        for label in ("greedy", "sampled"):
            text = row[label].replace("\n", "\u23ce").replace("``", "` `")
            lines += [f"- {label}: ``{row['prompt']}`` \u2192 `` {text} ``"]
        lines.append("")
    lines += ["Score any UTF-8 text with `kvviz score FILE` to see what it has and has not learned.", ""]
    return atomic_write_text(folder / CARD_NAME, "\n".join(lines))
