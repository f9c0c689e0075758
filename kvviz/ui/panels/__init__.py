"""Registry of panels: a new panel is one file here plus one entry in PANELS."""
from __future__ import annotations

PANELS: list[tuple[str, str]] = [
    # (key, "module:Class"), in the order the window shows them
    ("work_matrix", "kvviz.ui.panels.work_matrix:WorkMatrixPanel"),
]
