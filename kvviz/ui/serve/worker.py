"""The serve worker: the Qt adapter around the serving session (kvviz.serving.session), one ServeEngine
per ticked scheduler stepped in lockstep rounds (step k of every scheduler before step k+1 of any), the
records forwarded in batches as signals. When every scheduler has finished, each request is run alone
(ServeSession.solo: its own solo run through the static engine) and the results carry those tokens
(RequestResult.solo_token_ids), so the panels show every scheduler's tokens checked against them.

A QObject the Serve window moves onto a QThread: typed slots in, past-tense signals out, one batch per
timer tick so the thread's event loop stays live and Pause, Step and Stop act between batches. The
engines run in a child process (ServeProcess) by default, so they never share the window's interpreter
lock (in this thread, isolate=False: quicker to start, for tests); torch and the models are imported
there, never by the window or the panels.
"""
from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Mapping

from PySide6.QtCore import QMetaObject, QObject, Qt, QTimer, Signal, Slot

from kvviz.runtime.session import error_message
from kvviz.serving.record import RequestResult
from kvviz.serving.session import ServeProcess, ServeSession
from kvviz.serving.solo import with_solo
from kvviz.serving.spec import ServeSpec
from kvviz.ui.worker import refused

BATCH_S = 0.02  # as fast as possible: rounds back to back for this long, then one signal with them all
# In this thread (isolate=False), then this long with nothing to do, so the GUI thread (sharing the
# interpreter lock) takes the batch in and paints.
BATCH_REST_S = 0.01


class ServeWorker(QObject):
    """Every slot runs in the worker's thread; `request_stop` is safe from any thread."""

    run_started = Signal(str, object)  # run_id, ServeStarted (workload, model, settings per scheduler, ...)
    steps_traced = Signal(str, object)  # run_id, (LaneRecord, ...): each lane's record with its tokens' text
    results_ready = Signal(str, object)  # run_id, {scheduler: (RequestResult, ...)} at a run's end, with the
    # solo runs' tokens (solo_token_ids) unless Stop came while they ran
    run_failed = Signal(str, str)  # run_id, one-line message
    run_finished = Signal(str)  # run_id; always, after run_failed if the run failed

    def __init__(self, parent: QObject | None = None, *, device: str = "auto", dtype: str = "auto",
                 threads: int | None = None, isolate: bool = True) -> None:
        super().__init__(parent)
        self.device, self.dtype = device, dtype
        self.threads = threads
        self.isolate = isolate
        self.session: ServeProcess | ServeSession = ServeProcess() if isolate else ServeSession()
        self._stop = threading.Event()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._run_id = ""
        self._paused = False
        self._interval_s = 0.0

    # -- control ---------------------------------------------------------------------------------
    def request_stop(self) -> None:
        """Stop the run: from any thread; it ends after the round in progress."""
        self._stop.set()
        QMetaObject.invokeMethod(self, "_stop_run", Qt.ConnectionType.QueuedConnection)

    @Slot()
    def _stop_run(self) -> None:
        if self._run_id:
            self._end()

    @Slot(object)
    def start_run(self, spec: ServeSpec) -> None:
        """Start the run the ServeSpec describes; anything else is refused with run_failed (no run id) and
        run_finished, and a run in progress goes on."""
        if refused(self, spec, ServeSpec, "a serve run"):
            return
        if self._run_id:
            self._end()
        self._stop.clear()
        self._run_id = spec.run_id
        self._paused = spec.start_paused
        self._interval_s = 1.0 / spec.steps_per_s if spec.steps_per_s > 0 else 0.0
        try:
            started = self.session.start(spec, self.device, self.dtype, self.threads)
        except Exception as exc:
            self._end(exc)
            return
        self.run_started.emit(spec.run_id, started)
        if spec.start_paused:
            self._round_batch(0.0)
        else:
            self._timer.start(0)

    @Slot(bool)
    def set_paused(self, paused: bool) -> None:
        self._paused = bool(paused)
        if self._run_id and not paused and not self._timer.isActive():
            self._timer.start(0)
        elif paused:
            self._timer.stop()

    @Slot(float)
    def set_speed(self, steps_per_s: float) -> None:
        """The Speed control, mid-run: lockstep rounds per second (0: as fast as possible)."""
        self._interval_s = 1.0 / steps_per_s if steps_per_s > 0 else 0.0

    def abort(self) -> None:
        """End the engine process now (closing, while a long round holds this worker's thread): from any thread."""
        self.session.abort()

    @Slot()
    def request_step(self) -> None:
        """One lockstep round while paused."""
        if self._run_id and self._paused:
            self._round_batch(0.0)

    @Slot()
    def shut_down(self) -> None:
        """Drop the run and the model (connected, direct, to the thread's `finished`)."""
        self._timer.stop()
        self._run_id = ""
        self.session.close()

    # -- the run ---------------------------------------------------------------------------------
    def _round_batch(self, budget_s: float) -> None:
        """Rounds back to back for budget_s (at least one), emitted as one batch; the results with the last."""
        run_id = self._run_id
        try:
            batch = self.session.steps(budget_s)
        except Exception as exc:
            self._end(exc)
            return
        if batch.records:
            self.steps_traced.emit(run_id, batch.records)
        results = batch.results
        if results is not None:
            try:
                results = self._with_solo(results)
            except Exception as exc:
                self._end(exc)
                return
            self.results_ready.emit(run_id, results)
            self._end()

    def _with_solo(self, results: Mapping[str, tuple[RequestResult, ...]]) -> Mapping[str, tuple[RequestResult, ...]]:
        """The results with every request's solo tokens, run here (this thread or the engine process), one
        request at a time so Stop is read between them (then the results go without)."""
        n = len(next(iter(results.values()), ()))
        solo = []
        for i in range(n):
            if self._stop.is_set():
                return results
            solo.append(self.session.solo(i))
        return {k: with_solo(v, solo) for k, v in results.items()}

    @Slot()
    def _on_timer_timeout(self) -> None:
        if not self._run_id or self._paused or self._stop.is_set():
            return
        started = time.perf_counter()
        self._round_batch(BATCH_S if self._interval_s == 0 else 0.0)
        if self._run_id and not self._paused:
            rest = BATCH_REST_S if self._interval_s == 0 and not self.isolate else 0.0
            delay = max(rest, self._interval_s - (time.perf_counter() - started))
            self._timer.start(round(delay * 1000))

    def _end(self, error: BaseException | None = None) -> None:
        run_id, self._run_id = self._run_id, ""
        self._timer.stop()
        try:
            self.session.end()
        except Exception as exc:  # the engine process died while ending: say so, still finish
            error = error or exc
        if error is not None:
            if not isinstance(error, ValueError):
                traceback.print_exception(error)
            self.run_failed.emit(run_id, error_message(error))
        self.run_finished.emit(run_id)
