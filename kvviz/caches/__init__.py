"""Registry of cache strategies: a new one is a file here plus one line below."""
from __future__ import annotations

from kvviz.caches.base import ByteCounters, KVCache
from kvviz.caches.concat import ConcatCache
from kvviz.caches.paged import PagedCache
from kvviz.caches.static import StaticCache

CACHES: dict[str, type[KVCache]] = {
    "concat": ConcatCache,
    "static": StaticCache,
    "paged": PagedCache,
}

__all__ = ["CACHES", "ByteCounters", "KVCache", "ConcatCache", "StaticCache", "PagedCache"]
