"""What every view's run is in and the shell's timing constants, once: the run state (a word, so a view
compares it to "idle" or to RunState.IDLE alike), how long closing waits for a worker, how often a frame
is drawn. Plain Python: no Qt, no records."""
from __future__ import annotations

from enum import Enum

ABORT_AFTER_MS = 3_000  # closing waits this long for the worker before ending its engine process
THREAD_WAIT_MS = 60_000  # and then this long (a step or a model load in the worker's own thread)
FRAME_MS = 33  # ~30 Hz at most: a view draws its history at screen rate, whatever the engines' rate
PAINT_REST = 3.0  # while records stream in, a frame that took t waits PAINT_REST * t before the next
NARRATION_LINES = 2  # the step narration's height: two lines of the current font, at any width


class RunState(str, Enum):
    """A view's run: idle, loading (asked for, the worker loads the model), running or paused."""

    IDLE = "idle"
    LOADING = "loading"
    RUNNING = "running"
    PAUSED = "paused"

    def __str__(self) -> str:
        return self.value
