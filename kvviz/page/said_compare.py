"""What the compare window's panels say at each step (kvviz/ui/panels: legends, titles, captions, the summary's
figures, row names and notes), as kvviz.page.said sentences, and the series the page draws that the window derives
(running totals, the quality panel's KL, the byte axes' units, the paged pool's slots its legend counts). Stdlib,
numpy and the records: no Qt, no torch.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np

from kvviz import catalog
from kvviz.costs.wall import achieved_gbps
from kvviz.format import byte_unit, duration_unit, fmt_bytes, fmt_count, fmt_figure, fmt_ms, share_text
from kvviz.kernels import KERNELS, baselines, compared_kernels
from kvviz.page.said import Engine, Said, Spoken, changes, joined, said
from kvviz.records.narration import kernels_ran
from kvviz.records.repeats import spread
from kvviz.records.trace import RunInfo, RunSummary, StepTrace, speedup

# The summary's rows (kvviz/ui/panels/summary.py COLUMNS): key, whether a larger figure is better (None: no best)
COLUMNS: tuple[tuple[str, bool | None], ...] = (
    ("total_ms", False), ("tokens_per_s", True), ("speedup_vs_naive", True), ("kv_projections", False),
    ("bytes_copied", None), ("bytes_written", None), ("bytes_gathered", None), ("peak_cache_bytes", None),
    ("bytes_read", None), ("read_gbps", None), ("copy_share", None), ("mean_kl", False), ("top1_agreement", True))
WALL_ROWS = ("bytes_read", "read_gbps", "copy_share")
QUALITY_ROWS = ("mean_kl", "top1_agreement")
ROW_NAMES = ("time", "tokens/s", "speedup", "K/V computed", "copied", "written", "gathered", "peak cache", "read",
             "read rate", None, "mean KL", "top-1 same")  # None: "of copy" or "of read ceiling", by the run's ceiling


def running(values) -> list:
    """Running sums, added in order (as numpy's cumsum and the window's columns add them)."""
    return list(itertools.accumulate(values))


def _kl(t: StepTrace) -> float:
    """The quality panel's KL of a step: an exact engine's is 0, a step not measured NaN."""
    if t.kl_to_exact is not None:
        return t.kl_to_exact
    return 0.0 if catalog.is_exact(t.engine) else math.nan


def kernel_said(kernel: str):
    """A decode kernel's name in the reader's language (kvviz.records.narration.kernel_label)."""
    return said("kernels", KERNELS[kernel].label) if kernel in KERNELS else kernel


def kernels_said(groups: list[tuple[str, list[str]]]):
    """kvviz.records.narration.kernels_text: the one kernel, or which ran which engines."""
    if len(groups) == 1:
        return kernel_said(groups[0][0])
    comma = said("Narration", ", ")
    return joined(comma, [said("Narration", "{kernel} ({engines})", kernel=kernel_said(k), engines=joined(comma, es))
                          for k, es in groups])


# -- legends, titles, captions ---------------------------------------------------------------------------
def latency_legend(engine: Engine, decode_ms: float, n_decode: int):
    """LatencyPanel.legend_text: the mean decode step so far."""
    if not n_decode:
        return engine
    return said("LatencyPanel", "{engine}: {ms:.2f} ms/step", engine=engine, ms=decode_ms / n_decode)


def ceiling_said(gbps: float | None, kind: str | None):
    """The latency panel's wall line: the read ceiling (an older trace's copy bandwidth)."""
    if gbps is None:
        return None
    words = "copy bandwidth {0} GB/s" if kind == "copy" else "read ceiling {0} GB/s"
    return said("LatencyPanel", words, fmt_figure(gbps))


def bytes_legend(engine: Engine, copied: int, gathered: int):
    """BytesPanel.legend_text."""
    first = said("BytesPanel", "{engine}: {copied} copied", engine=engine, copied=fmt_bytes(copied))
    if not gathered:
        return first
    return joined("", [first, said("BytesPanel", ", {gathered} gathered", gathered=fmt_bytes(gathered))])


def cache_legend(engine: Engine, t: StepTrace):
    """CacheMemoryPanel.legend_text: a preallocated cache's room beside what it holds."""
    if t.cache_capacity != t.cache_len:
        return said("CacheMemoryPanel", "{engine}: {bytes}, room for {cap} tokens, {held} held", engine=engine,
                    bytes=fmt_bytes(t.cache_bytes), cap=fmt_count(t.cache_capacity), held=fmt_count(t.cache_len))
    return said("CacheMemoryPanel", "{engine}: {bytes}, {cap} tokens", engine=engine, bytes=fmt_bytes(t.cache_bytes),
                cap=fmt_count(t.cache_capacity))


