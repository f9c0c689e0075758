"""A view that draws a whole frame at once from what it shows (the Serve and Watch views): the frame painter's
bookkeeping (a frame drawn only where its key changed, its cost timed, the rest records streaming in wait after
it) and the language and the app's zoom (set by the main window's View > Zoom) followed. The compare window
draws panel by panel (kvviz.ui.frames) and is a plain ShellWindow. No records, no panels here.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable

from PySide6.QtCore import QEvent, QSettings, QTimer, Signal
from PySide6.QtWidgets import QWidget

from kvviz.ui.shell.state import FRAME_MS, PAINT_REST
from kvviz.ui.shell.window import ShellWindow

FRAMES_KEPT = 10_000  # frame times kept for the benchmarks (the oldest go)


class FramedView(ShellWindow):
    """A view implements `draw_frame()` (bring everything to the selection, through `paint_frame`) and
    `retranslate_ui()`; `redraw_all()` forgets the frame drawn and draws again. `frame_ms` and `frame_cpu_ms`
    hold each frame's wall-clock and GUI-thread CPU time (the benchmarks read them)."""

    frame_drawn = Signal()

    def __init__(self, settings: QSettings | None = None, parent: QWidget | None = None) -> None:
        super().__init__(settings, parent)
        self._drawn: Hashable | None = None  # the key of the frame drawn last
        self.frame_ms: deque[float] = deque(maxlen=FRAMES_KEPT)
        self.frame_cpu_ms: deque[float] = deque(maxlen=FRAMES_KEPT)
        self._frame_cost_s = 0.0  # the last frame's drawing and painting, wall clock

    def paint_frame(self, key: Hashable, draw: Callable[[], None], started: float | None = None) -> bool:
        """Draw (`draw()`) a frame showing `key`, unless the frame drawn last showed it; timed from `started`
        (a perf_counter reading taken before the frame's own preparation) or from now. True if drawn."""
        if key == self._drawn:
            return False
        started = time.perf_counter() if started is None else started
        cpu = time.thread_time()
        self._drawn = key
        draw()
        self.frame_ms.append((time.perf_counter() - started) * 1000)
        self.frame_cpu_ms.append((time.thread_time() - cpu) * 1000)
        # Fires once the event loop has painted what this frame changed: the frame's whole cost.
        QTimer.singleShot(0, lambda: setattr(self, "_frame_cost_s", time.perf_counter() - started))
        self.frame_drawn.emit()
        return True

    def frame_rest_ms(self) -> int:
        """How long records streaming in wait before the next frame: PAINT_REST times the last frame's cost,
        at least a frame time, so the painting sets the frame rate and never takes the machine from a source."""
        return max(FRAME_MS, round(PAINT_REST * self._frame_cost_s * 1000))

    def draw_frame(self) -> None:
        raise NotImplementedError

    def redraw_all(self) -> None:
        """Every part drawn again (a new language, a new zoom), even where the selection did not change."""
        self._drawn = None
        self.draw_frame()

    def follow_zoom(self) -> None:
        """The app's zoom changed: the texts (and the plots' axis names, sized at the zoom's type size when
        set) again, and every part drawn at the new sizes (the grid gives way again by itself)."""
        self.retranslate_ui()
        self.redraw_all()

    def retranslate_ui(self) -> None:
        raise NotImplementedError

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.LanguageChange:
            self.retranslate_ui()
            self.redraw_all()
        elif event.type() == QEvent.Type.FontChange:
            # After the app's font: the main window's View > Zoom sets the plots' type size once it has set it.
            QTimer.singleShot(0, self.follow_zoom)
        super().changeEvent(event)
