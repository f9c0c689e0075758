"""StreamingLLM's cache: the first S tokens ("attention sinks") kept for ever, plus the last W - S.

The window W counts every slot, sinks included (as transformers' SinkCache did), so S < W. Positions
are absolute, not re-rotated: see docs/caches.md for why. The ring itself is WindowCache's.
"""
from __future__ import annotations

from kvviz.caches.window import WindowCache
from kvviz.options import SINKS_DEFAULT


class SinksCache(WindowCache):
    key = "sinks"

    def _sink_count(self, sinks: int | None) -> int:
        sinks = SINKS_DEFAULT if sinks is None else sinks
        if isinstance(sinks, bool) or not isinstance(sinks, int) or sinks < 1:
            raise ValueError(f"sinks cache: sinks must be a whole number of at least 1, got {sinks!r}")
        return sinks
