"""A serve record (kvviz.serving.record: every scheduler's ServeStep records) as one self-contained HTML page:
the request timeline, the block pool, pool use and batch size, latency per request, the counters, the selected
request's text and the narration of the step a slider selects, scheduler beside scheduler, as the Serve view
draws them, with every request's tokens under each scheduler checked against its own solo run when the record
holds the solo runs (RequestResult.solo_token_ids), and vLLM's run beside them where the record holds one
(ServeRun.vllm: its timeline rows, its counters column, its sentence in the narration). No Qt, no torch.

The figures are the Serve view's own: its history (kvviz.serving.history, records and numpy only) makes the
timeline's cells and the counters; serve.js draws them and tells each step in the view's words.
"""
from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kvviz.page import _asset, _script_json, html, write_text
from kvviz.page.strings import page_strings
from kvviz.serving.record import ServeRun

MAX_CELLS = 16 << 20  # timeline cells (requests x token slots, all schedulers) one page holds
TIMELINE_CAP = 64  # a step wider than this many slots takes this many columns (the Serve view's cap)
# The Serve view's colours (kvviz.ui.serve.colors, which imports Qt): a test keeps these equal to it.
CELL_KINDS = ("none", "waiting", "prefill", "decode", "padding", "idle", "preempted", "finished")
CELL_COLORS = {"none": "#ffffff", "waiting": "#d9d9d9", "prefill": "#ffb000", "decode": "#1f77b4",
               "padding": "#e4572e", "idle": "#b5179e", "preempted": "#4a4a4a", "finished": "#eef5e9"}
SCHEDULER_COLORS = {"static": "#d62728", "continuous": "#ff7f0e", "chunked": "#9467bd", "paged": "#1f77b4",
                    "prefix": "#2ca02c", "reserve": "#8c564b"}
VLLM_COLOR = "#e377c2"
REQUEST_PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                   "#9c755f", "#86bcb6", "#8cd17d", "#d4a6c8", "#a0cbe8", "#ffbe7d", "#499894", "#f1ce63")
PROMPT_CHARS = 600  # a longer prompt is shown by its end (the Serve view's text panel's)
COUNTERS = ("steps", "padding", "padding_share", "idle", "idle_share", "hit_rate", "saved", "prefill",
            "preemptions", "tokens", "tokens_per_s", "peak_blocks")


def _steps_of(steps) -> list[dict]:
    """Per record (a step, or a stretch with no request to run) what the narration and the pool need, in short
    keys."""
    out = []
    for s in steps:
        pool = s.pool
        out.append({
            "fin": list(s.finished), "adm": list(s.admitted),
            "hit": {str(h.request): [len(h.blocks), h.tokens] for h in s.prefix_hits},
            "pre": [[p.request, len(p.blocks), p.tokens_lost] for p in s.preemptions],
            "pad": s.slots_of("padding"), "idle": s.slots_of("idle"), "work": len(s.work),
            "states": "".join(state[0] for state in pool.states),  # u(sed), c(ached), f(ree)
            "owner": [o[0] if o else -1 for o in pool.owners], "filled": list(pool.filled),
            "refs": list(pool.ref_counts), "bs": pool.block_size, "ms": s.latency_ms,
            "em": [r for r, _t in s.emitted],  # requests that emitted a token (the latency's count)
        })
    return out


def _texts_of(history, k: str) -> list[dict]:
    """Per request the Serve view's text panel's words (ServeHistory.text_of) after each count of emitted
    tokens: the text after all of them ("full"), and per count its length when a prefix of it, else the text."""
    from kvviz.serving.history import VLLM

    at: dict[int, list[int]] = {r: [] for r in range(history.n_requests())}  # the step of each emitted token
    if k == VLLM:
        for s in history.vllm.steps:
            for r in s.emitted:
                at[r].append(s.step)
    else:
        for s in history.steps[k]:
            for r, _t in s.emitted:
                at[r].append(s.step)
    out = []
    for r, steps in at.items():
        texts = [""] + [history.text_of(k, r, step)[1] for step in steps]
        full = texts[-1]
        out.append({"full": full, "ends": [len(t) if full.startswith(t) else -1 for t in texts],
                    "odd": {str(c): t for c, t in enumerate(texts) if not full.startswith(t)}})
    return out


def _solo_of(history, k: str) -> list[list] | None:
    """Each request's tokens against its own solo run (ServeHistory.solo_checks): [request, token, step] of
    each request that differs ([] when all are equal), with the number of requests first; None when the
    record holds no solo runs."""
    checks = history.solo_checks(k)
    if checks is None:
        return None
    return [len(checks), [[c.request, c.token, c.step] for c in checks if not c.equal]]


