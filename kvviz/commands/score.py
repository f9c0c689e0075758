"""`kvviz score FILE`: a model's bits per byte on a UTF-8 text file, over non-overlapping windows.

Knows how to read a file and count what a model predicts; knows nothing about training or engines.
"""
from __future__ import annotations

import math
import os
import sys
from pathlib import Path

from kvviz.fileio import read_json
from kvviz.options import add_model, add_threads, bounded

DEFAULT_CONTEXT = 512  # used when a model folder records no trained context


def configure(parser) -> None:
    parser.add_argument("file", help="a UTF-8 text file")
    add_model(parser, "tiny", "preset name, model folder, or cached hub id ORG/NAME[@REV] (default: tiny)")
    parser.add_argument("--context", type=bounded("context"), default=None,
                        help="window length in tokens (default: the model's trained context, else "
                             f"{DEFAULT_CONTEXT}, capped at its maximum)")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, mps or auto")
    add_threads(parser)
    parser.add_argument("--batch-size", type=bounded("batch_size"), default=8, help="windows per forward (default 8)")


MAX_TEXT_BYTES = 1 << 30  # a text to score: a GiB is far past what a CPU scores in a sitting


def read_text(path: str | Path) -> str:
    """The file's text; a one-line ValueError naming the file if it is missing, not UTF-8 or empty."""
    from kvviz.fileio import read_bytes

    path = Path(path)
    if not os.path.lexists(path):
        raise ValueError(f"{path}: file not found")
    data = read_bytes(path, MAX_TEXT_BYTES, "text file")  # a FIFO, a device, a loop of links: one line
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (invalid byte 0x{data[exc.start]:02x} at offset {exc.start})") \
            from None
    if not text.strip():
        raise ValueError(f"{path}: the file is empty" if not text else f"{path}: the file holds only whitespace")
    return text


def mean_nats(model, ids, context: int, batch_size: int = 8, max_windows: int | None = None) -> tuple[float, int]:
    """Summed cross-entropy (nats) and the number of ids predicted, over non-overlapping windows.

    Window i reads ids[iC : iC + C] and predicts ids[iC + 1 : iC + C + 1], so every id but the first is
    predicted exactly once, from at most C ids before it.
    """
    import torch
    import torch.nn.functional as F

    ids = torch.as_tensor(ids, dtype=torch.long)
    n_targets = len(ids) - 1
    if n_targets < 1:
        raise ValueError("need at least two tokens to score")
    starts = list(range(0, n_targets, context))[:max_windows]
    full = [s for s in starts if s + context + 1 <= len(ids)]
    rest = [s for s in starts if s + context + 1 > len(ids)]  # the shorter last window goes alone
    groups = [full[i:i + batch_size] for i in range(0, len(full), batch_size)] + [[s] for s in rest]
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for group in groups:
            rows = torch.stack([ids[s:s + context + 1] for s in group]).to(device)  # (B, T+1)
            logits = model(rows[:, :-1], all_logits=True).logits.float()  # (B, T, V)
            targets = rows[:, 1:]  # (B, T)
            total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                           reduction="sum"))
            count += targets.numel()
    model.train(was_training)
    return total, count


def bits_per_byte(nats: float, n_bytes: int) -> float:
    return nats / math.log(2) / n_bytes


def trained_context(name_or_path: str) -> int | None:
    """The context a model folder (or the trained preset's) was trained at, from its training.json."""
    from kvviz.models.presets import PRESETS, TINY_DIR

    if name_or_path in PRESETS:
        folder = TINY_DIR if PRESETS[name_or_path].trained else None
    else:
        folder = Path(name_or_path)
    if folder is None or not (folder / "training.json").is_file():
        return None
    try:
        value = read_json(folder / "training.json", max_depth=4, max_bytes=1 << 20).get("context")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and value > 0 else None


def run(args) -> int:
    import torch

    from kvviz.models.presets import load_model, load_tokenizer, preset_warning
    from kvviz.runtime.devices import resolve_device

    if args.threads is not None:  # bounds: kvviz.options, at parse time
        torch.set_num_threads(args.threads)
    text = read_text(args.file)
    device = resolve_device(args.device)
    warning = preset_warning(args.model)
    if warning:
        print(f"kvviz score: warning: {warning}", file=sys.stderr)
    tokenizer = load_tokenizer(args.model)
    model = load_model(args.model, device)
    cfg = model.cfg
    context = args.context or min(trained_context(args.model) or DEFAULT_CONTEXT, cfg.max_seq_len)
    if context > cfg.max_seq_len:
        raise ValueError(f"--context {context} exceeds the model's maximum of {cfg.max_seq_len}")
    ids = tokenizer.encode(text)
    if len(ids) < 2:
        raise ValueError(f"{args.file}: too short to score (one token; at least two needed)")
    nats, n_tokens = mean_nats(model, ids, context, args.batch_size)
    # The first token is only read, never predicted: its bytes are left out of the count.
    n_bytes = len(text.encode("utf-8")) - len(tokenizer.decode(ids[:1]).encode("utf-8"))
    windows = math.ceil(n_tokens / context)
    print(f"{bits_per_byte(nats, n_bytes):.4f} bits per byte  ({args.file}: {n_bytes} bytes / {n_tokens} tokens "
          f"scored in {windows} window(s) of up to {context}; model {cfg.name}, "
          f"{nats / n_tokens:.4f} nats per token)")
    return 0
