"""The compare view's step told in a sentence or two, from the traces alone: what each engine computed, what it
read from its cache, and the bytes its cache moved (the window's narration under the timeline, the page's
narration at each step).

Reads StepTrace fields and the run's wall figures (RunInfo) only: no Qt, no torch. Every function takes `_tr`, the
translation into the reader's language (the window passes Qt's, context "Narration"; the page
kvviz.page.strings.translator's; str keeps English), and where kernels are named `tr_kernels` (context "kernels").
"""
from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kvviz.format import fmt_bytes, fmt_figure, fmt_ms
from kvviz.kernels import KERNELS
from kvviz.records.trace import RunInfo, StepTrace

Translate = Callable[[str], str]
EngineHtml = Callable[[str, int], str]  # (engine, its order in the run) -> its name as rich text


@dataclass(frozen=True)
class Run:
    """A run's info and its traces per engine, in the run's order: what describe reads (as RunHistory has it)."""

    info: RunInfo
    traces: Mapping[str, Sequence[StepTrace]]

    @property
    def engines(self) -> tuple[str, ...]:
        return tuple(self.traces)


def _names(names: list[str], _tr: Translate) -> str:
    """"a", "a and b", "a, b and c" (the words translated)."""
    if len(names) == 1:
        return names[0]
    return _tr("{names} and {last}").format(names=_tr(", ").join(names[:-1]), last=names[-1])


def _figure(value: float) -> str:
    """A figure as rich text: fmt_figure says "<0.01" for a trace of one, which Qt would read as a tag
    (and drop the text up to the next one)."""
    return html.escape(fmt_figure(value))


_FIGURE_UNIT = re.compile(r"(\d) (GB/s|GiB|MiB|KiB|B|ms|µs|s)\b")


def _unbroken(text: str) -> str:
    """A figure and its unit joined by a no-break space, so that a wrapped line never ends on "14.6" and
    starts the next on "GB/s" (the narration wraps at any width; units follow figures in both languages)."""
    return _FIGURE_UNIT.sub("\\1\u00a0\\2", text)


def kernel_label(kernel: str, tr_kernels: Translate = str) -> str:
    """A decode kernel's name in the reader's language (kvviz.kernels' label: "PyTorch", "C step"; `tr_kernels`
    translates in the context "kernels")."""
    spec = KERNELS.get(kernel)
    return tr_kernels(spec.label) if spec is not None else kernel


def kernels_ran(info: RunInfo, engines=None) -> list[tuple[str, list[str]]]:
    """Which kernel ran the decode steps of which of `engines` (default the run's), in the engines' order:
    one (kernel, engines) pair for a run, several for an older trace whose engines ran different kernels,
    none where the trace does not say (RunInfo.decode_kernels)."""
    ran = dict(zip(info.engines, info.decode_kernels))
    groups: dict[str, list[str]] = {}
    for engine in info.engines if engines is None else engines:
        if engine in ran:
            groups.setdefault(ran[engine], []).append(engine)
    return list(groups.items())


def kernels_text(groups: list[tuple[str, list[str]]], escape: bool = False, _tr: Translate = str,
                 tr_kernels: Translate = str) -> str:
    """"PyTorch" for a run's one kernel; "C step (concat, static), PyTorch (naive)" where an older trace's engines
    ran different ones (as rich text with `escape`)."""
    name = html.escape if escape else str
    if len(groups) == 1:
        return name(kernel_label(groups[0][0], tr_kernels))
    return _tr(", ").join(_tr("{kernel} ({engines})").format(
        kernel=name(kernel_label(k, tr_kernels)), engines=_tr(", ").join(name(e) for e in engines))
        for k, engines in groups)


def _kernel_sentence(history, steps, _tr: Translate, tr_kernels: Translate) -> str:
    """The decode kernel, said at a decode step: one for every engine of a run (their times then differ by
    the cache alone), or, in an older trace, which ran where. Not in the short form, where a third line would
    move the grid: the status bar names the kernel there."""
    groups = kernels_ran(history.info, [engine for engine, *_ in steps])
    if not groups or steps[0][2].phase != "decode":
        return ""
    kernel = kernels_text(groups, True, _tr, tr_kernels)
    if len(groups) > 1:
        return _tr("Decode kernels: {kernels}; their times differ by kernel as well as by cache.").format(
            kernels=kernel)
    if len(steps) == 1:
        return _tr("Decode kernel: {kernel}.").format(kernel=kernel)
    return _tr("Every engine decodes with the {kernel} kernel: their times differ by cache alone.").format(
        kernel=kernel)


