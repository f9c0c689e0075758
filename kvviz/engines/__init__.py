"""Registry of engines: `naive`, then one cached engine per cache strategy in kvviz.caches.CACHES."""
from __future__ import annotations

from kvviz.caches import CACHES
from kvviz.engines.base import Engine, validate_request
from kvviz.engines.cached import CachedEngine
from kvviz.engines.naive import NaiveEngine
from kvviz.kernels import DEFAULT_KERNEL, check_engines, check_model
from kvviz.options import parse_names

ENGINE_KEYS: tuple[str, ...] = ("naive", *CACHES)

ENGINE_HELP = {
    "naive": "no cache: every step re-runs the whole sequence",
    "concat": "the chapter's cache: torch.cat copies the whole history every step",
    "static": "preallocated to the run's length; new K/V written in place",
    "paged": "fixed-size blocks from a pool, a block table per sequence",
    "window": "only the last W tokens kept (Mistral): memory stops at W, older tokens are dropped",
    "sinks": "the first S tokens kept for ever plus the last W - S (StreamingLLM)",
    "int8": "K/V stored as int8 with a scale per token and head, dequantised for attention",
}

EXACT_KEYS: tuple[str, ...] = ("naive", *(k for k, c in CACHES.items() if c.exact))
APPROXIMATE_KEYS: tuple[str, ...] = tuple(k for k, c in CACHES.items() if not c.exact)


def make_engine(key: str, model, *, kernel: str = DEFAULT_KERNEL, block_size: int = 16, window: int | None = None,
                sinks: int | None = None, residual: int | None = None) -> Engine:
    """`kernel`: what runs each decode step (kvviz.kernels): "torch" (PyTorch's ops, the default), "native"
    (kvviz's C step: concat, static, paged), "openblas" (every projection through numpy's OpenBLAS),
    "compiled" (static's fixed-shape step under torch.compile), "cuda-graph" (the same step replayed from a CUDA
    graph). An engine the kernel cannot run, or a model or device it does not apply to, is refused in one line.
    `window`, `sinks`, `residual`: W, S and R of the approximate caches (their defaults when None)."""
    if key not in ENGINE_KEYS:
        raise ValueError(f"unknown engine {key!r}; choose from {', '.join(ENGINE_KEYS)}")
    check_engines(kernel, (key,))
    check_model(kernel, model)
    if kernel in ("compiled", "cuda-graph"):
        from kvviz.engines.graph import GraphStaticEngine

        return GraphStaticEngine(model, block_size=block_size, graph=kernel == "cuda-graph",
                                 compiled=kernel == "compiled")
    if key == "naive":
        return NaiveEngine(model, block_size=block_size, kernel=kernel)
    return CachedEngine(model, cache_key=key, block_size=block_size, kernel=kernel,
                        options=dict(window=window, sinks=sinks, residual=residual))


def parse_engines(text: str | list[str]) -> tuple[str, ...]:
    """`"naive,concat"` -> ("naive", "concat"), refusing unknown or repeated names."""
    return parse_names(text, ENGINE_KEYS, "engine", "engines")


__all__ = ["ENGINE_KEYS", "EXACT_KEYS", "APPROXIMATE_KEYS", "ENGINE_HELP", "Engine", "make_engine", "parse_engines",
           "validate_request"]
