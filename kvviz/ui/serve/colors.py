"""The serve view's colours: a timeline cell's kind, a pool block's state, one colour per request and per
scheduler. Pure look, no data.
"""
from __future__ import annotations

from PySide6.QtGui import QColor

from kvviz.serving.history import CELL_KINDS

CELL_COLORS: dict[str, str] = {
    "none": "#ffffff",  # not arrived yet, or no slot of this step's width
    "waiting": "#d9d9d9",  # arrived, not running (or running without a slot this step)
    "prefill": "#ffb000",  # prompt positions computed
    "decode": "#1f77b4",  # one generated token fed back
    "padding": "#e4572e",  # static batching: computed and thrown away after a shorter prompt
    "idle": "#b5179e",  # static batching: a finished request's slot, computed and thrown away
    "preempted": "#4a4a4a",  # evicted, waiting to be prefilled again
    "finished": "#eef5e9",  # done and gone
}
CELL_TABLE = [QColor(CELL_COLORS[k]).rgb() for k in CELL_KINDS]  # index = the model's cell code

FREE_BLOCK = "#ececec"
CACHED_EDGE = "#555555"
SELECTED_EDGE = "#202020"
SCHEDULER_COLORS: dict[str, str] = {
    "static": "#d62728", "continuous": "#ff7f0e", "chunked": "#9467bd", "paged": "#1f77b4",
    "prefix": "#2ca02c", "reserve": "#8c564b",
}
_REQUEST_PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                    "#9c755f", "#86bcb6", "#8cd17d", "#d4a6c8", "#a0cbe8", "#ffbe7d", "#499894", "#f1ce63")


def request_color(request: int) -> QColor:
    """One colour per request (16, then again darker, then lighter)."""
    base = QColor(_REQUEST_PALETTE[request % len(_REQUEST_PALETTE)])
    turn = (request // len(_REQUEST_PALETTE)) % 3
    return base if turn == 0 else base.darker(140) if turn == 1 else base.lighter(130)


VLLM_COLOR = "#e377c2"  # vLLM beside the schedulers: a colour none of them has
LANE_COLORS: dict[str, str] = {}  # other lanes the serve panels draw (watched servers, by label): added, not fixed


def scheduler_color(key: str) -> str:
    if key == "vllm":
        return VLLM_COLOR
    return SCHEDULER_COLORS.get(key) or LANE_COLORS.get(key, "#7f7f7f")


def legend_html(schedulers) -> str:
    """The schedulers' names in their colours, each after a square: a legend row above a plot."""
    return " ".join(f'<span style="color:{scheduler_color(k)}">&#9632;&nbsp;<b>{lane_name(k)}</b></span>'
                    for k in schedulers)


def lane_name(key: str) -> str:
    """A scheduler's name as shown; vLLM's lane as "vLLM"."""
    return "vLLM" if key == "vllm" else key