def describe(history, step: int, engine_html: EngineHtml, *, form: str = "full", _tr: Translate = str,
             tr_kernels: Translate = str) -> str:
    """Rich text: the step's K/V work per group of engines that did the same, what bounded caches
    dropped, what each step read and how fast, then the bytes each engine's cache moved. Forms:
    "full"; "no_traffic" (without the bytes moved: the bytes panel has them); "short" (the key
    sentence in few words: the work and the read rate, for a narrow window). `history`: the run's info,
    engines and traces (kvviz.ui.history.RunHistory, or Run); `engine_html(engine, order)`: an engine's name as
    rich text (the window's in its colour)."""
    if form not in ("full", "no_traffic", "short"):
        raise ValueError(f"form must be full, no_traffic or short, got {form!r}")
    steps: list[tuple[str, int, StepTrace, int]] = []  # (engine, order, trace, prev_stop)
    for order, engine in enumerate(history.engines):
        traces = history.traces.get(engine) or []
        if not traces:
            continue
        k = min(step, len(traces) - 1)
        steps.append((engine, order, traces[k], traces[k - 1].pos_stop if k else 0))
    if not steps:
        return ""
    first = steps[0][2]
    if form == "short":
        return _unbroken(_short(history, steps, engine_html, _tr))
    if first.phase == "prefill":
        groups: dict[tuple, list[str]] = {}
        for engine, order, trace, _prev_stop in steps:
            groups.setdefault((trace.computed_positions,), []).append(engine_html(engine, order))
        parts = []
        for (n,), names in groups.items():
            who = _tr("every engine") if len(names) == len(steps) and len(steps) > 1 else _names(names, _tr)
            parts.append(_tr("{engines} computed the K/V of all {n} prompt positions in one pass").format(
                engines=who, n=n))
        text = _tr("Step {step}, prefill: {work}.").format(step=first.step, work=_tr("; ").join(parts))
    else:
        groups = {}
        rounds = []
        for engine, order, trace, prev_stop in steps:
            if trace.spec_index is not None:  # a speculative round: told by its own sentence
                rounds.append(_spec_round(engine, order, trace, engine_html, _tr))
                continue
            cached = trace.pos_start - int((trace.evicted < trace.pos_start).sum())  # less what a window dropped
            work = (trace.computed_positions, trace.recomputed_positions(prev_stop), cached)
            groups.setdefault(work, []).append(engine_html(engine, order))
        parts = []
        for (computed, again, cached), names in groups.items():
            if again:
                parts.append(_tr("{engines} computed the K/V of all {n} positions, {again} of them again though "
                                 "unchanged").format(engines=_names(names, _tr), n=computed, again=again))
            else:
                parts.append(_tr("{engines} computed {new} new K/V and read {cached} from the cache").format(
                    engines=_names(names, _tr), new=computed, cached=cached))
        text = _tr("Step {step}, decode: {work}.").format(step=first.step, work=_tr("; ").join(parts + rounds))
    dropped = _dropped(history, steps, engine_html, _tr)
    if dropped:
        text = _tr("{work} Eviction: {drops}.").format(work=text, drops=dropped)
    wall = _wall(history, steps, engine_html, _tr)
    if wall:
        text = _tr("{work} {wall}").format(work=text, wall=wall)
    kernel = _kernel_sentence(history, steps, _tr, tr_kernels)
    if kernel:
        text = _tr("{work} {wall}").format(work=text, wall=kernel)
    moved = []
    for engine, order, trace, _prev in steps:
        verbs = [verb.format(bytes=fmt_bytes(n)) for verb, n in (
            (_tr("copied {bytes}"), trace.bytes_copied), (_tr("wrote {bytes}"), trace.bytes_written),
            (_tr("gathered {bytes}"), trace.bytes_gathered), (_tr("undid {bytes}"), trace.bytes_undone),
            (_tr("wrote {bytes} over rejected slots"), trace.bytes_overwritten)) if n]
        if verbs:
            moved.append(f"{engine_html(engine, order)} {_names(verbs, _tr)}")
    if moved and form == "full":  # one template with what precedes it: Chinese puts no space between sentences
        text = _tr("{work} Cache traffic: {moves}.").format(work=text, moves=_tr("; ").join(moved))
    return _unbroken(text)


