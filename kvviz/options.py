"""The options every command shares, with one table of bounds: every `kvviz` command's parser takes its
bounds from here (`bounded(key)`, `model_name`), and the app's run form reads the same table.

A value outside its bounds is refused where it is parsed (argparse's one line, exit 2), so no command
accepts, clamps or refuses differently from another. Bounds that depend on the model (the context, the
vocabulary, the layer count) are checked by `check_against_model` once the config is read and before
anything is allocated. Stdlib only: no torch, no Qt.
"""
from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass
from typing import Any

from kvviz.catalog import SETTING_DEFAULTS, used_settings
from kvviz.format import DEFAULT_PROMPT


@dataclass(frozen=True)
class Bound:
    """Inclusive range of one option; `low_open` makes the low end exclusive (top-p > 0)."""

    low: float
    high: float
    integer: bool = True
    low_open: bool = False
    why: str = ""  # where the high end comes from, said in the refusal

    def holds(self, value: Any) -> bool:
        if self.integer:
            if not isinstance(value, int) or isinstance(value, bool):
                return False
        elif not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        return above and value <= self.high

    def describe(self) -> str:
        fmt = (lambda v: f"{int(v):,}") if self.integer else (lambda v: f"{v:g}")
        low = f"more than {fmt(self.low)}" if self.low_open else f"at least {fmt(self.low)}"
        return f"{low} and at most {fmt(self.high)}" + (f" ({self.why})" if self.why else "")


# The approximate caches' defaults (kvviz.catalog.SETTING_DEFAULTS): a window of W tokens (sinks included), S sink
# tokens; int8 keeps no full-precision residual unless --residual R is given.
WINDOW_DEFAULT = SETTING_DEFAULTS["window"]
SINKS_DEFAULT = SETTING_DEFAULTS["sinks"]
# The speculative engines' defaults: k drafts per round, and how rejected drafts' K/V are undone.
SPEC_K_DEFAULT = SETTING_DEFAULTS["spec_k"]
ROLLBACK_DEFAULT = SETTING_DEFAULTS["rollback"]
ROLLBACKS = ("overwrite", "crop")  # kvviz.catalog: overwrite (gpt-fast, vLLM) or crop (transformers, SGLang)

# Largest paged-cache block: the run form's limit; a larger block than the run's context is refused too.
BLOCK_SIZE_MAX = 4096
CPU_COUNT = os.cpu_count() or 1

BOUNDS: dict[str, Bound] = {
    "tokens": Bound(1, 1_000_000, why="and no more than the model's context less the prompt"),
    "temperature": Bound(0.0, 10.0, integer=False, why="0 is greedy; above 10 sampling is uniform noise"),
    "top_k": Bound(1, 1_000_000, why="and no more than the model's vocabulary"),
    "top_p": Bound(0.0, 1.0, integer=False, low_open=True),
    "seed": Bound(0, 2**31 - 1),
    "threads": Bound(1, 4 * CPU_COUNT, why=f"four per core of this machine's {CPU_COUNT}"),
    "block_size": Bound(1, BLOCK_SIZE_MAX, why="and no more than the model's context"),
    "repeat": Bound(1, 1000),
    "beside": Bound(0, 100_000, why="decode steps timed in turns with the read probe's products; 0 is off"),
    "batch_size": Bound(1, 4096),
    "blocks": Bound(1, 1 << 20, why="blocks in kvviz serve's pool"),  # kvviz.serving
    "token_budget": Bound(1, 1_000_000, why="and no smaller than one block"),
    "context": Bound(1, 1_000_000, why="and no more than the model's context"),
    "layer": Bound(-1, 1023, why="and below the model's layer count; -1: no weights"),
    "head": Bound(0, 1023, why="and below the model's head count"),
    "window": Bound(1, 1_000_000, why="and no more than the run's tokens"),
    "sinks": Bound(1, 1_000_000, why="and fewer than the window"),
    "residual": Bound(1, 1_000_000, why="and no more than the run's tokens"),
    "spec_k": Bound(1, 64, why="drafts per speculative round"),
    "prompt_tokens": Bound(0, 1_000_000, why="and no more than the model's context"),
    "bandwidth_gbps": Bound(0.0, 1e6, integer=False, low_open=True, why="a million GB/s is no memory there is"),
    "step": Bound(-1_000_000, 1_000_000, why="negative counts from the end"),
    "zoom": Bound(50, 300, why="View > Zoom's range, percent"),  # kvviz.ui.zoom.ZOOM_RANGE
    "timeout": Bound(0.0, 86_400.0, integer=False, low_open=True, why="seconds: a day at most"),
    "train_steps": Bound(1, 10_000_000),
    "learning_rate": Bound(0.0, 10.0, integer=False, low_open=True),
    "warmup": Bound(0, 10_000_000),
    "weight_decay": Bound(0.0, 10.0, integer=False),
    "time_limit": Bound(0.0, 1e7, integer=False, low_open=True, why="seconds"),
    "eval_every": Bound(0, 10_000_000, why="0: never"),
    "stall_s": Bound(0.0, 86_400.0, integer=False, low_open=True, why="seconds"),
}
MAX_MODEL_CHARS = 4096  # a preset, a folder path (PATH_MAX) or ORG/NAME@REVISION all fit


