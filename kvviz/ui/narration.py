"""The selected step told in a sentence or two, from the traces alone: what each engine computed,
what it read from its cache, and the bytes its cache moved. Shown under the timeline.

Reads StepTrace fields only (positions computed, the positions earlier steps computed, bytes copied,
written and gathered): a new engine is told correctly the moment it records its steps. No torch.
"""
from __future__ import annotations

import html

from PySide6.QtCore import QCoreApplication

from kvviz.format import fmt_bytes
from kvviz.trace import StepTrace
from kvviz.ui.history import RunHistory


def _tr(text: str) -> str:
    return QCoreApplication.translate("Narration", text)


def _names(names: list[str]) -> str:
    """"a", "a and b", "a, b and c" (the words translated)."""
    if len(names) == 1:
        return names[0]
    return _tr("{names} and {last}").format(names=_tr(", ").join(names[:-1]), last=names[-1])


def _engine_html(engine: str, order: int, color) -> str:
    return f'<b style="color:{color(engine, order)}">{html.escape(engine)}</b>'


def describe(history: RunHistory, step: int, color=None, *, traffic: bool = True) -> str:
    """Rich text: the step's K/V work per group of engines that did the same, then (with traffic) the
    bytes each engine's cache moved. `color(engine, order)` names the engine's colour (default: style's)."""
    if color is None:
        from kvviz.ui.style import engine_color as color  # pyqtgraph: imported with the panels
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
    if first.phase == "prefill":
        groups: dict[tuple, list[str]] = {}
        for engine, order, trace, _prev_stop in steps:
            groups.setdefault((trace.computed_positions,), []).append(_engine_html(engine, order, color))
        parts = []
        for (n,), names in groups.items():
            who = _tr("every engine") if len(names) == len(steps) and len(steps) > 1 else _names(names)
            parts.append(_tr("{engines} computed the K/V of all {n} prompt positions in one pass").format(
                engines=who, n=n))
        text = _tr("Step {step}, prefill: {work}.").format(step=first.step, work=_tr("; ").join(parts))
    else:
        groups = {}
        for engine, order, trace, prev_stop in steps:
            work = (trace.computed_positions, trace.recomputed_positions(prev_stop), trace.pos_start)  # read: cached
            groups.setdefault(work, []).append(_engine_html(engine, order, color))
        parts = []
        for (computed, again, cached), names in groups.items():
            if again:
                parts.append(_tr("{engines} computed the K/V of all {n} positions, {again} of them again though "
                                 "unchanged").format(engines=_names(names), n=computed, again=again))
            else:
                parts.append(_tr("{engines} computed {new} new K/V and read {cached} from the cache").format(
                    engines=_names(names), new=computed, cached=cached))
        text = _tr("Step {step}, decode: {work}.").format(step=first.step, work=_tr("; ").join(parts))
    moved = []
    for engine, order, trace, _prev in steps:
        verbs = [verb.format(bytes=fmt_bytes(n)) for verb, n in (
            (_tr("copied {bytes}"), trace.bytes_copied), (_tr("wrote {bytes}"), trace.bytes_written),
            (_tr("gathered {bytes}"), trace.bytes_gathered)) if n]
        if verbs:
            moved.append(f"{_engine_html(engine, order, color)} {_names(verbs)}")
    if moved and traffic:  # one template with what precedes it: Chinese puts no space between sentences
        text = _tr("{work} Cache traffic: {moves}.").format(work=text, moves=_tr("; ").join(moved))
    return text
