"""The frames the window shows: which step is selected (following a streaming run until the user
scrubs back) and the drawing of one step everywhere (every shown panel, the timeline, the step label,
the narration, the badge) as one frame. A timer runs only while there is something to draw: an idle
window after a run draws nothing and wakes no timer (it had kept repainting at ~30 Hz, 55% of a core).

It knows the history, the grid and the transport bar; not the form, the worker or the run's state
beyond whether one is in progress (asked through `running`).
"""
from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from kvviz.ui.grid import PanelGrid
from kvviz.ui.history import RunHistory
from kvviz.ui.shell.state import FRAME_MS, PAINT_REST
from kvviz.ui.transport import TransportBar


class FramePainter(QObject):
    """`selected` is the step every part shows. Call `wake()` when something may need drawing (a step
    arrived, a panel was shown, the zoom changed); `select` for the user's pick; `refresh` to draw
    now; `finish(then)` for a run's last frame, `then` called once it is whole."""

    frame_shown = Signal()  # a whole frame reached the screen (timeline, label, narration, panels)

    def __init__(self, history: RunHistory, grid: PanelGrid, transport: TransportBar, *,
                 running: Callable[[], bool], shown: Callable[[], None],
                 idle_work: Callable[[], bool], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.history, self.grid, self.transport = history, grid, transport
        self._running = running  # a run is loading, running or paused: the newest step is followed
        self._shown = shown  # the window's part of a frame (status bar, progress), after the transport
        self._idle_work = idle_work  # one piece of background work between frames; True if more is left
        self.selected = 0
        self.follow = True  # the timeline follows the newest step until the user scrubs back
        self.frames_shown = 0
        self._seen_version = -1
        self._user_selected = False  # the user picked a step: drawn at the next tick, rest or not
        self._resume_at = 0.0  # perf_counter time before which a streaming run is not drawn
        self._drew_last_tick = False
        self._last_tick_end = 0.0
        self._frame: tuple | None = None  # a frame drawn across turns: (target, panels left, start, then)
        self._timer = QTimer(self)
        self._timer.setInterval(FRAME_MS)
        self._timer.timeout.connect(self._on_timer_timeout)
        # A zero-interval timer, not a posted call: it fires after the window system's queued input and
        # the other timers, so a click or a key is answered between two panels of a frame.
        self._turn = QTimer(self)
        self._turn.setSingleShot(True)
        self._turn.setInterval(0)
        self._turn.timeout.connect(self._next_in_frame)

    # ------------------------------------------------------------------ waking and resting
    def wake(self) -> None:
        """Something may need drawing: tick until it is drawn, then stop. A timer woken from rest ticks
        at once (after the events already queued), not a period later: a step computed in a paused
        run is on screen before the next key."""
        if not self._timer.isActive():
            self._timer.start()
            QTimer.singleShot(0, self._on_timer_timeout)

    def step_arrived(self) -> None:
        """A step was added to the history: followed at once (the keys act on the newest step even
        while painting rests), drawn at the next frame."""
        if self.follow and self.history.n_steps():
            self.selected = self.history.n_steps() - 1
        self.wake()

    def ticking(self) -> bool:
        return self._timer.isActive()

    def stop(self) -> None:
        self._timer.stop()
        self._turn.stop()

    def redraw_all(self) -> None:
        """Every panel drawn again at the next tick (a new zoom, a new language)."""
        self.grid.painted.clear()
        self.wake()

    def _target(self) -> tuple[int, int]:
        return self.history.version, self.selected

    def _stale_panels(self, target: tuple[int, int]) -> list[str]:
        return [k for k in self.grid.panels
                if self.grid.painted.get(k) != target and not self.grid.frames[k].isHidden()]

    def pending(self) -> bool:
        """Whether a tick has anything to draw."""
        if self._frame is not None or self._user_selected or self.history.version != self._seen_version:
            return True
        return bool(self.history.n_steps()) and bool(self._stale_panels(self._target()))

    def _on_timer_timeout(self) -> None:
        now = time.perf_counter()
        if self._drew_last_tick:
            # The thread was busy past the timer's period: mostly rendering what the last tick drew
            # (pyqtgraph paints in the event loop, after show_step returns). Rest in proportion.
            lag = max(0.0, now - self._last_tick_end - FRAME_MS / 1000.0)
            self._resume_at = max(self._resume_at, now + PAINT_REST * lag)
        self._drew_last_tick = bool(self._draw(timed=True))
        more = False
        if not self._drew_last_tick and not self._running():
            more = self._idle_work()
        self._last_tick_end = time.perf_counter()
        if not more and not self.pending():
            self._timer.stop()  # nothing changed: no timer, no repaint, until the next wake

    # ------------------------------------------------------------------ selection
    def select(self, step: int) -> None:
        n = self.history.n_steps()
        self.selected = max(0, min(step, n - 1)) if n else 0
        self.follow = n > 0 and self.selected == n - 1 and self._running()
        self._user_selected = True
        self.transport.set_steps(n, self.selected)
        self.transport.update_step_label()
        self.wake()

    def scrub(self, delta: int) -> None:
        self.select(self.selected + delta)
        if delta < 0:
            self.follow = False

    def follow_live(self) -> None:
        self.select(self.history.n_steps() - 1)
        self.follow = True

    def timeline_moved(self, value: int) -> None:
        self.selected = value
        self.transport.selected = value
        self.follow = value == self.transport.timeline.maximum() and self._running()
        self._user_selected = True
        self.transport.update_step_label()
        self.wake()

    def restart(self) -> None:
        """A new run: step 0, following it."""
        self.selected = 0
        self.follow = True
        self.wake()

    # ------------------------------------------------------------------ drawing
    def refresh(self) -> None:
        """Every shown panel at the selected step now (tests, screenshots, exports)."""
        self._draw()

    def finish(self, then: Callable[[], None]) -> None:
        """A run's last frame, whole, then `then`."""
        self._draw(then=then)

    def _draw(self, *, timed: bool = False, then=None) -> dict[str, float]:
        """Bring the shown panels, the timeline, the step label, the narration and the badge to the
        history and the selected step: a frame shows one step everywhere. A panel already showing
        the step is not drawn again. Returns {panel: seconds its show_step took} of what it drew now.

        Untimed (a refresh, a step the user selects) the frame is drawn at once. Timed (a run
        streaming in) and at a run's end (`then`), one panel per turn of the event loop with the
        grid's painting held until the last: the screen keeps the previous frame whole until the next
        is, and input is answered between panels. Painting then rests PAINT_REST times as long as the
        frame took, so the frame rate follows the panels' cost and the CPU goes to the engines."""
        started = time.perf_counter()
        user = self._user_selected
        if self._frame is not None:
            if timed and not user and then is None:
                return {}  # a frame is being drawn, one panel per turn
            self._finish_frame()  # a refresh or a click: the frame in progress is finished now
        if timed and started < self._resume_at and not user:
            return {}
        version = self.history.version
        n = self.history.n_steps()
        changed = version != self._seen_version
        if changed:
            self._seen_version = version
            if self.follow and n:
                self.selected = n - 1
            self.selected = min(self.selected, max(0, n - 1))
        if n == 0:
            self._user_selected = False
            if changed or not timed:
                self._show_transport(self.selected)
            if not timed:  # a run that ended before its first step: forget the last one
                self.grid.clear_stale()
            if then is not None:
                then()
            return {}
        self._user_selected = False
        target = (version, self.selected)
        if user or (not timed and then is None):
            drawn = self.grid.draw(self.history, self.selected, target)
            self._show_transport(self.selected)
            return drawn
        keys = self._stale_panels(target)
        if not keys and not changed:
            if then is not None:
                then()
            return {}
        self._frame = (target, keys, started, then)
        self.grid.setUpdatesEnabled(False)
        return self._next_in_frame()

    def _next_in_frame(self) -> dict[str, float]:
        """Draw the frame's next panel; after the last, let the grid paint and show the transport."""
        if self._frame is None:
            return {}
        (version, step), keys, started, then = self._frame
        drawn = {}
        if keys:
            key = keys.pop(0)
            t = time.perf_counter()
            self.grid.draw_panel(key, self.history, step)
            drawn[key] = time.perf_counter() - t
            self.grid.painted[key] = (version, step)
        if keys:
            self._turn.start()
            return drawn
        self._frame = None
        self.grid.setUpdatesEnabled(True)
        self._show_transport(step)
        self._resume_at = time.perf_counter() + PAINT_REST * (time.perf_counter() - started)
        if then is not None:
            then()
        return drawn or {"": 0.0}

    def _finish_frame(self) -> None:
        while self._frame is not None:
            self._next_in_frame()

    def _show_transport(self, step: int) -> None:
        """The timeline, the step label, the narration and the badge at the step the panels show."""
        self.transport.set_steps(self.history.n_steps(), step)
        self.transport.update_badge()
        self.transport.update_step_label()
        self._shown()
        self.frames_shown += 1
        self.frame_shown.emit()
