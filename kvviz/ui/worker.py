"""The run worker (a QObject on a QThread: typed slots in, past-tense signals out): lists the machine's offer, starts
runs in an EngineSession (by default its own process, so painting never slows a measured step) and shows one
lockstep round (step k of every engine) per tick. The engines run in batches ahead of what is shown, each engine's
steps back to back: the Speed control paces the showing, never the engines. Only this module imports the session."""
from __future__ import annotations

import threading
import time
import traceback
import weakref
from collections import deque

from PySide6.QtCore import QCoreApplication, QMetaObject, QObject, Qt, QThread, QTimer, Signal, Slot

from kvviz.errors import is_out_of_memory
from kvviz.runtime import session as _session
from kvviz.runtime.messages import RunRequest
from kvviz.runtime.session import (
    EngineError,
    EngineProcess,
    EngineSession,
    EngineStopped,
    error_message,
)

_session.set_translator(lambda text: QCoreApplication.translate("RunWorker", text))
# The engines run in batches of about this long (EngineSession.rounds: each engine's steps back to back), asked
# for before the last is shown, whatever the Speed control. In rounds of one, run between the ticks of a paced
# run, each step began on caches the other engines had cooled; in 20 ms batches naive+concat ran two rounds a
# batch, and half of concat's steps came after naive's.
BATCH_S = 0.25


# -- the Qt side ----------------------------------------------------------------------------------
def refused(worker: QObject, request: object, kind: type, run: str) -> bool:
    """True when `request` is not a `kind`, once `worker` (the compare or the serve worker) has said so: run_failed
    with no run id, then run_finished."""
    if isinstance(request, kind):
        return False
    worker.run_failed.emit("", f"{run} starts from a {kind.__name__}, not a {type(request).__name__}")
    worker.run_finished.emit("")
    return True


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
        self._rounds = 0  # rounds received in this run (emitted, or waiting in _ready)
        self._ready: deque[list] = deque()  # rounds the engines ran that a paced run has not shown yet
        self._asked = False  # a batch was asked of the session and not yet received
        self._paused = False
        self._interval_s = 0.0

    # -- control slots ---------------------------------------------------------------------------
    @Slot()
    def list_environment(self) -> None:
        try:
            env = self.session.environment()
        except EngineStopped:  # the window closed while the engine process started: nothing to say
            return
        except Exception as exc:  # a broken torch install: say so in the window
            if not isinstance(exc, EngineError):
                traceback.print_exc()
            self.run_failed.emit("", error_message(exc))
            return
        self.environment_listed.emit(env)

    @Slot(object)
    def start_run(self, request: RunRequest) -> None:
        """Start the run the RunRequest describes; anything else is refused with run_failed (no run id) and
        run_finished, and a run in progress goes on."""
        if refused(self, request, RunRequest, "a run"):
            return
        if self._run is not None:
            self._end(self._run.run_id)
        self._stop.clear()
        self._paused = request.start_paused
        self.set_speed(request.steps_per_s)
        try:
            started = self.session.start(request)
        except EngineStopped:  # Stop while the model loaded: no error, the run simply ends
            self._end(request.run_id)
            return
        except Exception as exc:
            self._end(request.run_id, exc)
            return
        self._run, self._rounds = request, 0
        if started.loaded is not None:
            self.model_loaded.emit(started.loaded)
        self.run_started.emit(started.info)
        for note in started.notes:
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
        """Pause: the rounds the engines ran ahead wait, unshown, for Step or resume."""
        self._paused = bool(paused)
        if self._run is None:
            return
        if self._paused:
            self._timer.stop()
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
            # As fast as possible: every round as soon as its batch arrives, the next batch asked for before
            # this one is handed on, so the engines never wait for this thread (nor for the GIL it shares
            # with painting).
            if not self._asked and not self._ready and not self._ask():
                return
            self._take(show_all=True)
            if self._run is not None and not self._paused:
                self._timer.start(0)
            return
        started = time.perf_counter()
        self._round()
        if self._run is not None and not self._paused:
            # Pacing happens here, between rounds shown: the engines ran them earlier, back to back.
            delay_s = max(0.0, self._interval_s - (time.perf_counter() - started))
            self._timer.start(round(delay_s * 1000))

    def _round(self) -> None:
        """Show one round (paced runs, Step): the next the engines ran, waiting for their batch if none is left."""
        if not self._ready and (self._asked or self._ask()):
            self._take(show_all=False)
        if self._run is not None and self._ready:
            self._show(self._ready.popleft())
            self._end_if_done()

    def _ask(self) -> bool:
        """Ask the session for a batch of rounds (at least one, at most the rest of the run)."""
        run = self._run
        try:
            self.session.send_rounds(run.run.max_new_tokens - self._rounds, BATCH_S)
        except Exception as exc:
            self._end(run.run_id, None if isinstance(exc, EngineStopped) else exc)
            return False
        self._asked = True
        return True

    def _take(self, show_all: bool) -> None:
        """Receive the batch asked for (if one was), ask for the next at once (the engines run it while this
        thread shows these), and keep its rounds to show: all of them now with `show_all`."""
        run = self._run
        error = None
        if self._asked:
            self._asked = False
            try:
                rounds = self.session.receive_rounds()
            except EngineStopped:  # Stop ended an engine process that did not answer: the run ends here
                self._end(run.run_id)
                return
            except Exception as exc:
                rounds, error = [], exc
            self._rounds += len(rounds)
            self._ready.extend(rounds)
            if error is None and self._rounds < run.run.max_new_tokens:
                try:
                    self.session.send_rounds(run.run.max_new_tokens - self._rounds, BATCH_S)
                    self._asked = True
                except Exception as exc:
                    error = exc
        if show_all or error is not None:  # a failure shows every step run before it
            while self._ready:
                self._show(self._ready.popleft())
        if error is not None:
            self._end(run.run_id, None if isinstance(error, EngineStopped) else error)
        else:
            self._end_if_done()

    def _show(self, traces: list) -> None:
        for trace in traces:
            self.step_traced.emit(trace)

    def _end_if_done(self) -> None:
        if self._run is not None and self._rounds >= self._run.run.max_new_tokens and not self._ready:
            self._end(self._run.run_id)

    def _end(self, run_id: str, error: BaseException | None = None) -> None:
        stopped = self._stop.is_set()
        if stopped and isinstance(error, EngineError):
            error = None  # the child was ended by Stop: the run stopped, it did not fail
        self._run = None
        self._timer.stop()
        self._paused = False
        self._ready.clear()
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
