"""Registry of engines: every engine of kvviz.catalog, `naive` with no cache, each other one a cached engine
over its cache strategy (kvviz.caches.CACHES)."""
from __future__ import annotations

from kvviz import catalog
from kvviz.engines.base import Engine, validate_request
from kvviz.engines.cached import CachedEngine
from kvviz.engines.naive import NaiveEngine
from kvviz.kernels import DEFAULT_KERNEL, check_engines, check_model
from kvviz.names import parse_names

# The registry's names, read from the catalog at each use (kvviz.catalog: names, help, exactness).
__getattr__ = catalog.live_names(__name__, ENGINE_KEYS=catalog.engine_keys, EXACT_KEYS=catalog.exact_keys,
                                 APPROXIMATE_KEYS=catalog.approximate_keys, ENGINE_HELP=catalog.engine_help)


def make_engine(key: str, model, *, kernel: str = DEFAULT_KERNEL, block_size: int = 16, window: int | None = None,
                sinks: int | None = None, residual: int | None = None, spec_k: int | None = None,
                rollback: str | None = None, draft=None) -> Engine:
    """`kernel`: what runs each decode step (kvviz.kernels): "torch" (PyTorch's ops, the default), "native"
    (kvviz's C step: concat, static, paged), "openblas" (every projection through numpy's OpenBLAS),
    "compiled" (static's fixed-shape step under torch.compile), "cuda-graph" (the same step replayed from a CUDA
    graph). An engine the kernel cannot run, or a model or device it does not apply to, is refused in one line.
    `window`, `sinks`, `residual`: W, S and R of the approximate caches (their defaults when None). `spec_k`,
    `rollback`: the speculative engines' drafts per round and rollback rule ("overwrite" or "crop"); `draft`:
    spec-draft's draft model (a model, or a name or folder to load; None: kvviz.engines.drafts.draft_model_for)."""
    entry = catalog.entry(key)
    if entry is None:
        raise ValueError(f"unknown engine {key!r}; choose from {', '.join(catalog.engine_keys())}")
    check_engines(kernel, (key,))
    check_model(kernel, model)
    if kernel in ("compiled", "cuda-graph"):
        from kvviz.engines.graph import GraphStaticEngine

        return GraphStaticEngine(model, block_size=block_size, graph=kernel == "cuda-graph",
                                 compiled=kernel == "compiled")
    if entry.engine is not None:
        from kvviz.engines.spec import SpecEngine

        defaults = catalog.SETTING_DEFAULTS
        return SpecEngine(model, key=key, draft="model" if key == "spec-draft" else "lookup",
                          k=defaults["spec_k"] if spec_k is None else spec_k,
                          rollback=defaults["rollback"] if rollback is None else rollback, draft_model=draft,
                          block_size=block_size, kernel=kernel)
    if entry.cache is None:
        return NaiveEngine(model, block_size=block_size, kernel=kernel)
    return CachedEngine(model, cache_key=key, block_size=block_size, kernel=kernel,
                        options=dict(window=window, sinks=sinks, residual=residual))


def parse_engines(text: str | list[str]) -> tuple[str, ...]:
    """`"naive,concat"` -> ("naive", "concat"), refusing unknown or repeated names."""
    return parse_names(text, catalog.engine_keys(), "engine", "engines")


__all__ = ["ENGINE_KEYS", "EXACT_KEYS", "APPROXIMATE_KEYS", "ENGINE_HELP", "Engine", "make_engine", "parse_engines",
           "validate_request"]