def _spec_round(engine: str, order: int, trace: StepTrace, engine_html: EngineHtml, _tr: Translate) -> str:
    """A speculative engine's step: at a round's first step what the draft proposed, what the target kept and
    how the rejected slots were undone ("drafted 4, the target accepted 2, 2 slots rolled back; 3 tokens for one
    target forward"); at a later step of the round, which forward computed its token."""
    who = engine_html(engine, order)
    p, a, gone = trace.spec_proposed, trace.spec_accepted, trace.spec_rolled_back
    if trace.spec_index:
        return _tr("{engine} took accepted draft {i} of {a} from the target forward of step {step}: no forward "
                   "this step").format(engine=who, i=trace.spec_index, a=a, step=trace.step - trace.spec_index)
    if not p:
        return _tr("{engine} had no draft to check: one token for one target forward, as plain decoding").format(
            engine=who)
    if not gone:
        undone = ""
    elif trace.bytes_undone:
        undone = _tr(" ({bytes} cut from the cache)").format(bytes=html.escape(fmt_bytes(trace.bytes_undone)))
    else:
        undone = _tr(" (left in place: the next forward writes over them)")
    return _tr("{engine} drafted {p}, the target accepted {a}, {gone} slots rolled back{undone}; {n} tokens for one "
               "target forward").format(engine=who, p=p, a=a, gone=gone, undone=undone, n=a + 1)


def _short(history, steps, engine_html: EngineHtml, _tr: Translate) -> str:
    """"Step 39, decode: naive 98 K/V computed, 97 again; concat, static 1 new, 97 read. concat 7.5 GB/s (47% of
    the read ceiling); static 9.1 GB/s (57%)"."""
    first = steps[0][2]
    groups: dict[tuple, list[str]] = {}
    rounds = []
    for engine, order, trace, prev_stop in steps:
        if trace.spec_index is not None and trace.phase == "decode":
            who = engine_html(engine, order)
            if trace.spec_index:
                rounds.append(_tr("{engine} no forward").format(engine=who))
            elif trace.spec_proposed:
                rounds.append(_tr("{engine} {a} of {p} drafts kept").format(engine=who, a=trace.spec_accepted,
                                                                          p=trace.spec_proposed))
            else:
                rounds.append(_tr("{engine} no draft, 1 new").format(engine=who))
            continue
        cached = trace.pos_start - int((trace.evicted < trace.pos_start).sum())
        again = trace.recomputed_positions(prev_stop) if trace.phase == "decode" else 0
        groups.setdefault((trace.computed_positions, again, cached), []).append(engine_html(engine, order))
    parts = []
    for (computed, again, cached), names in groups.items():
        who = _tr(", ").join(names)
        if again:
            parts.append(_tr("{engines} {n} K/V computed, {again} again").format(engines=who, n=computed, again=again))
        else:
            parts.append(_tr("{engines} {new} new, {cached} read").format(engines=who, new=computed, cached=cached))
    phase = _tr("prefill") if first.phase == "prefill" else _tr("decode")
    text = _tr("Step {step}, {phase}: {work}.").format(step=first.step, phase=phase,
                                                       work=_tr("; ").join(parts + rounds))
    shape, copy = history.info.wall(), history.info.bandwidth_gbps()
    first_share = (_tr("{rate} ({pct}% of the read ceiling)") if history.info.ceiling_kind() == "read" else
                   _tr("{rate} ({pct}% of the copy bandwidth)"))
    rates = []
    for engine, order, trace, _prev in steps if shape is not None else ():
        if trace.spec_index:  # no forward ran at this step: nothing was read
            continue
        gbps = shape.read(trace).gbps(trace.latency_ms)
        if gbps < float("inf"):
            rate = _tr("{gbps} GB/s").format(gbps=_figure(gbps))
            if copy is not None:  # what the share is of, said once: the first engine's
                share = _tr("{rate} ({pct}%)") if rates else first_share
                rate = share.format(rate=rate, pct=f"{100 * gbps / copy:.0f}")
            rates.append(f"{engine_html(engine, order)} {rate}")
    if rates:
        text = _tr("{work} {reads}.").format(work=text, reads=_tr("; ").join(rates))
        if _past_ceiling(history, steps, shape):  # the full form's reason, in few words
            text = _tr("{work} Over 100%: read from the CPU's {cache} cache.").format(
                work=text, cache=html.escape(fmt_bytes(history.info.cache_bytes)))
    return text


