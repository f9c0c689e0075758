"""What every serve panel is: a widget that draws a ServeHistory at one selected step (and request).

Serve panels see the ServeHistory (kvviz.serving.history: the library's per-step records and numpy arrays
derived from them) only: no torch, no engines, no worker.
"""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget

from kvviz.serving.history import ServeHistory
from kvviz.serving.words import panel_words
from kvviz.ui.qtutil import translator


class ServePanel(QWidget):
    """Subclasses set `key` and implement `help_text()` and `show_step()`, and `title()` where kvviz.serving.words'
    panel_words (what the serve page says too) has no fixed title under their key."""

    key: str = ""
    # A click on a cell that belongs to a request at a step: the window selects both.
    cell_picked = Signal(int, int)  # request, step

    def title(self) -> str:
        return panel_words(translator)["titles"][self.key]

    def help_text(self) -> str:
        raise NotImplementedError

    def show_step(self, run: ServeHistory, step: int, request: int | None) -> None:
        """Draw the state at `step` (clamped per scheduler to what it has recorded); `request` is the
        selected request (None: none). Called in the GUI thread only when something changed."""
        raise NotImplementedError

    def readable_size(self) -> tuple[int, int]:
        """The smallest size (width, height) at which the panel reads at the present type size (View >
        Zoom sets the app's font): the grid gives it this or moves it behind a tab. By default some
        two dozen characters by seven lines."""
        fm = self.fontMetrics()
        return fm.averageCharWidth() * 24, fm.lineSpacing() * 7

    def retranslate(self) -> None:
        """Set every fixed text again (a language switch)."""

    def clear(self) -> None:
        """Forget the drawn run."""
