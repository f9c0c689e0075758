"""View > Zoom and `kvviz --zoom`: the choices, the range, the settings key, the next choice up
or down. No Qt (the window's Presentation applies a zoom, live)."""
from __future__ import annotations

ZOOMS = (100, 125, 150, 175, 200)  # View > Zoom's choices, percent
ZOOM_RANGE = (50, 300)
ZOOM_KEY = "view/zoom"


def check_zoom(percent: int, option: str = "--zoom") -> int:
    lo, hi = ZOOM_RANGE
    if not lo <= percent <= hi:
        raise ValueError(f"{option} {percent} is outside {lo}..{hi} (percent)")
    return percent


def next_zoom(percent: int, direction: int) -> int:
    """The next of ZOOMS above (direction > 0) or below percent; percent itself at either end."""
    if direction > 0:
        return next((z for z in ZOOMS if z > percent), max(percent, ZOOMS[-1]))
    return next((z for z in reversed(ZOOMS) if z < percent), min(percent, ZOOMS[0]))