def recompute_legend(engine: Engine, kv_projections: int):
    """RecomputePanel's legend: K/V projections so far."""
    return said("RecomputePanel", "{engine}: {total} K/V computed", engine=engine, total=fmt_count(kv_projections))


def quality_legend(engine: Engine, kl: np.ndarray, seen: int, misses: int, parted: int | None, step: int):
    """QualityPanel.legend_text: `kl` the steps' KL so far (NaN: not measured), `seen` the steps whose top-1 was
    measured, `parted` the step the engine's tokens first differ from the first exact engine's."""
    measured = kl[~np.isnan(kl)]
    if not measured.size:
        return said("QualityPanel", "{engine}: not measured (no exact engine in the run)", engine=engine)
    text = said("QualityPanel", "{engine}: mean KL {kl} nats, top-1 {agree}", engine=engine,
                kl=f"{measured.mean():.3g}", agree=share_text((seen - misses) / max(seen, 1)))
    if parted is not None and parted <= step:
        return joined("", [text, said("QualityPanel", ", its tokens differ from exact from step {0}", parted)])
    return text


def matrix_detail(t: StepTrace, prev_stop: int) -> Said:
    """The work matrix's line under an engine's name (WorkMatrixPanel._set_title)."""
    rows, again = t.computed_positions, t.recomputed_positions(prev_stop)
    cached = t.pos_start - int((t.evicted < t.pos_start).sum())
    if t.phase == "prefill":
        return said("WorkMatrixPanel", "prefill, {rows} rows", rows=rows)
    if t.spec_index:
        return said("WorkMatrixPanel", "accepted draft, no forward")
    if t.spec_proposed:
        return said("WorkMatrixPanel", "{rows} rows verified, {kept} kept", rows=1 + t.spec_proposed,
                    kept=1 + t.spec_accepted)
    if again:
        return said("WorkMatrixPanel", "{rows} rows, {again} again", rows=rows, again=again)
    return said("WorkMatrixPanel", "{rows} row, {cached} cached", rows=rows, cached=cached)


def attention_said(t: StepTrace, step: int, earlier: int) -> tuple[Said, Said]:
    """The attention panel's title line and caption (AttentionPanel.show_step)."""
    title = said("AttentionPanel", "layer {layer}, head {head}, step {step}", layer=t.weights_layer,
                 head=t.weights_head, step=step)
    rows = t.pos_stop - t.pos_start
    if earlier:
        return title, said("AttentionPanel", "Outlined: the {rows} row(s) computed at this step. The {earlier} rows "
                           "above were computed at earlier steps.", rows=rows, earlier=earlier)
    return title, said("AttentionPanel", "Outlined: the {rows} row(s) computed at this step.", rows=rows)


# The paged pool's slot kinds, as the cache memory panel draws them (kvviz/ui/panels/cache_memory.py, its colours in
# this order)
FREE, USED, NEW, WASTED = range(4)