def _past_ceiling(history, steps, shape) -> list[int]:
    """The bytes of each step shown as past 100% of the read ceiling (101% or more) that fit in the CPU's cache,
    which the ceiling's probe overflows: what makes such a share no error."""
    copy, cache = history.info.bandwidth_gbps(), history.info.cache_bytes
    if shape is None or not copy or history.info.ceiling_kind() != "read":
        return []
    return [shape.read(t).total_bytes for _e, _o, t, _p in steps if not t.spec_index
            and 100 * shape.read(t).gbps(t.latency_ms) / copy >= 100.5 and shape.read(t).total_bytes <= cache]


def _dropped(history, steps, engine_html: EngineHtml, _tr: Translate) -> str:
    """What each bounded cache (window, sinks) evicted at this step and how much it still holds."""
    parts = []
    for engine, order, trace, _prev in steps:
        if trace.held is None:
            continue
        k = trace.step
        before = history.traces[engine][k - 1].evicted if k else trace.evicted[:0]
        gone = [int(p) for p in trace.evicted if p not in set(before.tolist())]
        held = _tr("the cache holds {held} of {n} positions").format(held=trace.cache_len, n=trace.pos_stop)
        who = engine_html(engine, order)
        if not gone:
            parts.append(_tr("{engine} dropped nothing; {held}").format(engine=who, held=held))
        elif len(gone) == 1:
            parts.append(_tr("{engine} dropped position {pos}; {held}").format(engine=who, pos=gone[0], held=held))
        else:
            parts.append(_tr("{engine} dropped positions {first}-{last}; {held}").format(
                engine=who, first=gone[0], last=gone[-1], held=held))
    return _tr("; ").join(parts)


def _wall(history, steps, engine_html: EngineHtml, _tr: Translate) -> str:
    """What each engine's step read from memory and how fast: "concat read 104.5 MiB of weights and
    62.5 MiB of K/V in 22.1 ms, 7.52 GB/s, 47% of this machine's read ceiling" (a trace saved before the
    read ceiling was measured: "of this machine's copy bandwidth"); empty where the run did not record the
    figures."""
    shape = history.info.wall()
    if shape is None:
        return ""
    copy = history.info.bandwidth_gbps()  # the read ceiling, or an older trace's copy figure
    of_read = history.info.ceiling_kind() == "read"
    parts = []
    for engine, order, trace, _prev in steps:
        if trace.spec_index:  # no forward ran at this step: nothing was read
            continue
        read = shape.read(trace)
        gbps = read.gbps(trace.latency_ms)
        if not gbps < float("inf"):  # NaN or inf: a step with no time recorded
            continue
        values = dict(engine=engine_html(engine, order), weights=html.escape(fmt_bytes(read.weights_bytes)),
                      kv=html.escape(fmt_bytes(read.kv_bytes)), ms=html.escape(fmt_ms(trace.latency_ms)),
                      gbps=_figure(gbps))
        if copy is None:
            parts.append(_tr("{engine} read {weights} of weights and {kv} of K/V in {ms}, {gbps} GB/s").format(
                **values))
        elif of_read:
            parts.append(_tr("{engine} read {weights} of weights and {kv} of K/V in {ms}, {gbps} GB/s, {pct}% of "
                             "this machine's read ceiling").format(pct=f"{100 * gbps / copy:.0f}", **values))
        else:
            parts.append(_tr("{engine} read {weights} of weights and {kv} of K/V in {ms}, {gbps} GB/s, {pct}% of "
                             "this machine's copy bandwidth").format(pct=f"{100 * gbps / copy:.0f}", **values))
    if not parts:
        return ""
    text = _tr("{reads}.").format(reads=_tr("; ").join(parts))
    cache = history.info.cache_bytes
    fits = _past_ceiling(history, steps, shape)
    if fits:  # a share past 100% is no error: what the step reads stays in the CPU's cache, the probe's does not
        text = _tr("{reads} Above 100%: the {bytes} a step reads fit in this CPU's {cache} cache, which the read "
                   "ceiling's probe overflows.").format(reads=text, bytes=html.escape(fmt_bytes(max(fits))),
                                                         cache=html.escape(fmt_bytes(cache)))
    return text