def option_name(key: str) -> str:
    return "--" + key.replace("_", "-")


def check_value(key: str, value: Any, label: str | None = None) -> Any:
    """`value` if BOUNDS[key] holds it, else ValueError naming the option and its bounds."""
    bound = BOUNDS[key]
    if not bound.holds(value):
        raise ValueError(f"{label or option_name(key)} must be {bound.describe()}, got {value!r}")
    return value


def _parse_number(key: str, text: str) -> int | float:
    bound = BOUNDS[key]
    try:
        value: int | float = int(text, 10) if bound.integer else float(text)
    except ValueError:
        kind = "a whole number" if bound.integer else "a number"
        raise argparse.ArgumentTypeError(f"{kind} expected, got {text!r}") from None
    if not bound.holds(value):
        raise argparse.ArgumentTypeError(f"must be {bound.describe()}, got {text}")
    return value


def bounded(key: str):
    """An argparse `type` that refuses values outside BOUNDS[key] (argparse: one line, exit 2)."""
    def parse(text: str) -> int | float:
        return _parse_number(key, text)

    parse.__name__ = key.replace("_", "-")  # argparse names the type in some messages
    return parse


def model_name(text: str) -> str:
    """An argparse `type` for --model: refuses an empty name (which would read the current folder as a
    checkpoint), a NUL, and a name longer than any path or hub id."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the model name is empty (a preset, a folder, or ORG/NAME)")
    if "\0" in text or len(text) > MAX_MODEL_CHARS:
        raise argparse.ArgumentTypeError(f"not a model name: {len(text):,} characters"
                                         + (" with a NUL" if "\0" in text else f", more than {MAX_MODEL_CHARS:,}"))
    return text


def add_model(parser: argparse.ArgumentParser, default: str | None, help_text: str) -> None:
    parser.add_argument("--model", type=model_name, default=default, help=help_text)


def nonempty_text(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("the prompt is empty")
    return text


def parse_size(text: str) -> tuple[int, int]:
    """An image's --size WIDTHxHEIGHT (kvviz shot, kvviz export), 320x240 to 8192x8192 pixels."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--size must be WIDTHxHEIGHT such as 1600x1000, got {text!r}") from None
    if not (320 <= w <= 8192 and 240 <= h <= 8192):
        raise ValueError(f"--size {w}x{h} is outside 320x240 .. 8192x8192")
    return w, h


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by commands that run engines (bench, export, shot)."""
    parser.add_argument("--prompt", type=nonempty_text, default=DEFAULT_PROMPT,
                        help="prompt text (default: a sentence)")
    add_model(parser, "tiny", "preset name, model folder, or cached hub id ORG/NAME[@REV] (default: tiny)")
    parser.add_argument("--device", default="auto", help="auto (CUDA, then MPS, then CPU), cpu, cuda, mps")
    parser.add_argument("--dtype", default="auto", help="fp32, bf16, fp16 (default: bf16 on CUDA, else the model's)")
    add_seed(parser, "sampling seed")
    parser.add_argument("--temperature", type=bounded("temperature"), default=0.0, help="0 = greedy (default)")
    parser.add_argument("--top-k", type=bounded("top_k"), default=None)
    parser.add_argument("--top-p", type=bounded("top_p"), default=None)
    parser.add_argument("--block-size", type=bounded("block_size"), default=16,
                        help=f"paged cache block size in tokens (at most {BLOCK_SIZE_MAX} and the model's context)")
    add_cache_options(parser)
    add_spec_options(parser)
    add_kernel(parser)
    add_threads(parser)


def add_kernel(parser: argparse.ArgumentParser) -> None:
    """--kernel: what runs every engine's decode steps (kvviz.kernels), one for the whole run."""
    from kvviz.kernels import DEFAULT_KERNEL, KERNEL_KEYS, KERNELS

    parser.add_argument("--kernel", choices=KERNEL_KEYS, default=DEFAULT_KERNEL,
                        help="what runs every engine's decode steps, one kernel for the run (default "
                             f"{DEFAULT_KERNEL}): " + "; ".join(f"{k}: {v.help}" for k, v in KERNELS.items()))