def pool_kinds(t: StepTrace, info: RunInfo) -> np.ndarray:
    """uint8 [n_pool, block_size]: what each slot of each pool block holds after a step of the paged engine, the
    cache memory panel's tiles: the pool as the run's length sizes it (prompt + new tokens, in whole blocks; the
    table's highest block where that is more, or where the run does not say its length)."""
    size = t.block_size or 1
    table = np.asarray(t.block_table or (), dtype=np.int64)
    planned = -(-(len(info.prompt_ids) + info.max_new_tokens) // size) if info.max_new_tokens else 0
    kinds = np.full((max(planned, int(table.max(initial=-1)) + 1), size), FREE, dtype=np.uint8)
    pos = np.arange(len(table) * size).reshape(len(table), size)  # position held by each slot
    kinds[table] = np.where(pos >= t.cache_len, np.uint8(WASTED),
                            np.where(pos >= t.pos_start, np.uint8(NEW), np.uint8(USED)))
    return kinds


def slots_said(used: int | None, wasted: int | None) -> tuple:
    """The legend entries of a cache's slots drawn holding K/V and drawn reserved and empty, each with its count of
    tiles (None: nothing drawn to count)."""
    words = "CacheMemoryPanel"
    held, empty = said(words, "slot holding K/V"), said(words, "reserved, empty")
    return (held if used is None else joined("", [held, f" ({used})"]),
            empty if wasted is None else joined("", [empty, f" ({wasted})"]))


def pool_said(engine: Engine, t: StepTrace, kinds: np.ndarray) -> dict:
    """The block pool's legend at a step of the paged engine, counted on the slots drawn (`kinds`, pool_kinds): the
    pool's size in blocks ("n_pool") and its "title" (the pool, the block table), the slots holding K/V ("used":
    written this step or before) and the reserved, empty ones ("wasted")."""
    table = list(t.block_table or ())
    n_pool, size = kinds.shape
    drawn = np.bincount(kinds.ravel(), minlength=4)  # slots of each kind
    used, wasted = slots_said(int(drawn[USED] + drawn[NEW]), int(drawn[WASTED]))
    shown = ", ".join(str(b) for b in table[:6]) + (", \u2026" if len(table) > 6 else "")
    words = "CacheMemoryPanel"
    return {"n_pool": n_pool,
            "title": joined("", [engine, " ", said(words, "pool {n} \u00d7 {size} slots", n=n_pool, size=size), ", ",
                                 said(words, "block table [{table}]", table=shown)]),
            "used": used, "wasted": wasted}


# -- the summary ----------------------------------------------------------------------------------------
def cell_text(key: str, value, unit: tuple[str, float] | None) -> str:
    """A summary cell (SummaryPanel._format)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "\u2014"
    if unit is not None:
        return fmt_figure(value / unit[1])
    if key == "tokens_per_s":
        return fmt_figure(value)
    if key == "speedup_vs_naive":
        return f"{value:.2f}\u00d7"
    if key == "mean_kl":
        return f"{value:.3g}"
    if key == "top1_agreement":
        return share_text(value)
    if key == "copy_share":
        return f"{100 * value:.0f}%"
    return fmt_count(value)


def row_units(values: Mapping[str, Mapping[str, object]]) -> dict[str, tuple[str, float]]:
    """SummaryPanel._row_units: per time, rate or byte row the unit of its largest figure."""
    units: dict[str, tuple[str, float]] = {}
    for key, _higher in COLUMNS:
        shown = [v[key] for v in values.values() if v[key] is not None and not (isinstance(v[key], float)
                                                                                and math.isnan(v[key]))]
        top = max((abs(x) for x in shown), default=0)
        if key == "total_ms":
            units[key] = duration_unit(top)
        elif key == "read_gbps":
            units[key] = ("GB/s", 1.0)
        elif key.endswith("bytes") or key.startswith("bytes"):
            units[key] = byte_unit(top)
    return units


class _Sums:
    """An engine's running sums of what RunSummary.from_traces and the summary's notes add up, added in the steps'
    order as they are (a step's summary costs no pass over the steps before it; a 400-step page had taken 2.4 s)."""

    def __init__(self, info: RunInfo, steps: Sequence[StepTrace]) -> None:
        self.engine = steps[0].engine
        self.total = running(t.latency_ms for t in steps)
        self.sums = {key: running(getattr(t, key) for t in steps)
                     for key in ("kv_projections", "bytes_copied", "bytes_written", "bytes_gathered")}
        self.peak = list(itertools.accumulate((t.cache_bytes for t in steps), max))
        self.kl = [t.kl_to_exact for t in steps if t.kl_to_exact is not None]
        self.n_kl = running(int(t.kl_to_exact is not None) for t in steps)
        self.top1 = [t.top1_agrees for t in steps if t.top1_agrees is not None]
        self.n_top1 = running(int(t.top1_agrees is not None) for t in steps)
        # the decode steps' time (the prefill apart), all of them, the odd and the even ones
        self.decode = {parity: running(t.latency_ms if t.step and (parity is None or t.step % 2 == parity) else 0.0
                                       for t in steps) for parity in (None, 1, 0)}
        self.earlier = [running(run) for run in info.earlier_ms.get(self.engine, ())]

    def summary(self, k: int) -> RunSummary:
        kl = self.kl[: self.n_kl[k]]
        return RunSummary(
            engine=self.engine, new_tokens=k + 1, total_ms=float(self.total[k]),
            **{key: sums[k] for key, sums in self.sums.items()}, peak_cache_bytes=self.peak[k],
            mean_kl=float(np.mean(kl)) if kl else None,
            top1_agreement=float(np.mean(self.top1[: self.n_top1[k]])) if kl else None)

    def totals(self, k: int) -> list[float]:
        """kvviz.records.repeats.totals_upto: each run's total over steps 0..k, the shown run's last."""
        return [run[k] for run in self.earlier] + [self.total[k]]


class Summary:
    """The summary panel of a run at any step (SummaryPanel.show_step): figures, row names, heading, notes."""

    def __init__(self, info: RunInfo, traces: Mapping[str, Sequence[StepTrace]], engines: dict[str, Engine]) -> None:
        self.info, self.traces, self.engines = info, traces, engines
        self.names = list(engines)
        self.wall, self.ceiling = info.wall(), info.bandwidth_gbps()
        self.against = baselines(self.names)
        self.compared = compared_kernels(self.names)
        self.reads = {e: running(self.wall.read(t).total_bytes for t in traces[e]) if self.wall else None
                      for e in self.names}
        self.sums = {e: _Sums(info, traces[e]) for e in self.names}
        wall_rows = () if self.wall is None else WALL_ROWS if self.ceiling is not None else WALL_ROWS[:2]
        approximate = catalog.any_approximate(self.names)
        self.rows = [key for key, _higher in COLUMNS if (key not in WALL_ROWS or key in wall_rows)
                     and (key not in QUALITY_ROWS or approximate)]

    def _kk(self, engine: str, step: int) -> int:
        return min(step, len(self.traces[engine]) - 1)

    def values(self, step: int) -> tuple[dict[str, dict], dict]:
        summaries = {e: self.sums[e].summary(self._kk(e, step)) for e in self.names}
        spreads = {}
        if self.info.repeat > 1:
            spreads = {e: spread(self.sums[e].totals(self._kk(e, step))) for e in self.names}
            summaries = {e: _with_total(s, spreads[e].median_ms) for e, s in summaries.items()}
        values = {}
        for e, s in summaries.items():
            read = gbps = share = None
            if self.wall is not None:
                read = self.reads[e][self._kk(e, step)]
                gbps = achieved_gbps(read, s.total_ms)
                gbps = gbps if gbps < float("inf") else None
                share = gbps / self.ceiling if gbps is not None and self.ceiling is not None else None
            values[e] = {
                "total_ms": s.total_ms, "tokens_per_s": s.tokens_per_s,
                "speedup_vs_naive": speedup(s, summaries.get(self.against.get(e, ""))),
                "kv_projections": s.kv_projections, "bytes_copied": s.bytes_copied, "bytes_written": s.bytes_written,
                "bytes_gathered": s.bytes_gathered, "peak_cache_bytes": s.peak_cache_bytes, "bytes_read": read,
                "read_gbps": gbps, "copy_share": share,
                "mean_kl": 0.0 if catalog.is_exact(e) else s.mean_kl,
                "top1_agreement": 1.0 if catalog.is_exact(e) else s.top1_agreement}
        return values, {"summaries": summaries, "spreads": spreads}

    def at(self, step: int) -> dict:
        """The summary at `step`: "heading", per shown row its "label", per engine its "cells", per row the
        engines tinted as its "best", and the "notes" ([kind, sentence] each)."""
        values, more = self.values(step)
        units = row_units(values)
        words = "SummaryPanel"
        share = "of copy" if self.info.ceiling_kind() == "copy" else "of read ceiling"
        names = [said(words, share if n is None else n) for n in ROW_NAMES]
        keys = [key for key, _higher in COLUMNS]
        labels = [said(words, "{name} ({unit})", name=names[keys.index(k)], unit=units[k][0]) if k in units
                  else names[keys.index(k)] for k in self.rows]
        best = []
        for key in self.rows:
            higher = dict(COLUMNS)[key]
            shown = [v[key] for v in values.values() if v[key] is not None and not (isinstance(v[key], float)
                                                                                    and math.isnan(v[key]))]
            top = (max(shown) if higher else min(shown)) if higher is not None and len(set(shown)) > 1 else None
            best.append([self.engines[e].order for e in self.names if top is not None and values[e][key] == top])
        cells = [[cell_text(k, values[e][k], units.get(k)) for k in self.rows] for e in self.names]
        shown = min(step, max(len(v) for v in self.traces.values()) - 1)
        kernels = kernels_ran(self.info, self.names)
        heading = summary_heading(shown, self.info.repeat if more["spreads"] else None, self.compared, kernels)
        prefill = {e: self.traces[e][0].latency_ms for e in self.names}
        decode = {e: [self.sums[e].decode[parity][self._kk(e, step)] for parity in (None, 1, 0)] for e in self.names}
        notes = [["spread", spread_note(more["spreads"], self.engines)],
                 ["work", work_note({e: s.kv_projections for e, s in more["summaries"].items()})],
                 ["decode", decode_note(decode, prefill, self.engines, self.compared)],
                 ["kernels", kernel_note(kernels, self.compared)]]
        return {"heading": heading, "labels": labels, "cells": cells, "best": best,
                "notes": [[kind, note] for kind, note in notes if note is not None]}


def summary_heading(shown: int, medians_of: int | None, compared: Sequence[str], kernels: list) -> Said:
    """The summary's heading: the steps 0..`shown` its totals cover, the number of runs where the figures are their
    medians (`medians_of`), the kernels `compared` (kvviz.kernels.compared_kernels) or the run's one decode kernel
    (`kernels`: kvviz.records.narration.kernels_ran)."""
    words = "SummaryPanel"
    heading = said(words, "Totals over steps 0\u2013{step} ({n} new tokens)", step=shown, n=shown + 1)
    if medians_of:
        heading = said(words, "Medians of {n} runs: {totals}", n=medians_of, totals=heading)
    if compared:
        return said(words, "{totals}, decode kernels {first} and {second}", totals=heading,
                    first=kernel_said(compared[0]),
                    second=joined(said(words, ", "), [kernel_said(k) for k in compared[1:]]))
    if len(kernels) == 1:
        return said(words, "{totals}, decode kernel {kernel}", totals=heading, kernel=kernels_said(kernels))
    return heading


def spread_note(spreads: Mapping, engines: Mapping[str, Engine]):
    """How far a repeated comparison's runs lay apart (kvviz.records.repeats.spread per engine): each engine's
    lowest and highest total beside the median the table gives; None for one run."""
    if not spreads:
        return None
    words = "SummaryPanel"
    parts = [said(words, "{engine} {low}\u2013{high} (\u00b1{pct}%)", engine=engines[e], low=fmt_ms(s.low_ms),
                  high=fmt_ms(s.high_ms), pct=f"{100 * s.relative:.1f}") for e, s in spreads.items()]
    return said(words, "Spread of the {n} runs (lowest\u2013highest total; the table gives the median): {parts}.",
                n=next(iter(spreads.values())).n, parts=joined(said(words, "; "), parts))


def work_note(kv_projections: Mapping[str, int]):
    """The K/V projections naive computed against the cache that computed fewest (per engine, so far); None
    without naive or a cache."""
    naive = kv_projections.get("naive")
    cached = [n for e, n in kv_projections.items() if e != "naive" and n]
    if naive is None or not cached:
        return None
    fewest = min(cached)
    return said("SummaryPanel", "Work saved: naive computed <b>{naive}</b> K/V projections so far, a cache "
                "<b>{cached}</b> ({ratio:.1f}\u00d7 fewer). Each one it skips is a K or V that never changed.",
                naive=fmt_count(naive), cached=fmt_count(fewest), ratio=naive / fewest)


def decode_note(decode_ms: Mapping[str, Sequence[float]], prefill_ms: Mapping[str, float],
                engines: Mapping[str, Engine], compared: Sequence[str]):
    """The speedup of the decode steps alone (the prefill, one forward over the prompt that every engine computes
    alike, apart), and its spread in this run: the same ratio over the odd and over the even decode steps, which
    cover the same positions, so they differ by the machine's noise alone. Each engine against naive; in a kernel
    comparison each lane against its engine under the first kernel. `decode_ms`: per engine its decode steps' time
    (all, the odd ones, the even ones); `prefill_ms`: its step 0's. None without a baseline or two timed decode
    steps."""
    words = "SummaryPanel"
    pairs = [(e, b) for e, b in baselines(list(engines)).items() if e != b and b in engines]
    if not pairs:
        return None
    parts = []
    for engine, base in pairs:
        slow, mine = decode_ms[base], decode_ms[engine]
        if not all(m > 0 for m in (*mine, *slow)):
            return None
        whole, odd, even = (n / m for n, m in zip(slow, mine))
        parts.append(said(words, "{engine} {speedup}\u00d7 (odd steps {odd}\u00d7, even {even}\u00d7)",
                          engine=engines[engine], speedup=f"{whole:.1f}", odd=f"{odd:.1f}", even=f"{even:.1f}"))
    prefill = joined(said(words, ", "), [said(words, "{engine} {ms}", engine=engine, ms=fmt_ms(prefill_ms[e]))
                                         for e, engine in engines.items()])
    if compared:
        return said(words, "Decode steps alone, each kernel against {kernel} on the same cache: {parts}. The odd "
                    "and the even steps cover the same positions: where they part, the machine's noise moved the "
                    "figure that much. Prefill (step 0, apart): {prefill}.", kernel=kernel_said(compared[0]),
                    parts=joined(said(words, "; "), parts), prefill=prefill)
    return said(words, "Decode steps alone, against naive: {parts}. The odd and the even steps cover the same "
                "positions: where they part, the machine's noise moved the figure that much. Prefill (step 0, "
                "apart): {prefill}.", parts=joined(said(words, "; "), parts), prefill=prefill)


def kernel_note(kernels: list, compared: Sequence[str]):
    """Which kernel ran which engine's decode steps, for an older trace whose engines ran different kernels (a run
    has one, named in the heading, as are the kernels `compared`); None otherwise."""
    if compared or len(kernels) < 2:
        return None
    return said("SummaryPanel", "Decode step: {parts}. Their times differ by kernel as well as by cache.",
                parts=kernels_said(kernels))


def _with_total(summary: RunSummary, total_ms: float) -> RunSummary:
    from dataclasses import replace

    return replace(summary, total_ms=total_ms)


# -- the page's data ------------------------------------------------------------------------------------------
def derived_columns(steps: Sequence[StepTrace]) -> dict[str, list]:
    """The series the page draws that the window derives from an engine's steps: running totals of the time, the
    bytes copied and gathered, the top-1 misses; the quality panel's KL (NaN as None)."""
    kl = [_kl(t) for t in steps]
    return {"latency_total_ms": running(float(t.latency_ms) for t in steps),
            "bytes_copied_total": running(t.bytes_copied for t in steps),
            "bytes_gathered_total": running(t.bytes_gathered for t in steps),
            "misses_total": running(int(t.top1_agrees is False) for t in steps),
            "kl": [None if math.isnan(v) else v for v in kl]}


def _axis_unit(series: list[list[float]], least: float = 0) -> list:
    """A byte axis's unit ([name, size]) for series drawn to 5% over their largest value, or over `least` (page.js's
    plots: a stacked plot's axis is 1 where its series hold nothing above 0)."""
    top = max((v for ys in series for v in ys if math.isfinite(v)), default=0)
    top = max(top, least)
    return list(byte_unit(top * 1.05 if top > 0 else 1))


def compare_said(info: RunInfo, traces: Mapping[str, Sequence[StepTrace]], first: int, last: int) -> dict:
    """Everything the compare page says at steps first..last, in both languages (kvviz.page.said.Spoken):
    per engine (in the traces' order) its legends, work-matrix line, attention title and caption, token note and
    the steps its tokens differ from the first engine's; the wall line, the block pool, the summary, the byte
    axes' units, the tokens held in bytes (the cache memory's grey line). Per-step values as kvviz.page.said.changes."""
    spoken = Spoken()
    node = spoken.node
    engines = {name: Engine(name, order) for order, (name, steps) in enumerate(traces.items()) if steps}
    runs = {name: list(traces[name][: last + 1]) for name in engines}
    steps_range = range(first, last + 1)
    ref_exact = next((e for e in runs if catalog.is_exact(e)), None)
    ref_ids = [t.token_id for t in next(iter(runs.values()))] if runs else []
    out_engines = []
    for name, engine in engines.items():
        steps = runs[name]
        kk = [min(k, len(steps) - 1) for k in steps_range]
        decode = running(t.latency_ms if t.phase == "decode" else 0.0 for t in steps)
        n_decode = running(int(t.phase == "decode") for t in steps)
        copied, gathered = running(t.bytes_copied for t in steps), running(t.bytes_gathered for t in steps)
        kv = running(t.kv_projections for t in steps)
        kl = np.array([_kl(t) for t in steps], dtype=np.float64)
        seen = running(int(t.top1_agrees is not None or catalog.is_exact(t.engine)) for t in steps)
        misses = running(int(t.top1_agrees is False) for t in steps)
        parted = None
        if ref_exact is not None and ref_exact != name:
            parted = next((a.step for a, b in zip(traces[ref_exact], traces[name]) if a.token_id != b.token_id), None)
        stops = [t.pos_stop for t in steps]
        filled = np.zeros(steps[-1].pos_stop if steps else 0, dtype=bool)
        filled_upto = []  # per step, the attention rows computed so far (AttentionPanel's accumulator)
        for t in steps:
            if t.attn_weights is not None:
                filled[t.pos_start: t.pos_stop] = True
            filled_upto.append(filled.copy() if t.attn_weights is not None or not filled_upto else filled_upto[-1])
        has_weights = any(t.attn_weights is not None for t in steps)
        ids = [t.token_id for t in steps]
        diverged = next((i for i, (a, b) in enumerate(zip(ids, ref_ids)) if a != b), None)
        out_engines.append({
            "latency": changes([node(latency_legend(engine, decode[k], n_decode[k])) for k in kk], first),
            "bytes": changes([node(bytes_legend(engine, int(copied[k]), int(gathered[k]))) for k in kk], first),
            "cache_memory": changes([node(cache_legend(engine, steps[k])) for k in kk], first),
            "recompute": changes([node(recompute_legend(engine, int(kv[k]))) for k in kk], first),
            "quality": changes([node(quality_legend(engine, kl[: k + 1], seen[k], misses[k], parted, k)) for k in kk],
                               first),
            "work_matrix": changes([node(matrix_detail(steps[k], max(stops[:k], default=0))) for k in kk], first),
            "attention": changes([[node(s) for s in attention_said(
                steps[k], k, int(filled_upto[k][: steps[k].pos_start].sum()))] for k in kk], first)
            if has_weights else None,
            "token_note": None if diverged is None else node(said(
                "TokenStreamPanel", "differs from {first} from step {step}", first=next(iter(engines.values())),
                step=diverged)),
            "differs": [i for i, (a, b) in enumerate(zip(ids, ref_ids)) if a != b],
        })
    paged = next((n for n in engines if runs[n][0].block_table is not None), None)
    pool = None
    if paged is not None:
        shown = [runs[paged][min(k, len(runs[paged]) - 1)] for k in steps_range]
        pool = changes([{key: node(v) if key != "n_pool" else v for key, v in pool_said(
            engines[paged], t, pool_kinds(t, info)).items()} for t in shown], first)
    summary = Summary(info, runs, engines)
    at = [summary.at(k) for k in steps_range]
    sized = next((runs[n] for n in engines if runs[n][-1].cache_capacity), None)
    per = sized[-1].cache_bytes / sized[-1].cache_capacity if sized else 0
    held = [t.cache_len * per for t in sized] if sized else None  # the tokens held, in bytes (CacheMemoryPanel)
    copied_series = [[t.bytes_copied for t in runs[n]] for n in engines]
    gathered_series = [[t.bytes_gathered for t in runs[n]] for n in engines if any(t.bytes_gathered for t in runs[n])]
    return {
        "engines": out_engines,
        "ceiling": node(ceiling_said(info.bandwidth_gbps(), info.ceiling_kind())),
        "attention_none": node(said("AttentionPanel", "No attention weights recorded in this run.")),
        "pool": pool,
        "summary": {"rows": summary.rows,
                    **{key: changes([node(s[key]) if key == "heading" else
                                     [node(v) for v in s[key]] if key == "labels" else
                                     [[kind, node(v)] for kind, v in s[key]] if key == "notes" else s[key]
                                     for s in at], first)
                       for key in ("heading", "labels", "cells", "best", "notes")}},
        "axes": {"bytes_step": _axis_unit(copied_series + gathered_series),
                 "bytes_total": _axis_unit([running(s) for s in copied_series + gathered_series]),
                 "cache_memory": _axis_unit([[t.cache_bytes for t in runs[n]] for n in engines]
                                            + ([held] if held else []), least=1)},
        "held_bytes": held,
        **spoken.data(),
    }


__all__ = ["compare_said", "derived_columns", "Summary", "COLUMNS", "running", "summary_heading", "spread_note",
           "work_note", "decode_note", "kernel_note"]