def _vllm_data(history) -> dict | None:
    """vLLM's lane as the Serve view draws it (ServeHistory.vllm_timeline, vllm_counters, vllm_counts): its
    timeline's records, and per engine step its step, its counts and the counterpart's, its counters."""
    from kvviz.serving.history import VLLM

    lane = history.vllm
    if lane is None or not lane.steps:
        return None
    timeline = history.vllm_timeline(TIMELINE_CAP)
    keys = ("running", "waiting", "blocks", "cached", "preempted")
    counts = [history.vllm_counts(s.step) for s in lane.steps]
    series = history.vllm_series()
    return {"name": "vLLM", "color": VLLM_COLOR, "counterpart": lane.counterpart,
            "version": lane.run.version if lane.run is not None else "",
            "cells": base64.b64encode(np.ascontiguousarray(timeline.cells, dtype=np.uint8).tobytes()).decode("ascii"),
            "cols": int(timeline.cells.shape[1]), "x0": timeline.columns.tolist(), "at": timeline.starts.tolist(),
            "n": history.n_steps(VLLM), "eng": [s.step for s in lane.steps],
            "ours": [[c[0][k] for k in keys] for c in counts],
            "theirs": [None if c[1] is None else [c[1][k] for k in keys] for c in counts],
            "counters": [history.vllm_counters(s.step) for s in lane.steps],
            "series": {key: series[key].astype(int).tolist() for key in ("step", "used", "batch")},
            "em": [list(s.emitted) for s in lane.steps], "texts": _texts_of(history, VLLM),
            "blocks": int(lane.run.settings.blocks) if lane.run is not None else 0}


def serve_data(runs: Sequence[ServeRun]) -> dict:
    from kvviz.serving.history import ServeHistory  # records and numpy only: no Qt

    if not runs:
        raise ValueError("the serve record holds no runs")
    history = ServeHistory.from_runs(tuple(runs))
    cells = sum(history.timeline(k, TIMELINE_CAP).cells.size for k in history.schedulers)
    if cells > MAX_CELLS:
        raise ValueError(f"the serve record is too large for one page: {cells:,} timeline cells, more than "
                         f"{MAX_CELLS:,}; serve fewer requests or steps")
    schedulers = []
    for k in history.schedulers:
        timeline = history.timeline(k, TIMELINE_CAP)
        n = history.n_steps(k)
        schedulers.append({
            "name": k, "color": SCHEDULER_COLORS.get(k, "#7f7f7f"),
            "cells": base64.b64encode(np.ascontiguousarray(timeline.cells, dtype=np.uint8).tobytes()).decode("ascii"),
            "cols": int(timeline.cells.shape[1]), "x0": timeline.columns.tolist(), "n": n,
            "at": timeline.starts.tolist(), "steps": _steps_of(history.steps[k]),
            "counters": [{key: history.counters(k, s.step)[key] for key in COUNTERS} for s in history.steps[k]],
            "series": {key: history.series(k)[key].astype(int).tolist()
                       for key in ("step", "used", "batch", "preemptions")},
            "blocks": int(history.settings[k].blocks), "texts": _texts_of(history, k),
            "solo": _solo_of(history, k),
        })
    n_steps = history.n_steps()
    model = runs[0].model
    prompts = [r.prompt for r in history.workload.requests]
    return {"kind": "serve", "workload": history.workload_name, "n_requests": history.n_requests(),
            "arrival": [int(r.arrival) for r in history.workload.requests],
            "prompts": [p if len(p) <= PROMPT_CHARS else "…" + p[-PROMPT_CHARS:] for p in prompts],
            "model": {"name": model.name, "device": model.device, "dtype": model.dtype},
            "schedulers": schedulers, "vllm": _vllm_data(history), "range": [0, n_steps - 1],
            "cell_kinds": list(CELL_KINDS),
            "cell_colors": CELL_COLORS, "palette": list(REQUEST_PALETTE), "strings": page_strings(),
            "engines": [], "info": {}}


def build_serve_page(runs: Sequence[ServeRun], *, step: int | None = None, lang: str = "en") -> str:
    if lang not in ("en", "zh_CN"):
        raise ValueError(f"language must be en or zh_CN, got {lang!r}")
    data = serve_data(runs)
    last = data["range"][1]
    data["start"] = {"step": last if step is None else max(0, min(step, last)), "lang": lang, "embedded": False}
    lanes = [s["name"] for s in data["schedulers"]] + ([data["vllm"]["name"]] if data["vllm"] else [])
    title = f"kvviz serve: {data['workload']} · {', '.join(lanes)}"
    return _asset("page.html").format(
        title=html.escape(title), lang="zh-CN" if lang == "zh_CN" else "en", css=_asset("page.css"),
        data=_script_json(data), script=_asset("serve.js") + "\n" + _asset("page.js"))


def write_serve_page(path: str | Path, runs: Sequence[ServeRun], **kwargs) -> Path:
    return write_text(path, build_serve_page(runs, **kwargs))


__all__ = ["build_serve_page", "write_serve_page", "serve_data"]
