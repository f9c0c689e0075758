"""The Serve view's grid, as the shell lays it out (kvviz.ui.shell.grid.ShellGrid): its panels (SERVE_PANELS),
the timeline and the pool above the plots, the counters and the text where they read; where they do not, the
timeline, then the pool, the plots, the counters, the text keep their room first, and the timeline takes three
parts of a row's room left (its slots are its width). Configuration only: no widgets here.
"""
from __future__ import annotations

from kvviz.ui.serve.panels import SERVE_PANELS
from kvviz.ui.shell.grid import FRAME_MIN, GridSpec

PRIORITY = {"timeline": 0, "pool": 1, "usage": 2, "latency": 2, "counters": 3, "text": 4}
DEFAULT_ROWS = (("timeline", "pool"), ("usage", "latency", "counters", "text"))
WEIGHT = {"timeline": 3}
# The timeline's and the pool's readable sizes grow with the requests and schedulers drawn.
SERVE_GRID = GridSpec("serve", SERVE_PANELS, DEFAULT_ROWS, PRIORITY, WEIGHT, FRAME_MIN, sized_by_data=True)
