"""A serve record (kvviz.serving.record: every scheduler's ServeStep records) as one self-contained HTML page:
the request timeline, the block pool, pool use and batch size, latency per request, the counters, the selected
request's text and the narration of the step a slider selects, scheduler beside scheduler, as the Serve view
draws them, with every request's tokens under each scheduler checked against its own solo run when the record
holds the solo runs (RequestResult.solo_token_ids), and vLLM's run beside them where the record holds one
(ServeRun.vllm: its timeline rows, its counters column, its sentence in the narration). No Qt, no torch.

The figures and words are the Serve view's own: its history (kvviz.serving.history, records and numpy only) makes
the timeline's cells, the series, the latency and the counters, kvviz.serving.narration says each step, in English
and in Chinese (the window's .ts), all written into the page's data; serve.js draws them and navigates.
"""
from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kvviz.page import STEP_MARK, _asset, _script_json, html, write_text
from kvviz.page.strings import LANGUAGES, in_languages, page_strings, translator
from kvviz.serving.history import CELL_KINDS
from kvviz.serving.narration import cell_text, narrate, pool_heading, solo_text, vllm_heading, workload_text
from kvviz.serving.record import ServeRun
from kvviz.serving.words import (
    COUNTERS,
    counter_rows,
    kind_names,
    panel_words,
    timeline_heading,
    timeline_title,
    wasted_slots,
)

MAX_CELLS = 16 << 20  # timeline cells (requests x token slots, all schedulers) one page holds
TIMELINE_CAP = 64  # a step wider than this many slots takes this many columns (the Serve view's cap)
# The Serve view's colours (kvviz.ui.serve.colors, which imports Qt): a test keeps these equal to it.
CELL_COLORS = {"none": "#ffffff", "waiting": "#d9d9d9", "prefill": "#ffb000", "decode": "#1f77b4",
               "padding": "#e4572e", "idle": "#b5179e", "preempted": "#4a4a4a", "finished": "#eef5e9"}
SCHEDULER_COLORS = {"static": "#d62728", "continuous": "#ff7f0e", "chunked": "#9467bd", "paged": "#1f77b4",
                    "prefix": "#2ca02c", "reserve": "#8c564b"}
VLLM_COLOR = "#e377c2"
REQUEST_PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                   "#9c755f", "#86bcb6", "#8cd17d", "#d4a6c8", "#a0cbe8", "#ffbe7d", "#499894", "#f1ce63")
PROMPT_CHARS = 600  # a longer prompt is shown by its end (the Serve view's text panel's)
# What the page writes at the step it shows, in text Python made for a run of steps, besides the step's number
# (STEP_MARK): the steps counted up to it (f"{step + 1:,}"), each lane's step clamped to its last.
COUNT_MARK = "\u0002"


def _tr(context: str, lang: str):
    """The translator of `context` into `lang` from this module's page_strings (the page's string table)."""
    return translator(context, lang, page_strings())


def _say(say, *contexts: str) -> dict[str, str]:
    return in_languages(say, *contexts, strings=page_strings())


def _steps_of(history, k: str) -> list[dict]:
    """Per record (a step, or a stretch with no request to run) what the pool draws, in short keys."""
    out = []
    for s in history.steps[k]:
        pool = s.pool
        out.append({
            "states": "".join(state[0] for state in pool.states),  # u(sed), c(ached), f(ree)
            "owner": [o[0] if o else -1 for o in pool.owners], "filled": list(pool.filled),
            "refs": list(pool.ref_counts), "bs": pool.block_size,
            "head": _say(lambda tr, s=s: pool_heading(k, s, tr), "PoolPanel"),
        })
    return out


def _latency_of(history, k: str) -> list[list]:
    """Per request [the steps of its tokens, its TTFT, its TPOT after each token] (ServeHistory.latency_marks;
    None where not known): the latency panel's bars at a step are the values after the tokens emitted by it."""
    def known(v: float) -> float | None:
        return None if np.isnan(v) else float(v)

    return [[m.steps.tolist(), known(m.ttft_ms), [known(v) for v in m.tpot_ms]] for m in history.latency_marks(k)]


def _counters_of(history, k: str) -> list[list[str]]:
    """The counters panel's column of a scheduler as its cells read (cell_text), per record as of its first
    step; a stretch's "steps" cell is COUNT_MARK (its steps differ in that count alone)."""
    rows = []
    for s in history.steps[k]:
        row = [cell_text(key, history.counters(k, s.step)) for key in COUNTERS]
        if s.span > 1:
            row[COUNTERS.index("steps")] = COUNT_MARK
        rows.append(row)
    return rows


