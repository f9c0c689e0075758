"""Registry of panels: a new panel is one file here plus one entry in PANELS (filled as they land)."""
from __future__ import annotations

PANELS: list[tuple[str, str]] = [
    # (key, "module:Class")
]
