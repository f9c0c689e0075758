"""Registry of panels: a new panel is one file here plus one entry in PANELS."""
from __future__ import annotations

PANELS: list[tuple[str, str]] = [
    # (key, "module:Class"), in the order the window shows them
    ("token_stream", "kvviz.ui.panels.token_stream:TokenStreamPanel"),
    ("work_matrix", "kvviz.ui.panels.work_matrix:WorkMatrixPanel"),
    ("recompute", "kvviz.ui.panels.recompute:RecomputePanel"),
    ("attention", "kvviz.ui.panels.attention:AttentionPanel"),
    ("latency", "kvviz.ui.panels.latency:LatencyPanel"),
    ("bytes", "kvviz.ui.panels.bytes:BytesPanel"),
    ("cache_memory", "kvviz.ui.panels.cache_memory:CacheMemoryPanel"),
    ("quality", "kvviz.ui.panels.quality:QualityPanel"),
    ("summary", "kvviz.ui.panels.summary:SummaryPanel"),
    ("speculation", "kvviz.ui.panels.speculation:SpeculationPanel"),
]
