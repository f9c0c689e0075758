"""The engines a panel draws at a step: those of the run that have recorded one.

Knows RunHistory and the Panel's clear(); nothing of what a panel draws.
"""
from __future__ import annotations

from collections.abc import Callable

from kvviz.ui.history import RunHistory
from kvviz.ui.panels.base import Panel


def shown_engines(panel: Panel, history: RunHistory, step: int,
                  prepare: Callable[[list[str]], None] | None = None) -> list[str]:
    """The engines of `history` that have recorded a step, in the run's order, for `panel` to draw at `step`:
    `prepare(engines)` first (the panel's items made for them), then the panel keeps (history, step) in its
    `_shown`, to draw again after a language switch. None recorded: the panel is cleared, the list empty."""
    engines = [e for e in history.engines if history.traces.get(e)]
    if not engines:
        panel.clear()
        return engines
    if prepare is not None:
        prepare(engines)
    panel._shown = (history, step)
    return engines
