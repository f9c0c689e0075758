"""A view's worker thread: the worker moved onto a QThread of its own, started (again after a close), and
stopped at the end (waiting for a step or model load in progress, then ending its engine process through
the worker's `abort` if it outlasts ABORT_AFTER_MS). It knows the worker's `shut_down` and `abort`, not runs."""
from __future__ import annotations

import sys
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, QThread

from kvviz.ui.shell.state import ABORT_AFTER_MS, THREAD_WAIT_MS


class WorkerHost(QObject):
    def __init__(self, worker: QObject, parent: QObject | None = None, *, name: str = "kvviz-run-worker") -> None:
        super().__init__(parent)
        self.worker = worker
        self.thread = QThread(self)
        self.thread.setObjectName(name)
        worker.moveToThread(self.thread)
        # Direct: runs in the worker's thread as it ends, so the worker's timer is stopped there.
        self.thread.finished.connect(worker.shut_down, Qt.ConnectionType.DirectConnection)

    def start(self) -> None:
        """The thread, started when the view is made and again when a closed view is shown."""
        if not self.thread.isRunning():
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
