"""Registry of the serve view's panels: a new panel is one file here plus one entry in SERVE_PANELS."""
from __future__ import annotations

SERVE_PANELS: list[tuple[str, str]] = [
    # (key, "module:Class"), in the order the grid lays them out (the first row: the first two)
    ("timeline", "kvviz.ui.serve.panels.timeline:TimelinePanel"),
    ("pool", "kvviz.ui.serve.panels.pool:PoolPanel"),
    ("usage", "kvviz.ui.serve.panels.usage:UsagePanel"),
    ("latency", "kvviz.ui.serve.panels.latency:LatencyPanel"),
    ("counters", "kvviz.ui.serve.panels.counters:CountersPanel"),
    ("text", "kvviz.ui.serve.panels.text:TextPanel"),
]
