"""The small data protocol through which the Serve view's panels draw watched servers: a WatchFrame presented
as those panels read a ServeHistory (a lane per server where they draw a lane per scheduler). UsagePanel reads
`schedulers`, `n_steps`, `series` ("step", "used", "preemptions", "batch") and `settings[k].blocks`;
CountersPanel reads `counters(k, step)` and `vllm`. Every figure is derived from the servers' metric samples.
No Qt beyond registering the servers' colours with the serve palette.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kvviz.ui.serve import colors
from kvviz.ui.watch.source import ServerView, WatchFrame


@dataclass(frozen=True)
class _Pool:
    blocks: int


def register_colors(frame: WatchFrame) -> None:
    """Each server's colour under its label among the serve panels' lane colours (they colour a lane by its name);
    the schedulers' own palette stays as it is."""
    for v in frame.servers:
        colors.LANE_COLORS.setdefault(v.label, v.color)


def used_blocks(v: ServerView) -> np.ndarray:
    """Pool blocks in use per sample: vLLM's usage fraction times its pool (NaN before the pool is known)."""
    return v.series["usage"] * v.num_blocks if v.num_blocks else np.full_like(v.series["usage"], np.nan)


def server_counters(v: ServerView) -> dict[str, float]:
    """The Counters panel's rows vLLM's metrics say, over the samples kept: prompt tokens served from the prefix
    cache (saved) and computed (prefilled), their share (prefix hits), preemptions, tokens generated (one TTFT or
    ITL observation each) and per second of the samples' span, the most pool blocks in use."""
    s = v.series
    hits, queries = float(np.nansum(s["hits"])), float(np.nansum(s["queries"]))
    out: dict[str, float] = {"saved": hits, "prefill": max(0.0, queries - hits),
                             "preemptions": float(np.nansum(s["preempted"]))}
    if queries > 0:
        out["hit_rate"] = hits / queries
    tokens = float(np.nansum(s["ttft_n"]) + np.nansum(s["itl_n"]))
    out["tokens"] = tokens
    span = float(np.nansum(s["seconds"]))
    if span > 0:
        out["tokens_per_s"] = tokens / span
    used = used_blocks(v)
    if used.size and not np.isnan(used).all():
        out["peak_blocks"] = float(round(np.nanmax(used)))
    return out


class ServerLanes:
    """A WatchFrame as the serve panels read a ServeHistory: the servers are the lanes, a metric sample a step
    (its x the seconds since the session started)."""

    vllm = None  # no vLLM-beside lane: every lane here is a vLLM server

    def __init__(self, frame: WatchFrame) -> None:
        self.frame = frame
        self.by_label = {v.label: v for v in frame.servers}
        self.schedulers = [v.label for v in frame.servers]
        self.settings = {v.label: _Pool(v.num_blocks or max(1, int(np.nanmax(used_blocks(v), initial=1))))
                         for v in frame.servers}
        register_colors(frame)

    def n_steps(self, k: str | None = None) -> int:
        if k is None:
            return max((len(v.series["t"]) for v in self.frame.servers), default=0)
        v = self.by_label.get(k)
        return len(v.series["t"]) if v is not None else 0

    def series(self, k: str) -> dict[str, np.ndarray]:
        v = self.by_label[k]
        s = v.series
        return {"step": s["t"], "used": used_blocks(v), "preemptions": s["preempted"], "batch": s["running"]}

    def counters(self, k: str, step: float = math.inf) -> dict[str, float]:
        return server_counters(self.by_label[k])
