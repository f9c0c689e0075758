"""Registry of engines: `naive`, then one cached engine per cache strategy in kvviz.caches.CACHES."""
from __future__ import annotations

from kvviz.caches import CACHES
from kvviz.engines.base import Engine, validate_request
from kvviz.engines.cached import CachedEngine
from kvviz.engines.naive import NaiveEngine

ENGINE_KEYS: tuple[str, ...] = ("naive", *CACHES)

ENGINE_HELP = {
    "naive": "no cache: every step re-runs the whole sequence",
    "concat": "the chapter's cache: torch.cat copies the whole history every step",
    "static": "preallocated to the run's length; new K/V written in place",
    "paged": "fixed-size blocks from a pool, a block table per sequence",
}


def make_engine(key: str, model, *, block_size: int = 16) -> Engine:
    if key == "naive":
        return NaiveEngine(model, block_size=block_size)
    if key in CACHES:
        return CachedEngine(model, cache_key=key, block_size=block_size)
    raise ValueError(f"unknown engine {key!r}; choose from {', '.join(ENGINE_KEYS)}")


def parse_engines(text: str | list[str]) -> tuple[str, ...]:
    """`"naive,concat"` -> ("naive", "concat"), refusing unknown or repeated names."""
    items = [s.strip() for s in (text.split(",") if isinstance(text, str) else text) if s.strip()]
    if not items:
        raise ValueError("no engines given")
    for key in items:
        if key not in ENGINE_KEYS:
            raise ValueError(f"unknown engine {key!r}; choose from {', '.join(ENGINE_KEYS)}")
    if len(set(items)) != len(items):
        raise ValueError(f"an engine is named twice in {','.join(items)}")
    return tuple(items)


__all__ = ["ENGINE_KEYS", "ENGINE_HELP", "Engine", "make_engine", "parse_engines", "validate_request"]
