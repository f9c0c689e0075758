"""Registry of cache strategies: CACHES maps each cached engine of kvviz.catalog to its class, imported from the
entry's "module:Class" when first asked for, so a new strategy is one file here plus its catalog entry."""
from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from kvviz import catalog
from kvviz.caches.base import ByteCounters, KVCache
from kvviz.caches.concat import ConcatCache
from kvviz.caches.int8 import Int8Cache
from kvviz.caches.paged import PagedCache
from kvviz.caches.sinks import SinksCache
from kvviz.caches.static import StaticCache
from kvviz.caches.window import WindowCache


class _Caches(Mapping[str, type[KVCache]]):
    """Cache key -> class, read from the catalog at each use."""

    def __getitem__(self, key: str) -> type[KVCache]:
        entry = catalog.entry(key)
        if entry is None or entry.cache is None:
            raise KeyError(key)
        module, _, name = entry.cache.partition(":")
        return getattr(importlib.import_module(module), name)

    def __iter__(self) -> Iterator[str]:
        return iter(catalog.cache_keys())

    def __len__(self) -> int:
        return len(catalog.cache_keys())


CACHES: Mapping[str, type[KVCache]] = _Caches()

__all__ = ["CACHES", "ByteCounters", "KVCache", "ConcatCache", "StaticCache", "PagedCache", "WindowCache", "SinksCache",
           "Int8Cache"]
