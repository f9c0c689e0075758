"""The run worker: lists what the machine offers, loads the model and drives the engines in lockstep.

RunWorker is a QObject the window moves onto a QThread: typed slots in, past-tense signals out, one
lockstep round (step k of every engine) per timer tick, so its event loop stays live between rounds
and the control slots act at once. The engines themselves run in an EngineSession, by default inside
a child process (EngineProcess): the GUI's painting and the engines then never share an interpreter
lock, so painting cannot slow an engine's measured latency, and a crash or a kill there leaves the
window up. torch, the models and the engines are imported only there (or, with isolate=False, in the
worker's thread). StepTrace records are forwarded as the engines made them.
"""
from __future__ import annotations

import threading
import time
import traceback
import weakref

from PySide6.QtCore import QCoreApplication, QMetaObject, QObject, Qt, QThread, QTimer, Signal, Slot

from kvviz import session as _session
from kvviz.messages import RunRequest
from kvviz.session import (
    BATCH_S,
    EngineError,
    EngineProcess,
    EngineSession,
    EngineStopped,
    error_message,
    is_out_of_memory,
)

_session.set_translator(lambda text: QCoreApplication.translate("RunWorker", text))


# -- the Qt side ----------------------------------------------------------------------------------
class RunWorker(QObject):
    """Typed slots in, past-tense signals out. Every slot runs in the worker's own thread."""

    environment_listed = Signal(object)  # Environment
    model_loaded = Signal(object)  # ModelChoice with the loaded model's config
    run_started = Signal(object)  # RunInfo
    run_noted = Signal(str, str)  # run_id, a one-line note about the run (e.g. a capture turned off)
    step_traced = Signal(object)  # StepTrace, as the engine made it
    run_failed = Signal(str, str)  # run_id ("" outside a run), one-line message
    run_finished = Signal(str)  # run_id; always emitted, after run_failed if the run failed

    def __init__(self, parent: QObject | None = None, *, isolate: bool = True) -> None:
        super().__init__(parent)
        self._stop = threading.Event()  # set by request_stop from any thread; cleared as a run starts
        self.session: EngineSession | EngineProcess = EngineProcess(self._stop) if isolate else EngineSession()

        me, stop = weakref.ref(self), self._stop  # no reference cycle through the closure

        def request_stop() -> None:
            """Stop the run: safe from any thread, and acting at once even while this worker's thread
            waits on the engine process (a plain function, so a signal connected to it calls it in
            the emitting thread; the run then ends within STOP_GRACE_S whatever the child does)."""
            worker = me()
            if worker is None:
                return
            if QThread.currentThread() is worker.thread():
                worker._stop_run()
                return
            stop.set()
            QMetaObject.invokeMethod(worker, "_stop_run", Qt.ConnectionType.QueuedConnection)

        self.request_stop = request_stop
        self._timer = QTimer(self)  # a child, so it moves to the worker's thread with it
        self._timer.setSingleShot(True)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._run: RunRequest | None = None
        self._rounds = 0  # rounds received (and emitted) in this run
        self._asked = False  # a batch was asked of the session and not yet received
        self._paused = False
        self._interval_s = 0.0

    # -- control slots ---------------------------------------------------------------------------
    @Slot()
    def list_environment(self) -> None:
        try:
            env = self.session.environment()
        except Exception as exc:  # a broken torch install: say so in the window
            if not isinstance(exc, EngineError):
                traceback.print_exc()
            self.run_failed.emit("", error_message(exc))
            return
        self.environment_listed.emit(env)

    @Slot(object)
    def start_run(self, request: RunRequest) -> None:
        if self._run is not None:
            self._end(self._run.run_id)
        self._stop.clear()
        self._paused = request.start_paused
        self.set_speed(request.steps_per_s)
        try:
            info, loaded, notes = self.session.start(request)
        except EngineStopped:  # Stop while the model loaded: no error, the run simply ends
            self._end(request.run_id)
            return
        except Exception as exc:
            self._end(request.run_id, exc)
            return
        self._run, self._rounds = request, 0
        if loaded is not None:
            self.model_loaded.emit(loaded)
        self.run_started.emit(info)
        for note in notes:
            self.run_noted.emit(request.run_id, note)
        if request.start_paused:
            self._round()
        else:
            self._timer.start(0)

    @Slot()
    def _stop_run(self) -> None:
        if self._run is not None:
            self._end(self._run.run_id)

    @Slot(bool)
    def set_paused(self, paused: bool) -> None:
        self._paused = bool(paused)
        if self._run is None:
            return
        if self._paused:
            self._timer.stop()
            self._drain()  # the rounds already run are shown; none after them
        elif not self._timer.isActive():
            self._timer.start(0)

    @Slot()
    def request_step(self) -> None:
        """One lockstep round while paused; ignored while running freely."""
        if self._run is not None and self._paused:
            self._round()

    @Slot(float)
    def set_speed(self, steps_per_s: float) -> None:
        """Lockstep rounds per second; 0 (or less) runs as fast as possible."""
        self._interval_s = 1.0 / steps_per_s if steps_per_s > 0 else 0.0
        if self._timer.isActive():
            self._timer.start(min(self._timer.remainingTime(), round(self._interval_s * 1000)))

    def abort(self) -> None:
        """Thread-safe, for closing: kill the engine process so a long step or load ends now."""
        abort = getattr(self.session, "abort", None)
        if abort is not None:
            abort()

    @Slot()
    def shut_down(self) -> None:
        """Drop the run, the model and the engine process without signalling. Connected (direct) to
        the thread's `finished`, so it runs in the worker's thread as the thread ends."""
        self._timer.stop()
        self._run = None
        self._asked = False
        self.session.close()

    # -- the run ---------------------------------------------------------------------------------
    @Slot()
    def _on_timer_timeout(self) -> None:
        if self._run is None or self._paused:
            return
        if self._interval_s == 0:
            # As fast as possible: batches of rounds, the next one asked for before this one is
            # handed on, so the engines never wait for this thread (nor for the GIL it shares with
            # painting): measured, 20 ms batches with a wait between them made steps 10-20% slower
            # than steps run back to back.
            if not self._asked:
                self._ask(BATCH_S)
            self._take(follow=True)
            if self._run is not None and not self._paused:
                self._timer.start(0)
            return
        started = time.perf_counter()
        self._round()
        if self._run is not None and not self._paused:
            # Pacing happens here, between rounds: outside every engine's timed region.
            delay_s = max(0.0, self._interval_s - (time.perf_counter() - started))
            self._timer.start(round(delay_s * 1000))

    def _round(self) -> None:
        """One round: step k of every engine before step k+1 of any (paced runs, Step)."""
        self._drain()
        if self._run is not None and self._ask(0.0):
            self._take(follow=False)

    def _ask(self, budget_s: float) -> bool:
        """Ask the session for rounds back to back for budget_s (at least one, at most the rest)."""
        run = self._run
        try:
            self.session.send_rounds(run.run.max_new_tokens - self._rounds, budget_s)
        except Exception as exc:
            self._end(run.run_id, None if isinstance(exc, EngineStopped) else exc)
            return False
        self._asked = True
        return True

    def _drain(self) -> None:
        """Take in the batch asked for, if any (before a pause or a change of pace): its rounds were
        run, so they are handed on."""
        if self._asked and self._run is not None:
            self._take(follow=False)

    def _take(self, follow: bool) -> None:
        """Receive the batch asked for; with `follow`, ask for the next at once (the engines run it
        while this thread hands these on); then emit the batch's traces, round by round."""
        run = self._run
        self._asked = False
        try:
            rounds = self.session.receive_rounds()
        except Exception as exc:
            self._end(run.run_id, None if isinstance(exc, EngineStopped) else exc)
            return
        self._rounds += len(rounds)
        error = None
        if follow and self._rounds < run.run.max_new_tokens:
            try:
                self.session.send_rounds(run.run.max_new_tokens - self._rounds, BATCH_S)
                self._asked = True
            except Exception as exc:
                error = exc
        for traces in rounds:
            for trace in traces:
                self.step_traced.emit(trace)
        if error is not None:
            self._end(run.run_id, error)
        elif self._rounds >= run.run.max_new_tokens:
            self._end(run.run_id)

    def _end(self, run_id: str, error: BaseException | None = None) -> None:
        stopped = self._stop.is_set()
        if stopped and isinstance(error, EngineError):
            error = None  # the child was ended by Stop: the run stopped, it did not fail
        self._run = None
        self._timer.stop()
        self._paused = False
        try:
            try:
                if self._asked:  # a batch still on its way (Stop, a new run): drop it
                    self._asked = False
                    self.session.discard_rounds()
                self.session.end()
            except Exception as exc:  # the engine process died while ending: say so, still finish
                error = error or exc
            if error is not None:
                if not isinstance(error, (ValueError, EngineError)):
                    traceback.print_exception(error)
                if is_out_of_memory(error):
                    self.session.release_model()
                self.run_failed.emit(run_id, error_message(error))
            elif stopped and getattr(self.session, "ending_note", lambda: "")():
                self.run_noted.emit(run_id, self.session.ending_note())  # Stop ended the engine process: say so
        finally:
            self.run_finished.emit(run_id)
