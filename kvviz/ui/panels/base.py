"""What every panel is: a widget that draws the run history at one selected step.

Panels see RunHistory, StepTrace and numpy only: no torch, no engines.
"""
from __future__ import annotations

from PySide6.QtCore import QCoreApplication, Signal
from PySide6.QtWidgets import QWidget

from kvviz.page import said
from kvviz.ui.history import RunHistory


def said_text(value) -> str:
    """A sentence of kvviz.page.said_compare (what the page says too) in the window's language: Qt's translation
    of its context, at display time; an engine is written by its name."""
    return said.text(value, QCoreApplication.translate)


class Panel(QWidget):
    """Subclasses set `key` and implement `title()`, `help_text()` and `show_step()`."""

    key: str = ""
    # A click on something that belongs to a step (a point of a per-step plot, a computed row):
    # the window shows that step, as the timeline would. Panels that emit it set picks_steps.
    step_picked = Signal(int)
    picks_steps: bool = False

    def title(self) -> str:
        raise NotImplementedError

    def help_text(self) -> str:
        """A short 'what am I looking at' note, in the spirit of the chapter (shown as a tooltip)."""
        raise NotImplementedError

    def show_step(self, history: RunHistory, step: int) -> None:
        """Draw the state at `step` (clamped per engine to what it has recorded). Called from a
        timer in the GUI thread, only when the history or the selected step changed."""
        raise NotImplementedError

    def retranslate(self) -> None:
        """Set every text the panel shows again, through self.tr: called after a language switch
        (View > Language). Panels whose texts are all set in show_step keep this no-op."""

    def clear(self) -> None:
        """Forget the drawn run (a new run starts)."""

    def apply_zoom(self) -> None:
        """The zoom (kvviz.ui.style.ZOOM) changed: set the texts and fonts the panel sizes itself again.
        The grid then rescales the plots' items (ticks, lines, markers) and draws the step again. By
        default the texts are set again as after a language switch (titles and axis names read
        their sizes from the style)."""
        self.retranslate()

    def warm_up(self, engines: tuple[str, ...], positions: int = 0) -> bool:
        """Do, while the window is idle, a piece of the work the first run with these engines would
        otherwise do mid-run; True while there is more. The window calls it once per idle tick.
        `positions`: the longest sequence a run of the selected model can have (0: unknown)."""
        return False

    def header_widgets(self) -> list[QWidget]:
        """Small controls for the panel's title row (a log-scale switch), beside the title, so they
        take no width from the panel's legend and plots."""
        return []

    # -- readable sizes (the grid gives way rather than draw a panel smaller; kvviz.ui.grid) ----------
    priority: int = 50  # the grid keeps the panels with the lowest numbers readable first

    def readable_plot(self) -> tuple[int, int]:
        """The smallest data area (width, height, pixels) at which each of this panel's plots reads,
        at the present zoom (kvviz.ui.style.ZOOM)."""
        from kvviz.ui import style

        return style.readable(style.READABLE_PLOT)

    def plot_grid(self) -> tuple[int, int]:
        """How many plots the panel lays side by side and one above the other (each needs
        readable_plot)."""
        return 1, 1

    def readable_size(self) -> tuple[int, int] | None:
        """The smallest size of the whole panel that reads, for a panel without plots (a table,
        text); None: worked out by the grid from its plots (readable_plot, plot_grid)."""
        return None

    def readable_items(self) -> list:
        """The plots (pyqtgraph PlotItems) readable_plot is for: by default the ones exported."""
        return self.export_items()

    def export_items(self) -> list:
        """pyqtgraph items (PlotItem / GraphicsScene) an exporter may render, if any."""
        return []
