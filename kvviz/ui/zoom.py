"""View > Zoom and `kvviz --zoom`: the choices, the saved one, Qt's scale factor set from it before the
QApplication exists, and the command line that restarts the app at a new zoom. No Qt: it must run
before Qt is imported."""
from __future__ import annotations

import os
import sys

ZOOMS = (100, 125, 150, 175, 200)  # View > Zoom's choices, percent
ZOOM_RANGE = (50, 300)
ZOOM_KEY = "view/zoom"


def check_zoom(percent: int, option: str = "--zoom") -> int:
    lo, hi = ZOOM_RANGE
    if not lo <= percent <= hi:
        raise ValueError(f"{option} {percent} is outside {lo}..{hi} (percent)")
    return percent


def saved_zoom(settings) -> int:
    """View > Zoom's saved choice (100 when none, or when the saved value is not a usable percent)."""
    try:
        percent = int(settings.value(ZOOM_KEY, 100))
    except (TypeError, ValueError):
        return 100
    return percent if ZOOM_RANGE[0] <= percent <= ZOOM_RANGE[1] else 100


def apply_zoom(percent: int) -> None:
    """Scale everything the app draws (text, plots, widgets) by percent/100, through Qt's own scale
    factor: it must be set before the QApplication exists. A QT_SCALE_FACTOR the user set wins."""
    if percent != 100 and "QT_SCALE_FACTOR" not in os.environ:
        os.environ["QT_SCALE_FACTOR"] = f"{percent / 100:g}"


def restart_command(argv: list[str] | None = None) -> list[str]:
    """The command line that started this process (sys.orig_argv: `kvviz`, `python -m kvviz` or
    `python main.py`), less any --zoom, so a restart opens at the zoom View > Zoom saved."""
    if argv is None:  # this interpreter by its full path ("python" on the command line may be another)
        argv = [sys.executable, *sys.orig_argv[1:]]
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--zoom":
            skip = True
        elif not arg.startswith("--zoom="):
            out.append(arg)
    return out


def zoom_in_effect() -> int:
    """The zoom this process draws at, percent (Qt's scale factor)."""
    try:
        return round(float(os.environ.get("QT_SCALE_FACTOR", "1")) * 100)
    except ValueError:
        return 100
