"""The run worker's thread, held by the window: the worker moved onto a QThread of its own, started,
and stopped at the end (waiting for a step or model load in progress, then ending its engine
process if it outlasts ABORT_AFTER_MS). It knows the worker's `shut_down` and `abort`, not runs."""
from __future__ import annotations

import sys
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, QThread

ABORT_AFTER_MS = 3_000  # closing waits this long for the worker before killing its engine process
THREAD_WAIT_MS = 60_000  # and then this long (a step or model load in the worker's own thread)


class WorkerHost(QObject):
    def __init__(self, worker: QObject, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.worker = worker
        self.thread = QThread(self)
        self.thread.setObjectName("kvviz-run-worker")
        worker.moveToThread(self.thread)
        # Direct: runs in the worker's thread as it ends, so the worker's timer is stopped there.
        self.thread.finished.connect(worker.shut_down, Qt.ConnectionType.DirectConnection)

    def start(self) -> None:
        self.thread.start()

    def shut_down(self, stop: Callable[[], None]) -> None:
        """`stop()` (asks the worker to end its run), then end the thread, waiting for it."""
        if not self.thread.isRunning():
            return
        stop()
        self.thread.quit()
        if self.thread.wait(ABORT_AFTER_MS):
            return
        # A long step or model load holds the thread: end the engine process, if there is one.
        abort = getattr(self.worker, "abort", None)
        if abort is not None:
            abort()
        if not self.thread.wait(THREAD_WAIT_MS):
            print("kvviz: still waiting for the worker thread to finish its step...", file=sys.stderr)
            self.thread.wait()
