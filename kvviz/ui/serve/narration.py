"""The Serve view's narration in the window's language: kvviz.serving.narration's sentences (Qt-free, shared
with the serve page) translated by Qt in the context "ServeNarration". No words of its own.
"""
from __future__ import annotations

from kvviz.serving import narration as _words
from kvviz.serving.history import ServeHistory
from kvviz.serving.record import ServeStep
from kvviz.ui.qtutil import translator

_tr = translator("ServeNarration")


def describe_step(record: ServeStep) -> list[str]:
    return _words.describe_step(record, _tr)


def narrate_vllm(run: ServeHistory, step: int, form: str = "full") -> str:
    return _words.narrate_vllm(run, step, form, _tr)


def narrate(run: ServeHistory, step: int, form: str = "full") -> str:
    """One sentence per scheduler for the step shown (kvviz.serving.narration.narrate)."""
    return _words.narrate(run, step, form, _tr)
