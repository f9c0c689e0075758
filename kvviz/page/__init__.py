"""A saved run as one self-contained HTML page: the run's records as JSON, the page's script and styles
(page.js, page.css beside this file) inlined, the window's Chinese strings from assets/i18n. No network.

Stdlib and numpy only: no Qt, no torch, so `kvviz export --from`, a notebook and the window all build the
same page from the same records. What the page draws is in page.js; what it is given is built here.
"""
from __future__ import annotations

import base64
import functools
import html
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from kvviz import catalog
from kvviz.format import fmt_bytes, fmt_count_short, fmt_figure
from kvviz.kernels import KERNELS, lane_engine, lane_kernel, lane_label
from kvviz.page.said import ENGINE_MARK
from kvviz.page.said_compare import compare_said, derived_columns
from kvviz.page.strings import LANGUAGES, page_strings, translator
from kvviz.records.narration import Run, describe, kernels_ran, kernels_text
from kvviz.records.tentative import SPEC_CELL_COLORS, tentative
from kvviz.records.trace import RunInfo, StepTrace, first_divergence
from kvviz.textshow import group_labels

HERE = Path(__file__).resolve().parent
# One page holds the run's records in the browser's memory twice (the text and the decoded arrays): past
# this much data a tab takes seconds to open and a notebook cell holds a file few would keep.
MAX_PAGE_BYTES = 64 << 20
# The engines' palette as the window has it (kvviz.catalog); page_data reads the catalog's at each use.
ENGINE_COLORS = catalog.engine_colors()
EXTRA_COLORS = catalog.EXTRA_COLORS
ENGINE_DASH = catalog.engine_dashes()


def _column(steps: Sequence[StepTrace], key: str) -> list:
    return [getattr(t, key) for t in steps]


def _shown_tokens(labels: Sequence[str]) -> dict:
    """Labels grouped as read (kvviz.textshow.group_labels): each token's shown text (a group's text on its
    first token, "" on the others) and the [start, stop) of the group it belongs to."""
    shown, start, stop = [], [], []
    for group in group_labels(list(labels)):
        shown += [group.text] + [""] * (group.size - 1)
        start += [group.start] * group.size
        stop += [group.stop] * group.size
    return {"shown": shown, "start": start, "stop": stop}


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _evicted_at(steps: Sequence[StepTrace]) -> list[int] | None:
    """Per position the step after which the cache no longer held it (StepTrace.evicted), -1 where it never
    dropped it; None for a cache that drops nothing."""
    if not steps or all(t.window is None for t in steps):
        return None
    at = np.full(steps[-1].pos_stop, -1, dtype=np.int64)
    for t in steps:
        dropped = t.evicted
        at[dropped[at[dropped] < 0]] = t.step
    return at.tolist() if (at >= 0).any() else None


def _tentative(steps: Sequence[StepTrace]) -> list | None:
    """Per step a speculative round's tentative cells (kvviz.records.tentative) as the page draws them: the matrix's
    size, (row, first key, key stop, kind) runs, the rows computed by the round's forward; None for an engine with
    none."""
    cells = [tentative(t) for t in steps]
    if not any(cells):
        return None
    return [None if c is None else {"n": c.size, "runs": [list(r) for r in c.runs], "accepted": c.accepted_rows}
            for c in cells]