def add_cache_options(parser: argparse.ArgumentParser) -> None:
    """W, S and R of the approximate caches (used only when window, sinks or int8 run)."""
    parser.add_argument("--window", type=bounded("window"), default=WINDOW_DEFAULT, metavar="W",
                        help=f"window and sinks caches: tokens kept, sinks included (default {WINDOW_DEFAULT})")
    parser.add_argument("--sinks", type=bounded("sinks"), default=SINKS_DEFAULT, metavar="S",
                        help=f"sinks cache: first tokens kept for ever, fewer than W (default {SINKS_DEFAULT})")
    parser.add_argument("--residual", type=bounded("residual"), default=None, metavar="R",
                        help="int8 cache: newest tokens kept in full precision (default none)")


def check_rollback(value: Any, label: str = "rollback") -> str:
    """`value` if it is one of ROLLBACKS, else ValueError in one line."""
    if value not in ROLLBACKS:
        raise ValueError(f"{label} must be {' or '.join(ROLLBACKS)}, got {value!r}")
    return value


def add_spec_options(parser: argparse.ArgumentParser) -> None:
    """k and the rollback rule of the speculative engines (used only when spec-lookup or spec-draft run)."""
    parser.add_argument("--spec-k", type=bounded("spec_k"), default=SPEC_K_DEFAULT, metavar="K",
                        help=f"speculative engines: tokens drafted per round, verified in one forward (default "
                             f"{SPEC_K_DEFAULT})")
    parser.add_argument("--rollback", choices=ROLLBACKS, default=ROLLBACK_DEFAULT,
                        help="speculative engines: how rejected drafts' K/V are undone: overwrite (the position "
                             "moves back and the next round writes over them, gpt-fast, vLLM) or crop (cut from "
                             f"the cache, transformers, SGLang) (default {ROLLBACK_DEFAULT})")


def check_cache_settings(engines, n_prompt: int, new_tokens: int, window: int, sinks: int,
                         residual: int | None, spec_k: int | None = None, rollback: str | None = None) -> None:
    """W, S, R against the engines that use them and the run's length (tokens stored: the prompt and
    every new token but the last). One ValueError line; settings of engines not run are not checked."""
    stored = n_prompt + new_tokens - 1
    run = f"the run stores {stored:,} tokens (prompt {n_prompt:,} + new {new_tokens:,} - 1)"
    used = used_settings(engines)
    if "window" in used:
        check_value("window", window, "window")
        if window > stored:
            raise ValueError(f"window {window:,} is larger than the run: {run}, so it would drop nothing")
    if "sinks" in used:
        check_value("sinks", sinks, "sinks")
        if sinks >= window:
            raise ValueError(f"sinks ({sinks:,}) must be fewer than the window ({window:,}): the window counts them")
    if "residual" in used and residual is not None:
        check_value("residual", residual, "residual")
        if residual > stored:
            raise ValueError(f"residual {residual:,} is larger than the run: {run}")
    if "spec_k" in used and spec_k is not None:
        check_value("spec_k", spec_k, "draft tokens k")
    if "rollback" in used and rollback is not None:
        check_rollback(rollback)


def add_threads(parser: argparse.ArgumentParser, default: int | None = None) -> None:
    parser.add_argument("--threads", type=bounded("threads"), default=default,
                        help="torch CPU threads" + (f" (default {default})" if default else ""))


