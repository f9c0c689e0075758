"""The compare view's narration in the window's language: kvviz.records.narration's sentences (Qt-free, shared with
the page) translated by Qt (contexts "Narration" and "kernels"), the engines named in the window's colours.
"""
from __future__ import annotations

import html

from kvviz.records import narration as _words
from kvviz.records.narration import kernels_ran
from kvviz.ui.history import RunHistory
from kvviz.ui.qtutil import translator

__all__ = ["describe", "kernel_label", "kernels_ran", "kernels_text"]

_tr = translator("Narration")
_tr_kernels = translator("kernels")


def kernel_label(kernel: str) -> str:
    """A decode kernel's name in the reader's language (kvviz.kernels' label: "PyTorch", "C step")."""
    return _words.kernel_label(kernel, _tr_kernels)


def kernels_text(groups: list[tuple[str, list[str]]], escape: bool = False) -> str:
    """"PyTorch" for a run's one kernel; "C step (concat, static), PyTorch (naive)" where an older trace's engines
    ran different ones (as rich text with `escape`)."""
    return _words.kernels_text(groups, escape, _tr, _tr_kernels)


def describe(history: RunHistory, step: int, color=None, *, form: str = "full") -> str:
    """Rich text: kvviz.records.narration.describe of the step, in the window's language, each engine named as the
    panels name it (kvviz.ui.style.engine_label: a lane "concat · PyTorch"); `color(engine, order)` names the
    engine's colour (default: style's)."""
    from kvviz.ui.style import engine_label  # pyqtgraph: imported with the panels

    if color is None:
        from kvviz.ui.style import engine_color as color

    def engine_html(engine: str, order: int) -> str:
        return f'<b style="color:{color(engine, order)}">{html.escape(engine_label(engine))}</b>'

    return _words.describe(history, step, engine_html, form=form, _tr=_tr, tr_kernels=_tr_kernels)
