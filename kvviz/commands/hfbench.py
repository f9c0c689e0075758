"""`kvviz hfbench`: decode speed of kvviz's concat engine beside transformers' `generate` (dynamic cache)
on the same local weights, measured side by side in one run. Prints only what it measured. `--engine`
puts another kvviz engine on kvviz's side (`static`, `paged`); `--kernel` says what runs its decode steps
(kvviz.kernels: PyTorch's ops by default, as transformers' own; `native` for kvviz's C step, refused in one
line where it cannot run).

Without --model it builds a tiny random Llama checkpoint with transformers in a temporary folder.
Needs `transformers` (a test-only dependency of kvviz); reads local folders only, never the hub.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kvviz.format import DEFAULT_PROMPT, fmt_bytes
from kvviz.options import (
    add_kernel,
    add_model,
    add_output,
    add_repeat,
    add_seed,
    add_threads,
    add_tokens,
    check_against_model,
    nonempty_text,
)

# The chapter's tiny shape as a Llama with grouped-query attention (4 query heads share 2 KV heads).
RANDOM_LLAMA = dict(vocab_size=512, hidden_size=128, intermediate_size=512, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048)


def configure(parser) -> None:
    add_model(parser, None, "a local Llama/Qwen2/Qwen3/GPT-2 checkpoint folder (default: a tiny random Llama)")
    parser.add_argument("--prompt", type=nonempty_text, default=DEFAULT_PROMPT,
                        help="prompt text (default: a sentence)")
    add_tokens(parser, 100)
    add_repeat(parser, 5)
    add_threads(parser, default=1)
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, mps or auto")
    parser.add_argument("--dtype", default="auto", help="fp32, bf16, fp16 (default: bf16 on CUDA, else fp32)")
    add_seed(parser, "seed of the random checkpoint's weights")
    parser.add_argument("--engine", choices=ENGINES, default="concat",
                        help="kvviz's side: concat (default, the chapter's cache), static or paged")
    add_kernel(parser)
    add_output(parser, "--json", "json_path", "also write results as JSON (checked before the run)")


@dataclass
class Side:
    """One implementation's medians: a full run of N new tokens, and a prefill-only run (1 token)."""

    name: str
    total_ms: float
    prefill_ms: float
    new_tokens: int
    peak_device_bytes: int | None = None

    @property
    def decode_tokens_per_s(self) -> float:
        """The N-1 decode steps: the full run less the prefill-only run, so both sides pay one prefill."""
        return (self.new_tokens - 1) / ((self.total_ms - self.prefill_ms) / 1000.0)


def _import_transformers():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local folders only, whatever the code path
    try:
        import transformers
    except ImportError:
        raise ValueError("kvviz hfbench needs the 'transformers' package (pip install transformers)") from None
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    return transformers


def build_random_llama(folder: Path, seed: int) -> Path:
    """A seeded random Llama saved by transformers itself, with a byte-level BPE tokenizer.json."""
    import torch

    from kvviz.checkpoint_files import TOKENIZER_NAME
    from kvviz.models.hf import train_tokenizer_json

    transformers = _import_transformers()
    config = transformers.LlamaConfig(**RANDOM_LLAMA, bos_token_id=None, eos_token_id=None, pad_token_id=None,
                                      tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config)
    model.save_pretrained(folder)
    (folder / TOKENIZER_NAME).write_text(train_tokenizer_json(RANDOM_LLAMA["vocab_size"]), encoding="utf-8")
    return folder


def _clock(device) -> float:
    from kvviz.runtime.devices import synchronize

    synchronize(device)
    return time.perf_counter()