def add_seed(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--seed", type=bounded("seed"), default=0, help=help_text)


def add_tokens(parser: argparse.ArgumentParser, default, *, many: bool = False, help_text: str = "") -> None:
    parser.add_argument("--tokens", type=bounded("tokens"), default=default, nargs="+" if many else None,
                        help=help_text or f"new tokens (default {default})")


def add_repeat(parser: argparse.ArgumentParser, default: int) -> None:
    parser.add_argument("--repeat", type=bounded("repeat"), default=default,
                        help="timed repeats (median reported)")


def add_output(parser: argparse.ArgumentParser, flag: str, dest: str, help_text: str) -> None:
    parser.add_argument(flag, dest=dest, default=None, metavar="FILE", help=help_text)


def check_against_model(cfg, n_prompt: int, new_tokens: int, *, block_size: int | None = None,
                        top_k: int | None = None, layer: int | None = None, head: int | None = None) -> None:
    """The bounds that depend on the model: the context, the vocabulary, its layers and heads.
    `cfg` is a ModelConfig (or anything with max_seq_len, vocab_size, n_layer, n_head)."""
    if n_prompt < 1:
        raise ValueError("the prompt is empty")
    check_value("tokens", new_tokens, "new tokens")
    if n_prompt + new_tokens > cfg.max_seq_len:
        raise ValueError(f"prompt ({n_prompt} tokens) + new tokens ({new_tokens}) = {n_prompt + new_tokens} "
                         f"exceeds the model's context of {cfg.max_seq_len}")
    if block_size is not None:
        check_value("block_size", block_size, "block size")
        if block_size > cfg.max_seq_len:
            raise ValueError(f"block size {block_size} is larger than the model's context of {cfg.max_seq_len} "
                             f"tokens (one block would never fill)")
    if top_k is not None:
        check_value("top_k", top_k, "top-k")
        if top_k > cfg.vocab_size:
            raise ValueError(f"top-k {top_k} is more than the model's vocabulary of {cfg.vocab_size}")
    if layer is not None and layer >= 0 and layer >= cfg.n_layer:
        raise ValueError(f"attention layer {layer} is outside 0..{cfg.n_layer - 1}")
    if head is not None and head >= cfg.n_head:
        raise ValueError(f"attention head {head} is outside 0..{cfg.n_head - 1}")


def check_run_config(run) -> list[str]:
    """Every problem with a RunConfig that needs no model, one line each (empty: fine). For the app's
    form: the same bounds the commands apply at parse time."""
    problems = []
    if not run.prompt.strip():
        problems.append("the prompt is empty")
    checks = [("tokens", run.max_new_tokens, "new tokens"), ("block_size", run.block_size, "block size"),
              ("temperature", run.sampling.temperature, "temperature"), ("seed", run.sampling.seed, "seed")]
    if run.sampling.top_k is not None:
        checks.append(("top_k", run.sampling.top_k, "top-k"))
    if run.sampling.top_p is not None:
        checks.append(("top_p", run.sampling.top_p, "top-p"))
    engines = getattr(run, "engines", ())
    used = used_settings(engines)
    if "window" in used:
        checks.append(("window", run.window, "window"))
    if "sinks" in used:
        checks.append(("sinks", run.sinks, "sinks"))
    if "residual" in used and run.residual is not None:
        checks.append(("residual", run.residual, "residual"))
    if "spec_k" in used:
        checks.append(("spec_k", getattr(run, "spec_k", SPEC_K_DEFAULT), "draft tokens k"))
    for key, value, label in checks:
        try:
            check_value(key, value, label)
        except ValueError as exc:
            problems.append(str(exc))
    if "rollback" in used:
        try:
            check_rollback(getattr(run, "rollback", ROLLBACK_DEFAULT))
        except ValueError as exc:
            problems.append(str(exc))
    kernel = getattr(run, "kernel", None)
    if kernel is not None:
        from kvviz.kernels import check_engines, check_kernel

        try:
            check_engines(check_kernel(kernel), engines)
        except ValueError as exc:
            problems.append(str(exc))
    if "sinks" in engines and not problems and run.sinks >= run.window:
        problems.append(f"sinks ({run.sinks:,}) must be fewer than the window ({run.window:,}): the window counts them")
    return problems
