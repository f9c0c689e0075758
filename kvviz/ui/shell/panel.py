"""The one Panel protocol every view's panels keep: a widget with a key, a title and a help text, drawn
at one step of the view's history (a view may pass a selection after the step: the Serve view's request),
cleared for a new run, retranslated after a language switch, and sized no smaller than it reads.
Structural: a view's panel base (kvviz.ui.panels.base.Panel, kvviz.ui.serve.panels.base.ServePanel) need
not import it. No Qt here beyond what a panel is; no records."""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Panel(Protocol):
    key: str

    def title(self) -> str:
        """The panel's title above it, in the current language."""

    def help_text(self) -> str:
        """What the panel shows, in a few sentences (its tooltip)."""

    def show_step(self, history: Any, step: int, *selection: Any) -> None:
        """Draw the view's history at `step` (and the view's selection, if it has one)."""

    def retranslate(self) -> None:
        """Every fixed text again, after a language switch."""

    def clear(self) -> None:
        """Forget the drawn run."""

    def readable_size(self) -> tuple[int, int] | None:
        """The smallest size at which the panel reads (None: the grid works it out from its plots)."""
