"""The Serve view's fixed words (panel titles, the timeline's cell kinds and headings, the counters' row names, the
plots' axes) in the reader's language: the window passes Qt's translation of each panel's context, the serve page
kvviz.page.strings.translator's; str, the default, keeps English. Qt-free: records, numpy and words only.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kvviz.serving.history import IDLE, PADDING, ServeHistory

Translate = Callable[[str], str]


def kind_names(tr_panel: Translate = str) -> dict[str, str]:
    """Each timeline cell kind's name (context "TimelinePanel"), in kvviz.serving.history.CELL_KINDS' order."""
    return {"none": tr_panel("not arrived"), "waiting": tr_panel("waiting"), "prefill": tr_panel("prefill"),
            "decode": tr_panel("decode"), "padding": tr_panel("padding"), "idle": tr_panel("idle slot"),
            "preempted": tr_panel("preempted"), "finished": tr_panel("finished")}


def counter_rows(tr_panel: Translate = str) -> list[tuple[str, str]]:
    """(counter key, its name) in the counters table's order (context "CountersPanel")."""
    return [("steps", tr_panel("steps")), ("padding", tr_panel("padding")), ("padding_share", tr_panel("padding %")),
            ("idle", tr_panel("idle")), ("idle_share", tr_panel("idle %")), ("hit_rate", tr_panel("prefix hits")),
            ("saved", tr_panel("tokens saved")), ("prefill", tr_panel("prefilled")),
            ("preemptions", tr_panel("preempted")), ("tokens", tr_panel("tokens")),
            ("tokens_per_s", tr_panel("tokens/s")), ("peak_blocks", tr_panel("peak blocks"))]


def panel_words(tr_of: Callable[[str], Translate] = lambda _context: str) -> dict:
    """The panels' titles, the plots' axis labels and the text panel's note, as the Serve view's panels say them
    (`tr_of(context)`: the translation of that panel's context); "latency" the latency axes with their unit, as the
    serve page writes them, "latency_axes" without it (TTFT, TPOT, request)."""
    timeline, pool, usage = tr_of("TimelinePanel"), tr_of("PoolPanel"), tr_of("UsagePanel")
    counters, latency, text = tr_of("CountersPanel"), tr_of("LatencyPanel"), tr_of("TextPanel")
    axes = [latency("TTFT"), latency("TPOT"), latency("request")]  # the window's axes add their unit, ms, themselves
    return {"titles": {"timeline": timeline("Request timeline"), "pool": pool("Block pool"),
                       "usage": usage("Pool use and batch size"), "counters": counters("Counters"),
                       "latency": latency("Latency per request")},
            "usage": [usage("blocks used"), usage("batch"), usage("step")],
            "latency": [axes[0] + " (ms)", axes[1] + " (ms)", axes[2]],
            "latency_axes": axes,
            "differ": text("the schedulers generated different text")}


def wasted_slots(run: ServeHistory, k: str) -> tuple[int, int]:
    """(padding, idle) slots of the scheduler's whole run, counted by slot whatever the columns drawn."""
    slots = run.timeline(k).cells
    return int(np.count_nonzero(slots == PADDING)), int(np.count_nonzero(slots == IDLE))


def timeline_heading(k: str, counts: tuple[int, int, int], tr_panel: Translate = str) -> str:
    """The line above a scheduler's rows (context "TimelinePanel"): (padding, idle, steps)."""
    return tr_panel("{0}: {1} padding + {2} idle slots wasted, {3} steps").format(k, *counts)


def timeline_title(run: ServeHistory, tr_panel: Translate = str) -> str:
    """The timeline's title: each scheduler's wasted slots (context "TimelinePanel")."""
    if not run.n_steps():
        return tr_panel("Request timeline")
    parts = [f"{k} {sum(wasted_slots(run, k))}" for k in run.schedulers if run.n_steps(k)]
    return tr_panel("Request timeline: wasted slots {0}").format(", ".join(parts))


COUNTERS = tuple(key for key, _name in counter_rows())
