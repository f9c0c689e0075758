"""Registry of cache strategies: a new one is a file here plus one line below."""
from __future__ import annotations

from kvviz.caches.base import ByteCounters, KVCache
from kvviz.caches.concat import ConcatCache
from kvviz.caches.int8 import Int8Cache
from kvviz.caches.paged import PagedCache
from kvviz.caches.sinks import SinksCache
from kvviz.caches.static import StaticCache
from kvviz.caches.window import WindowCache

CACHES: dict[str, type[KVCache]] = {
    "concat": ConcatCache,
    "static": StaticCache,
    "paged": PagedCache,
    "window": WindowCache,
    "sinks": SinksCache,
    "int8": Int8Cache,
}

__all__ = ["CACHES", "ByteCounters", "KVCache", "ConcatCache", "StaticCache", "PagedCache", "WindowCache", "SinksCache",
           "Int8Cache"]
