"""Registry of engines: `naive`, then one cached engine per cache strategy in kvviz.caches.CACHES."""
from __future__ import annotations

from kvviz.caches import CACHES
from kvviz.engines.base import Engine, validate_request
from kvviz.engines.cached import CachedEngine
from kvviz.engines.naive import NaiveEngine
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


def make_engine(key: str, model, *, block_size: int = 16, window: int | None = None, sinks: int | None = None,
                residual: int | None = None, cuda_graph: bool = False, compiled: bool = False,
                blas: str = "auto") -> Engine:
    """`window`, `sinks`, `residual`: W, S and R of the approximate caches (their defaults when None).
    `cuda_graph`: `static` with its decode step captured as a CUDA graph (kvviz.engines.graph; CUDA only).
    `compiled`: `static` with its static-shape decode step compiled by torch.compile (an option, not a default).
    `blas`: "auto" (the default) runs concat, static and paged with each decode step one C call (kvviz.native)
    wherever it applies (a float32 Llama-family model on a CPU, a C compiler), torch's ops elsewhere; "torch"
    always torch's; "native" that kernel or a one-line refusal; "openblas" runs a cached engine with every
    projection through numpy's OpenBLAS (kvviz.kernels; an option measured beside the default, CPU float32 only)."""
    if blas not in ("torch", "auto"):
        if key not in CACHES or cuda_graph or compiled:
            raise ValueError(f"--blas {blas} is for the eager cached engines alone, not {key!r}"
                             + (" with a CUDA graph" if cuda_graph else " compiled" if compiled else ""))
        return CachedEngine(model, cache_key=key, block_size=block_size, blas=blas,
                            options=dict(window=window, sinks=sinks, residual=residual))
    if compiled:
        if key != "static" or cuda_graph:
            raise ValueError(f"a compiled step is for the static engine alone, not {key!r}"
                             + (" with a CUDA graph" if cuda_graph else ""))
        from kvviz.engines.graph import GraphStaticEngine

        return GraphStaticEngine(model, block_size=block_size, graph=False, compiled=True)
    if cuda_graph:
        if key != "static":
            raise ValueError(f"a CUDA graph is for the static engine only, not {key!r}")
        from kvviz.engines.graph import GraphStaticEngine

        return GraphStaticEngine(model, block_size=block_size, graph=True)
    if key == "naive":
        return NaiveEngine(model, block_size=block_size)
    if key in CACHES:
        return CachedEngine(model, cache_key=key, block_size=block_size, blas=blas,
                            options=dict(window=window, sinks=sinks, residual=residual))
    raise ValueError(f"unknown engine {key!r}; choose from {', '.join(ENGINE_KEYS)}")


def parse_engines(text: str | list[str]) -> tuple[str, ...]:
    """`"naive,concat"` -> ("naive", "concat"), refusing unknown or repeated names."""
    return parse_names(text, ENGINE_KEYS, "engine", "engines")


__all__ = ["ENGINE_KEYS", "EXACT_KEYS", "APPROXIMATE_KEYS", "ENGINE_HELP", "Engine", "make_engine", "parse_engines",
           "validate_request"]