def _narration(history) -> dict:
    """The Serve view's narration (kvviz.serving.narration.narrate) in both languages ("en", "zh_CN"): a
    sentence per run of steps that differ in the step's number alone (a stretch, vLLM waiting), from the step
    at[i]; a run longer than one step says STEP_MARK where the number goes."""
    n = history.n_steps()
    events = {0}
    for k in history.schedulers:
        events.update(history.starts(k).tolist())
    if history.vllm is not None:
        events.add(history.vllm.n_steps)
        for s in history.vllm.steps:
            events.update((s.step, s.step + 1))
    at = sorted(e for e in events if 0 <= e < n)
    texts: dict[str, list[str]] = {lang: [] for lang in LANGUAGES}
    for i, step in enumerate(at):
        shown = STEP_MARK if (at[i + 1] if i + 1 < len(at) else n) - step > 1 else None
        for lang in LANGUAGES:
            texts[lang].append(narrate(history, step, "full", _tr("ServeNarration", lang), shown))
    return {**texts, "at": at}


def _texts_of(history, k: str) -> list[dict]:
    """Per request the Serve view's text panel's words (ServeHistory.text_of) after each count of emitted
    tokens: the step of each of its tokens ("at": the count at a step is those at or before it), the text after
    all of them ("full"), and per count its length when a prefix of it (in UTF-16 code units, what JavaScript's
    slice counts: a character beyond the BMP is two), else the text."""
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
        out.append({"at": steps, "full": full,
                    "ends": [len(t.encode("utf-16-le")) // 2 if full.startswith(t) else -1 for t in texts],
                    "odd": {str(c): t for c, t in enumerate(texts) if not full.startswith(t)}})
    return out


def _solo_of(history, k: str) -> list | None:
    """Each request's tokens against its own solo run (ServeHistory.solo_checks): [request, token, step] of
    each request that differs ([] when all are equal), with the number of requests first; None when the
    record holds no solo runs."""
    checks = history.solo_checks(k)
    if checks is None:
        return None
    return [len(checks), [[c.request, c.token, c.step] for c in checks if not c.equal]]


def _solo_said(history, k: str) -> dict | None:
    """The text panel's line of each request's tokens against its own solo run (solo_text) in both languages,
    and whether all are equal; None when the record holds no solo runs."""
    checks = history.solo_checks(k)
    if checks is None:
        return None
    return {"same": solo_text(checks)[0], **_say(lambda tr: solo_text(checks, tr)[1], "TextPanel")}


def _vllm_data(history) -> dict | None:
    """vLLM's lane as the Serve view draws it (ServeHistory.vllm_timeline, vllm_counters, vllm_counts): its
    timeline's records, and per engine step its step, its counts and the counterpart's, its counters."""
    from kvviz.serving.history import VLLM

    lane = history.vllm
    if lane is None or not lane.steps:
        return None
    timeline = history.vllm_timeline(TIMELINE_CAP)
    series = history.vllm_series()
    n = history.n_steps(VLLM)
    return {"name": "vLLM", "color": VLLM_COLOR, "counterpart": lane.counterpart,
            "version": lane.run.version if lane.run is not None else "",
            "cells": base64.b64encode(np.ascontiguousarray(timeline.cells, dtype=np.uint8).tobytes()).decode("ascii"),
            "cols": int(timeline.cells.shape[1]), "x0": timeline.columns.tolist(), "at": timeline.starts.tolist(),
            "n": n, "eng": [s.step for s in lane.steps],
            "head": [_say(lambda tr, s=s: vllm_heading(history, s.step, tr), "TimelinePanel")
                     for s in lane.steps],
            "counters": [_vllm_row(history, s.step) for s in lane.steps], "before": _vllm_row(history, -1),
            "series": {key: series[key].astype(int).tolist() for key in ("step", "used", "batch")},
            "texts": _texts_of(history, VLLM),
            "blocks": int(lane.run.settings.blocks) if lane.run is not None else 0}


def _vllm_row(history, step: int) -> list[str]:
    """vLLM's counters column at an engine step (its "steps" cell COUNT_MARK: the steps to the next go on)."""
    row = [cell_text(key, history.vllm_counters(step)) for key in COUNTERS]
    if step >= 0:
        row[COUNTERS.index("steps")] = COUNT_MARK
    return row


def _differ(history) -> list[list[list[int]]]:
    """Per request the runs of steps [first, past) at which the text panel notes that the schedulers generated
    different text (the Serve view's rule: every scheduler at or past its last step, and the texts shown, vLLM's
    with them, not all equal)."""
    from kvviz.serving.history import VLLM

    lanes = [k for k in history.schedulers if history.n_steps(k)] + ([VLLM] if history.n_steps(VLLM) else [])
    done, past = max(history.n_steps(k) for k in history.schedulers) - 1, history.n_steps()
    out = []
    for q in range(history.n_requests()):
        later = {s.step for s in (history.vllm.steps if VLLM in lanes else ()) if q in s.emitted and s.step > done}
        starts = [done] + sorted(later)  # the texts change at vLLM's tokens alone once the schedulers are done
        runs: list[list[int]] = []
        for i, step in enumerate(starts):
            if len({history.text_of(k, q, step)[1] for k in lanes}) < 2:
                continue
            end = starts[i + 1] if i + 1 < len(starts) else past
            if runs and runs[-1][1] == step:
                runs[-1][1] = end
            else:
                runs.append([step, end])
        out.append(runs)
    return out


def _usage_range(schedulers: list[dict], vllm: dict | None) -> list[float]:
    """The pool use and batch plots' ranges: the last step, the largest pool's blocks and the largest batch (both
    with 5% above, as the Serve view's usage panel sets the pool's; 1 at the least)."""
    lanes = schedulers + ([vllm] if vllm else [])
    return [max([1] + [r["n"] - 1 for r in lanes]), max([1] + [r["blocks"] for r in lanes]) * 1.05,
            max([1] + [v for r in lanes for v in r["series"]["batch"]]) * 1.05]


def _words(history) -> dict[str, dict]:
    """The panels' titles, legends, axis labels, counter names and note in each language (kvviz.serving.words)."""
    out = {}
    for lang in LANGUAGES:
        words = panel_words(lambda context, lang=lang: _tr(context, lang))
        words["titles"]["timeline"] = timeline_title(history, _tr("TimelinePanel", lang))
        words["kinds"] = kind_names(_tr("TimelinePanel", lang))
        words["counters"] = [name for _key, name in counter_rows(_tr("CountersPanel", lang))]
        out[lang] = words
    return out


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
            "head": _say(lambda tr, k=k: timeline_heading(k, (*wasted_slots(history, k), history.n_steps(k)), tr),
                         "TimelinePanel"),
            "cells": base64.b64encode(np.ascontiguousarray(timeline.cells, dtype=np.uint8).tobytes()).decode("ascii"),
            "cols": int(timeline.cells.shape[1]), "x0": timeline.columns.tolist(), "n": n,
            "at": timeline.starts.tolist(), "steps": _steps_of(history, k), "counters": _counters_of(history, k),
            "latency": _latency_of(history, k),
            "series": {key: history.series(k)[key].astype(int).tolist()
                       for key in ("step", "used", "batch", "preemptions")},
            "blocks": int(history.settings[k].blocks), "texts": _texts_of(history, k),
            "solo": _solo_of(history, k), "solo_said": _solo_said(history, k),
        })
    n_steps = history.n_steps()
    model = runs[0].model
    vllm = _vllm_data(history)
    workload = _say(lambda tr: workload_text(history.workload_name, history.n_requests(), tr), "TextPanel")
    prompts = [r.prompt for r in history.workload.requests]
    return {"kind": "serve", "workload": history.workload_name, "n_requests": history.n_requests(),
            "arrival": [int(r.arrival) for r in history.workload.requests],
            "prompts": [p if len(p) <= PROMPT_CHARS else "…" + p[-PROMPT_CHARS:] for p in prompts],
            "model": {"name": model.name, "device": model.device, "dtype": model.dtype},
            "schedulers": schedulers, "vllm": vllm, "range": [0, n_steps - 1],
            "usage_range": _usage_range(schedulers, vllm),
            "narration": _narration(history), "workload_text": workload, "words": _words(history),
            "counter_keys": list(COUNTERS), "differ": _differ(history),
            "text_titles": {lang: [_tr("TextPanel", lang)("Request {0}: its text").format(q)
                                   for q in range(history.n_requests())] for lang in LANGUAGES},
            "status": {lang: f"{model.name}, {model.device}, {model.dtype} · {workload[lang]}" for lang in LANGUAGES},
            "label": {lang: _tr("ServeTransport", lang)("step {0} / {1}").format(STEP_MARK, n_steps - 1)
                      for lang in LANGUAGES},
            "cell_kinds": list(CELL_KINDS),
            "cell_colors": CELL_COLORS, "palette": list(REQUEST_PALETTE),
            "strings": {"TransportBar": page_strings()["TransportBar"]},  # page.js's bar: its "Step"
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