def _attention(steps: Sequence[StepTrace]) -> dict | None:
    """Each query row once, as first computed, keys 0..i (float16, base64): row i at i(i+1)/2. Masked keys
    NaN, keys a bounded cache had dropped -1 (the window draws those in the evicted colour). A row naive
    computes again is the same row (its weights agree to float rounding), so it is stored once."""
    if not steps or all(t.attn_weights is None for t in steps):
        return None
    n = steps[-1].pos_stop
    flat = np.full(n * (n + 1) // 2, np.nan, dtype=np.float16)
    row_step = np.full(n, -1, dtype=np.int64)
    for t in steps:
        w = t.attn_weights
        if w is None:
            continue
        a, b = t.pos_start, t.pos_stop
        evicted = t.evicted if t.held is not None else None
        mask = t.mask if t.mask_spec is not None and t.mask_spec.bounded else None
        for i in range(a, b):
            if row_step[i] >= 0:
                continue
            row = w[i - a, : i + 1].astype(np.float32)
            if mask is not None:
                row = np.where(mask[i - a, : i + 1], row, np.nan)
            if evicted is not None and b - a == 1:
                gone = evicted[evicted < a]
                row[gone] = -1.0
            flat[i * (i + 1) // 2: i * (i + 1) // 2 + i + 1] = row
            row_step[i] = t.step
    first = next(t for t in steps if t.attn_weights is not None)
    return {"layer": first.weights_layer, "head": first.weights_head, "row_step": row_step.tolist(),
            "rows": base64.b64encode(flat.astype("<f2").tobytes()).decode("ascii")}


# What page.js writes at the step it shows, in text Python made for many steps: the step's number (str(step)).
STEP_MARK = "\u0001"


def _engine_html(engine: str, order: int) -> str:
    """An engine's name in the narration, as a mark page.js draws as the name in the engine's colour (the
    window's rich text, in 3 bytes instead of 30 a name)."""
    return chr(ENGINE_MARK + order)


def _narration(info: RunInfo, traces: Mapping[str, Sequence[StepTrace]], first: int, last: int) -> dict:
    """The window's narration (kvviz.records.narration.describe) of each step the slider spans, first..last, in
    both languages: {"en": [...], "zh_CN": [...]}."""
    run = Run(info, {name: list(steps[: last + 1]) for name, steps in traces.items()})
    strings = page_strings()
    out = {}
    for lang in LANGUAGES:
        words, kernels = translator("Narration", lang, strings), translator("kernels", lang, strings)
        out[lang] = [describe(run, step, _engine_html, _tr=words, tr_kernels=kernels)
                     for step in range(first, last + 1)]
    return out


def _status(info: RunInfo, engines: Sequence[str]) -> dict:
    """The window's status bar fields (kvviz/ui/status.py's StatusFields.show_run and its kernel and ceiling
    fields) as one line, in both languages."""
    strings = page_strings()
    out = {}
    for lang in LANGUAGES:
        tr = translator("StatusFields", lang, strings)
        fields = [tr("device {0}, {1}").format(info.device or "-", info.dtype or "-"),
                  tr("model {0}").format(info.model_name),
                  tr("{0} parameters").format(fmt_count_short(info.param_count)),
                  tr("KV {0} per token").format(fmt_bytes(info.kv_bytes_per_token))]
        groups = kernels_ran(info, engines)
        if groups:
            said = kernels_text(groups, False, translator("Narration", lang, strings),
                                translator("kernels", lang, strings))
            fields.insert(1, (tr("kernel {0}") if len(groups) == 1 else tr("kernels {0}")).format(said))
        ceiling = ceiling_field(info, tr)
        if ceiling is not None:
            fields.append(ceiling)
        out[lang] = "   ".join(fields)
    return out


def ceiling_field(info: RunInfo, tr: Callable[[str], str] = str) -> str | None:
    """The status bar's read ceiling of a run as kvviz/ui/status.py StatusFields says it, in words `tr` gives (the
    StatusFields context): the figure and device, the CPU threads it was read at ("1 thread", "4 threads"; none on
    a GPU or where unrecorded), or the device's nominal peak beside it where it reports one (CUDA); an older trace's
    copy bandwidth as "copy". None where the run has no ceiling."""
    gbps = info.bandwidth_gbps()
    if gbps is None:
        return None
    device, read = info.device or "-", info.ceiling_kind() == "read"
    peak = info.peak_gbps if 0 < info.peak_gbps < float("inf") else 0.0
    if peak > 0:
        words = tr("read {0} GB/s of {1} GB/s peak ({2})") if read else tr("copy {0} GB/s of {1} GB/s peak ({2})")
        return words.format(fmt_figure(gbps), fmt_figure(peak), device)
    threads = 0 if device.startswith("cuda") else info.read_threads
    if read and threads:
        words = tr("read {0} GB/s ({1}, 1 thread)") if threads == 1 else tr("read {0} GB/s ({1}, {2} threads)")
        return words.format(fmt_figure(gbps), device, threads)
    return (tr("read {0} GB/s ({1})") if read else tr("copy {0} GB/s ({1})")).format(fmt_figure(gbps), device)


def _bar(traces: Mapping[str, Sequence[StepTrace]], last: int) -> dict:
    """The transport bar's words (kvviz/ui/transport.py): the step label, at step 0 and at a decode step (STEP_MARK
    where the number goes), and the badge (whether the engines' tokens so far are the same) with its kind."""
    strings = page_strings()
    with_steps = [steps[: last + 1] for steps in traces.values() if steps]
    differ = first_divergence([t.token_id for t in steps] for steps in with_steps)
    kind = "" if len(with_steps) < 2 else "same" if differ is None else "differ"
    out: dict = {"badge_kind": kind}
    for lang in LANGUAGES:
        tr = translator("TransportBar", lang, strings)
        label = tr("step {0} / {1}  {2}")
        out[lang] = {"label": [label.format(0, last, tr("prefill")), label.format(STEP_MARK, last, tr("decode"))],
                     "badge": (tr("one engine") if with_steps else "") if kind == "" else
                     tr("identical") if kind == "same" else tr("differ at step {0}").format(differ)}
    return out


def page_data(info: RunInfo, traces: Mapping[str, Sequence[StepTrace]], *, first: int = 0,
              last: int | None = None) -> dict:
    """What page.js draws from: the run's info, per engine its steps as columns (0..last: the totals and the
    attention rows need the earlier steps) and what its panels say (kvviz.page.said_compare), the steps the slider
    spans, and the strings in both languages."""
    engines = []
    strings = page_strings()
    kernel_words = {lang: translator("kernels", lang, strings) for lang in LANGUAGES}
    stored: dict[str, str] = {}  # attention rows (base64) -> the engine that holds them in the page
    n_steps = max((len(v) for v in traces.values()), default=0)
    last = n_steps - 1 if last is None else min(last, n_steps - 1)
    shape = info.wall()
    said = compare_said(info, traces, first, last)
    said_engines = iter(said.pop("engines"))
    for order, (name, all_steps) in enumerate(traces.items()):
        steps = list(all_steps[: last + 1])
        if not steps:
            continue
        columns = {key: _column(steps, key) for key in (
            "pos_start", "pos_stop", "cache_len", "cache_capacity", "cache_bytes", "bytes_copied", "bytes_gathered",
            "kv_projections", "latency_ms", "token_id", "window", "sinks", "block_size")}
        columns["latency_ms"] = [float(v) for v in columns["latency_ms"]]
        columns.update(derived_columns(steps))  # running totals, the quality panel's KL: the window's series
        if any(t.spec_k is not None for t in steps):  # a speculative engine: its rounds (the matrix's legend)
            columns["spec_index"] = _column(steps, "spec_index")
        if shape is not None:  # the wall's arithmetic (kvviz.costs.wall): what each step read, and how fast
            reads = [shape.read(t) for t in steps]
            columns["read_bytes"] = [r.total_bytes for r in reads]
            columns["read_gbps"] = [_finite(r.gbps(t.latency_ms)) for r, t in zip(reads, steps)]
        tables = [list(t.block_table) if t.block_table is not None else None for t in steps]
        attention = _attention(steps)
        if attention is not None:  # the exact caches' weights agree to the bit in float16: stored once
            owner = stored.setdefault(attention["rows"], name)
            if owner != name:
                attention.update(rows=None, rows_of=owner)
        engines.append({
            "name": name, "color": catalog.engine_color(name, order), "dash": catalog.engine_dash(name),
            "order": order, "engine": lane_engine(name), "kernel": lane_kernel(name),
            # its name as the window's panels and narration say it (kvviz.ui.style.engine_label): "static · C step"
            "label": {lang: lane_label(name, lambda k, lang=lang: kernel_words[lang](KERNELS[k].label))
                      for lang in LANGUAGES},
            "steps": columns, "said": next(said_engines), "tokens": _shown_tokens([t.token_text for t in steps]),
            "block_table": tables if any(v is not None for v in tables) else None,
            "attention": attention, "evicted_at": _evicted_at(steps), "tentative": _tentative(steps),
        })
    prompt = list(info.prompt_labels) or [str(i) for i in info.prompt_ids]
    wall = info.wall()
    return {
        "info": {"run_id": info.run_id, "model_name": info.model_name, "device": info.device, "dtype": info.dtype,
                 "prompt": info.prompt, "n_prompt": len(info.prompt_ids), "max_new_tokens": info.max_new_tokens,
                 "n_layer": info.n_layer, "n_head": info.n_head, "kv_bytes_per_token": info.kv_bytes_per_token,
                 "param_count": info.param_count, "block_size": info.block_size,
                 "wall": None if wall is None else {"weights_bytes": wall.weights_bytes, "row_bytes": wall.row_bytes,
                                                    "kv_bytes_per_token": wall.kv_bytes_per_token},
                 "ceiling": info.bandwidth_gbps(), "ceiling_kind": info.ceiling_kind(), "repeat": info.repeat,
                 "cache_bytes": info.cache_bytes},
        "prompt": _shown_tokens(prompt),
        "engines": engines,
        "range": [first, last],
        "spec_colors": SPEC_CELL_COLORS,  # the tentative cells' colours, the window's work matrix's
        "exact": list(catalog.exact_keys()),  # the engines whose quality is the reference's own
        "narration": _narration(info, traces, first, last), "status": _status(info, [e["name"] for e in engines]),
        "bar": _bar(traces, last),
        "said": said,  # the panels' sentences and figures (kvviz.page.said_compare), the window's Python
        "strings": js_strings(),
    }


def _asset(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def js_strings() -> dict[str, dict[str, str]]:
    """The string table's contexts page.js names (its `tr("Context", ...)` calls and panel rows: titles, axes, the
    step bar), not the whole table: every other word comes said by Python."""
    js = _asset("page.js")
    return {context: table for context, table in page_strings().items() if f'"{context}"' in js}


_UNSAFE = re.compile("[<\u2028\u2029\ud800-\udfff]")  # what _script_json writes as \\uXXXX


def _script_json(doc) -> str:
    """JSON safe inside a <script> element: every "<" written as \\u003c (JSON reads it back as "<"), so no
    text in any field can close the element (</script), open a comment (<!--) or start one the parser
    then waits to close (<!--<script), and no U+2028 or U+2029 ends a line in old engines, and no lone
    surrogate fails the UTF-8 the page is written in: those as escapes, other text as it is (Chinese three bytes
    a character, not six)."""
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def check_steps_range(n_steps: int, first: int | None, last: int | None) -> tuple[int, int]:
    """(first, last) within the run's steps 0..n_steps-1; ValueError (one line) outside them."""
    if n_steps <= 0:
        raise ValueError("the run has no steps to show")
    first = 0 if first is None else first
    last = n_steps - 1 if last is None else last
    if not 0 <= first <= last <= n_steps - 1:
        raise ValueError(f"--steps {first}:{last} is outside the run's steps 0..{n_steps - 1}")
    return first, last


def attention_bytes(n_positions: int) -> int:
    """The page's bytes for one engine's attention rows over n positions: n(n+1)/2 float16, in base64."""
    return n_positions * (n_positions + 1) // 2 * 2 * 4 // 3


def estimate_bytes(info: RunInfo, traces: Mapping[str, Sequence[StepTrace]], last: int) -> int:
    """About what the page's data will take, before it is built: the attention rows dominate, then the block
    tables (n/block per step), ~250 bytes per step of scalars, ~400 of the narration (both languages) and ~300 of
    the panels' words and figures (kvviz.page.said_compare: 474,354 bytes over 400 steps of 4 engines) per engine."""
    total = 0
    for steps in traces.values():
        steps = steps[: last + 1]
        if not steps:
            continue
        if any(t.attn_weights is not None for t in steps):
            total += attention_bytes(steps[-1].pos_stop)
        if steps[0].block_table is not None:
            total += sum(len(t.block_table or ()) for t in steps) * 4
        total += 950 * len(steps)
    return total + len(info.prompt) * 2


def too_large(size: int, what: str = "the run") -> ValueError:
    return ValueError(f"{what} is too large for one page: about {fmt_bytes(size)} of data, more than the "
                      f"{fmt_bytes(MAX_PAGE_BYTES)} a page takes; export a range of steps with --steps A:B")


def build_page(info: RunInfo, traces: Mapping[str, Sequence[StepTrace]], *, first: int | None = None,
               last: int | None = None, lang: str = "en", step: int | None = None, embedded: bool = False) -> str:
    """The page as text. `first`/`last`: the steps the slider spans (default all); `step`: the one shown first
    (default the last); `lang`: "en" or "zh_CN" at first (the page switches). ValueError for a run too
    large for one page (the limit and `--steps` in the message) or a range outside the run."""
    n_steps = max((len(v) for v in traces.values()), default=0)
    first, last = check_steps_range(n_steps, first, last)
    size = estimate_bytes(info, traces, last)
    if size > MAX_PAGE_BYTES:
        raise too_large(size)
    if lang not in ("en", "zh_CN"):
        raise ValueError(f"language must be en or zh_CN, got {lang!r}")
    data = page_data(info, traces, first=first, last=last)
    data["start"] = {"step": last if step is None else max(first, min(step, last)), "lang": lang,
                     "embedded": embedded}
    title = f"kvviz: {info.model_name} · {', '.join(e['name'] for e in data['engines'])}"
    return _asset("page.html").format(
        title=html.escape(title), lang="zh-CN" if lang == "zh_CN" else "en", css=_asset("page.css"),
        data=_script_json(data), script=_asset("page.js"))


def write_page(path: str | Path, info: RunInfo, traces: Mapping[str, Sequence[StepTrace]], **kwargs) -> Path:
    """build_page, written to a temporary name beside `path` and renamed (nothing left behind on failure)."""
    return write_text(path, build_page(info, traces, **kwargs))


def write_text(path: str | Path, text: str) -> Path:
    """A page's text, written by kvviz.fileio's output rule (a temporary name beside `path`, renamed; a
    device or FIFO written in place); ValueError (one line) on failure."""
    from kvviz.fileio import write_output

    return write_output(path, text)


def iframe_html(page: str, height: int = 980) -> str:
    """The page inside an iframe's srcdoc: what a notebook cell shows (its scripts run apart from the
    notebook's own, so two runs in one notebook never share a variable)."""
    return (f'<iframe srcdoc="{html.escape(page, quote=True)}" style="width:100%; height:{height}px; border:0" '
            f'sandbox="allow-scripts"></iframe>')


__all__ = ["MAX_PAGE_BYTES", "build_page", "write_page", "iframe_html", "page_data", "estimate_bytes",
           "check_steps_range", "attention_bytes", "too_large", "ceiling_field"]