def _peak_reset(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def _peak(device) -> int | None:
    import torch

    return int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else None


def run_kvviz(model, prompt_ids: list[int], n: int, device, key: str = "concat",
              kernel: str = "torch") -> tuple[float, list[int]]:
    """Milliseconds for kvviz's engine `key` (concat unless given) to produce n tokens (no per-step copies
    asked for)."""
    from kvviz.config import SamplingConfig, TraceOptions

    engine = _engine(model, key, kernel)
    t0 = _clock(device)
    tokens = [t.token_id for t in engine.generate(prompt_ids, n, SamplingConfig(), TraceOptions(masks=False))]
    return (_clock(device) - t0) * 1000.0, tokens


def run_transformers(hf_model, prompt_ids: list[int], n: int, device) -> tuple[float, list[int]]:
    """Milliseconds for transformers' greedy `generate` (its default dynamic cache) to produce n tokens."""
    import torch
    from transformers import GenerationConfig

    gen = GenerationConfig(max_new_tokens=n, min_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=0)
    x = torch.tensor([prompt_ids], device=device)
    mask = torch.ones_like(x)
    t0 = _clock(device)
    with torch.inference_mode():
        out = hf_model.generate(x, attention_mask=mask, generation_config=gen)
    ms = (_clock(device) - t0) * 1000.0
    return ms, out[0, len(prompt_ids):].tolist()


ENGINES = ("concat", "static", "paged")


def _engine(model, key: str, kernel: str = "torch"):
    from kvviz.engines import make_engine

    return make_engine(key, model, kernel=kernel)


BURST = 8  # steps a side takes before the other takes as many (kvviz.measure.reference.BURST)


class _Lockstep:
    """A transformers streamer: each time `generate` has emitted BURST new tokens, kvviz takes as many
    steps, timed apart. The two decode in turns, so a second of interference on a shared machine meets
    both alike, while each keeps its caches warm through a burst."""

    def __init__(self, steps, n: int, device) -> None:
        self.steps, self.n, self.device = steps, n, device
        self.puts = 0
        self.kvviz_ms: list[float] = []
        self.kvviz_tokens: list[int] = []
        self.first_token_at: float | None = None  # when transformers' first new token came out

    def put(self, value) -> None:
        self.puts += 1
        if self.puts == 1:  # generate puts the prompt first
            return
        if self.first_token_at is None:
            self.first_token_at = _clock(self.device)
        emitted = self.puts - 1
        if emitted % BURST == 0 or emitted == self.n:
            self._catch_up(emitted)

    def _catch_up(self, upto: int) -> None:
        while len(self.kvviz_tokens) < upto:
            t0 = _clock(self.device)
            trace = next(self.steps)
            self.kvviz_ms.append((_clock(self.device) - t0) * 1000.0)
            self.kvviz_tokens.append(trace.token_id)

    def end(self) -> None:
        self._catch_up(self.n)


def run_lockstep(model, hf_model, prompt_ids: list[int], n: int, device, key: str = "concat",
                 kernel: str = "torch") -> dict:
    """transformers' `generate` and kvviz's engine `key` decoding in turns (BURST steps each), as
    {side: (total ms, prefill ms, tokens)}. transformers' time is the whole call less kvviz's steps
    inside it; its prefill runs to its first new token. kvviz's prefill is its first step."""
    import torch
    from transformers import GenerationConfig

    from kvviz.config import SamplingConfig, TraceOptions

    gen = GenerationConfig(max_new_tokens=n, min_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=0)
    x = torch.tensor([prompt_ids], device=device)
    mask = torch.ones_like(x)
    t0 = _clock(device)
    steps = _engine(model, key, kernel).generate(prompt_ids, n, SamplingConfig(), TraceOptions(masks=False))
    setup_ms = (_clock(device) - t0) * 1000.0
    streamer = _Lockstep(steps, n, device)
    t0 = _clock(device)
    with torch.inference_mode():
        out = hf_model.generate(x, attention_mask=mask, generation_config=gen, streamer=streamer)
    whole_ms = (_clock(device) - t0) * 1000.0
    kvviz_ms = setup_ms + sum(streamer.kvviz_ms)
    tf_prefill = (streamer.first_token_at - t0) * 1000.0
    return {f"kvviz {key}": (kvviz_ms, setup_ms + streamer.kvviz_ms[0], streamer.kvviz_tokens),
            "transformers": (whole_ms - sum(streamer.kvviz_ms), tf_prefill, out[0, len(prompt_ids):].tolist())}


def run(args) -> int:
    import torch

    from kvviz.checkpoint_files import check_folder
    from kvviz.fileio import check_writable
    from kvviz.models.hf import load_hf_model, load_hf_tokenizer, read_hf_config
    from kvviz.models.presets import resolve_name
    from kvviz.runtime.devices import resolve_device, resolve_dtype

    if args.tokens < 2:
        raise ValueError(f"--tokens must be at least 2 (one prefill, then decode), got {args.tokens}")
    if args.json_path:  # before the run: a refused path must not cost a whole benchmark
        check_writable(args.json_path, "--json")
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    transformers = _import_transformers()
    with tempfile.TemporaryDirectory(prefix="kvviz-hfbench-") as tmp:
        if args.model is None:
            folder = build_random_llama(Path(tmp), args.seed)
            label = "random Llama (built with transformers)"
        else:
            folder, label = check_folder(resolve_name(args.model)), args.model
        cfg = read_hf_config(folder)
        dtype = resolve_dtype(None if args.dtype == "auto" else args.dtype, device, "float32")
        prompt_ids = load_hf_tokenizer(folder, cfg).encode(args.prompt)
        check_against_model(cfg, len(prompt_ids), args.tokens)
        model = load_hf_model(folder).to(device=device, dtype=dtype)
        from kvviz.kernels import check_engines, check_model

        check_engines(args.kernel, (args.engine,))
        check_model(args.kernel, model)  # before any run: one line, exit 2
        hf_model = transformers.AutoModelForCausalLM.from_pretrained(
            folder, local_files_only=True, attn_implementation="sdpa").to(device=device, dtype=dtype).eval()
        return _measure(args, cfg, label, model, hf_model, prompt_ids, device, dtype, transformers.__version__)


def _measure(args, cfg, label, model, hf_model, prompt_ids, device, dtype, hf_version) -> int:
    import torch

    from kvviz.kernels import label as label_of

    key = args.engine
    kernel = args.kernel
    sides = {f"kvviz {key}": lambda n: run_kvviz(model, prompt_ids, n, device, key, kernel),
             "transformers": lambda n: run_transformers(hf_model, prompt_ids, n, device)}
    n = args.tokens
    for fn in sides.values():  # warm-up: first-call allocations and kernel choice stay out of the figures
        fn(min(4, n))
    full: dict[str, list[float]] = {k: [] for k in sides}
    prefill: dict[str, list[float]] = {k: [] for k in sides}
    tokens: dict[str, list[int]] = {}
    peaks: dict[str, int | None] = {}
    consistent = True
    for _ in range(args.repeat):  # in turns: BURST steps of one, then as many of the other
        for name, (ms, first_ms, toks) in run_lockstep(model, hf_model, prompt_ids, n, device, key,
                                                               kernel).items():
            full[name].append(ms)
            prefill[name].append(first_ms)
            if tokens.setdefault(name, toks) != toks:
                consistent = False
                print(f"  {name}: greedy repeats produced different tokens", file=sys.stderr)
    for name, fn in sides.items():  # device memory: each side alone (a CUDA figure)
        _peak_reset(device)
        fn(n)
        peaks[name] = _peak(device)
    results = [Side(name, statistics.median(full[name]), statistics.median(prefill[name]), n, peaks[name])
               for name in sides]
    ours, ref = results
    # Each repeat's own ratio of decode times, then the median (the sides ran in turn within a repeat)
    per_repeat = sorted((full[ref.name][i] - prefill[ref.name][i]) / (full[ours.name][i] - prefill[ours.name][i])
                        for i in range(args.repeat))
    ratio = statistics.median(per_repeat)
    identical = consistent and tokens[ours.name] == tokens["transformers"]
    dtype_name = str(dtype).replace("torch.", "")
    print(f"checkpoint {label}: {cfg.arch}, {cfg.n_layer} layers, {cfg.n_head} heads ({cfg.n_kv_head} KV) of "
          f"{cfg.head_dim}, hidden {cfg.d_model}, vocab {cfg.vocab_size}")
    print(f"device {device.type}, {dtype_name}, {torch.get_num_threads()} thread(s); transformers {hf_version}; "
          f"prompt {len(prompt_ids)} tokens; {n} new tokens; median of {args.repeat}, the two decoding in turns of "
          f"{BURST} steps; kvviz's decode kernel: {label_of(kernel)} ({kernel})")
    width = max(14, *(len(s.name) for s in results))
    print(f"{'side':<{width}} {'total ms':>9} {'prefill ms':>10} {'decode tok/s':>12}"
          + (f" {'peak device':>11}" if device.type == "cuda" else ""))
    for s in results:
        print(f"{s.name:<{width}} {s.total_ms:>9.1f} {s.prefill_ms:>10.2f} {s.decode_tokens_per_s:>12.1f}"
              + (f" {fmt_bytes(s.peak_device_bytes):>11}" if s.peak_device_bytes is not None else ""))
    spread = f" (repeats {per_repeat[0]:.2f}-{per_repeat[-1]:.2f}x)" if args.repeat > 1 else ""
    print(f"decode speed, kvviz / transformers: {ratio:.2f}x, the median of each repeat's ratio{spread}")
    print("tokens identical: " + ("yes" if identical else "NO"))
    if args.json_path:
        from kvviz.fileio import write_output

        doc = {"checkpoint": label, "model": cfg.to_dict(), "device": device.type, "dtype": dtype_name,
               "threads": torch.get_num_threads(), "transformers": hf_version, "prompt_tokens": len(prompt_ids),
               "new_tokens": n, "repeat": args.repeat, "engine": key,
               "kernel": kernel, "ratio": ratio, "ratio_per_repeat": per_repeat,
               "identical": identical,
               "sides": [dict(name=s.name, total_ms=s.total_ms, prefill_ms=s.prefill_ms,
                              decode_tokens_per_s=s.decode_tokens_per_s, peak_device_bytes=s.peak_device_bytes,
                              runs_ms=full[s.name], prefill_runs_ms=prefill[s.name]) for s in results]}
        write_output(args.json_path, json.dumps(doc, indent=1) + "\n", "--json")
    return 0 if identical else 1
