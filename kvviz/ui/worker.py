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

import json
import os
import secrets
import subprocess
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QMetaObject, QObject, Qt, QThread, QTimer, Signal, Slot

from kvviz import errors
from kvviz.trace import StepTrace
from kvviz.ui.history import RunInfo
from kvviz.ui.messages import Environment, ModelChoice, RunRequest

# A naive engine's weights are [T, T] at every step, so a long run would hold T^3 floats in all.
NAIVE_WEIGHTS_BUDGET_BYTES = 256 << 20
CLOSE_WAIT_S = 5.0  # an engine process gets this long to exit after it is asked to
# Running as fast as possible, the engine process runs rounds back to back for this long per batch:
# one message per batch instead of a request and an answer per step, and the next batch is asked
# for before this one is handed on (RunWorker._take). Pause shows the rounds run until the batch in
# flight ends (at most this much more); Stop drops that batch.
BATCH_S = 0.02
# Stop ends a run within this long whatever the engine process does: after it, a child that has not
# answered (stopped with SIGSTOP, stuck in a step) is killed, and the next run starts a new one.
STOP_GRACE_S = 0.5
POLL_S = 0.05  # how often a wait for the engine process looks at the stop flag


def _tr(text: str) -> str:
    return QCoreApplication.translate("RunWorker", text)


def default_threads() -> int:
    """Torch CPU threads for a run: every core but one, which the GUI keeps for painting."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def naive_weights_bytes(n_prompt: int, max_new_tokens: int) -> int:
    """Bytes of float32 attention weights a naive run would copy out: step k attends (P+k) x (P+k)."""
    return sum((n_prompt + k) ** 2 for k in range(max_new_tokens)) * 4


class EngineStopped(Exception):
    """Stop was asked for and the engine process did not answer within STOP_GRACE_S: it was killed."""


class EngineError(Exception):
    """A failure reported by the engine process, already worded for the window."""


def is_out_of_memory(exc: BaseException) -> bool:
    """A device allocator ran out (see kvviz.errors), or the host did (MemoryError)."""
    return isinstance(exc, MemoryError) or errors.is_out_of_memory(exc)


def error_message(exc: BaseException) -> str:
    """One line for the window: what went wrong, and for out-of-memory what to try instead."""
    if isinstance(exc, EngineError):
        text = str(exc)
    elif isinstance(exc, MemoryError) and not isinstance(exc, errors.InsufficientMemory):
        text = _tr("out of memory; {0}").format(errors.OOM_HINT)
    else:
        text = errors.friendly_error(exc).strip() or type(exc).__name__
    return errors.one_line(text)


# -- the engines, without Qt ----------------------------------------------------------------------
class EngineSession:
    """Loads a model (kept while name, device and dtype stay the same) and runs one compare run's
    engines in lockstep. No Qt: it runs in the engine process, or in the worker's thread."""

    def __init__(self) -> None:
        self._loaded: tuple[tuple[str, str, str], object, object] | None = None  # (key, model, tokenizer)
        self._streams: dict[str, Iterator[StepTrace]] = {}
        self._steps = 0
        self._error: BaseException | None = None  # raised by the next round (see rounds)
        self._asked: tuple[int, float] | None = None  # the batch send_rounds asked for

    def environment(self) -> Environment:
        import torch

        from kvviz.devices import resolve_device
        from kvviz.engines import ENGINE_HELP, ENGINE_KEYS
        from kvviz.models.presets import PRESETS, TINY_DIR, preset_config

        models = []
        for name, preset in PRESETS.items():
            available, reason = True, ""
            if preset.trained and not (TINY_DIR / "model.safetensors").is_file():
                available = False
                reason = _tr("{0}: trained weights not found in {1} (run `kvviz train --out {1}`)").format(
                    name, TINY_DIR)
            models.append(ModelChoice(name=name, description=preset.description, config=preset_config(name),
                                      warning=preset.warning, available=available, reason=reason))
        trained = [m.name for m in models if m.available and PRESETS[m.name].trained]
        default = trained[0] if trained else next(m.name for m in models if m.available)
        devices = ["auto", "cpu"]
        if torch.cuda.is_available():
            n = torch.cuda.device_count()
            devices += ["cuda"] + ([f"cuda:{i}" for i in range(n)] if n > 1 else [])
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            devices.append("mps")
        return Environment(models=tuple(models), default_model=default, devices=tuple(devices),
                           auto_device=str(resolve_device("auto")),
                           engines=tuple((k, ENGINE_HELP.get(k, "")) for k in ENGINE_KEYS),
                           torch_version=torch.__version__, threads=default_threads())

    def start(self, req: RunRequest) -> tuple[RunInfo, ModelChoice | None, list[str]]:
        """Load (or reuse) the model and set up every engine's step generator. Returns the run's
        info, the loaded model's description when it was (re)loaded, and notes for the window."""
        import torch

        from kvviz.devices import resolve_device
        from kvviz.engines import make_engine
        from kvviz.options import check_against_model

        self.end()
        rc = req.run
        if not rc.engines:
            raise ValueError(_tr("choose at least one engine"))
        threads = req.threads if req.threads is not None else default_threads()
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        device = resolve_device(req.device)
        model, tokenizer, loaded = self._load(req.model, device, req.dtype)
        cfg = model.cfg
        prompt_ids = tokenizer.encode(rc.prompt)
        check_against_model(cfg, len(prompt_ids), rc.max_new_tokens, block_size=rc.block_size,
                            top_k=rc.sampling.top_k)
        trace = rc.trace
        if trace.weights_layer is not None:
            if not 0 <= trace.weights_layer < cfg.n_layer:
                raise ValueError(_tr("attention layer {0} is outside 0..{1}").format(
                    trace.weights_layer, cfg.n_layer - 1))
            if not 0 <= trace.weights_head < cfg.n_head:
                raise ValueError(_tr("attention head {0} is outside 0..{1}").format(
                    trace.weights_head, cfg.n_head - 1))
        notes = []
        for key in rc.engines:
            options = trace
            if key == "naive" and trace.weights_layer is not None and \
                    naive_weights_bytes(len(prompt_ids), rc.max_new_tokens) > NAIVE_WEIGHTS_BUDGET_BYTES:
                options = replace(trace, weights_layer=None)
                notes.append(_tr("naive: attention weights not captured, a run this long would hold more "
                                 "than {0} MiB of them").format(NAIVE_WEIGHTS_BUDGET_BYTES >> 20))
            engine = make_engine(key, model, block_size=rc.block_size)
            self._streams[key] = engine.generate(prompt_ids, rc.max_new_tokens, rc.sampling, options,
                                                 run_id=req.run_id, token_text=tokenizer.token_text)
        self._steps = rc.max_new_tokens
        dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        info = RunInfo(
            run_id=req.run_id, model_name=req.model, device=str(device), dtype=dtype, prompt=rc.prompt,
            prompt_ids=tuple(prompt_ids), prompt_labels=tuple(tokenizer.token_text(i) for i in prompt_ids),
            engines=tuple(rc.engines), max_new_tokens=rc.max_new_tokens, n_layer=cfg.n_layer,
            n_head=cfg.n_head, n_kv_head=cfg.n_kv_head, head_dim=cfg.head_dim,
            param_count=cfg.param_count(), kv_bytes_per_token=cfg.kv_bytes_per_token(dtype),
            block_size=rc.block_size)
        return info, loaded, notes

    def round(self) -> list[StepTrace]:
        """Step k of every engine, in the run's engine order."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        traces = []
        for key, stream in self._streams.items():
            try:
                traces.append(next(stream))
            except StopIteration:
                raise RuntimeError(f"{key} stopped after {len(traces)} of {self._steps} steps") from None
        return traces

    def rounds(self, most: int, budget_s: float = 0.0) -> list[list[StepTrace]]:
        """Rounds back to back, at least one and at most `most`, until `budget_s` has passed.

        One call per batch, not per step: a step that follows another at once runs with warm caches
        and no wake-up, as in `kvviz bench`. A failure after some rounds returns those; the next
        call raises it, so no computed step is lost."""
        done = [self.round()]
        started = time.perf_counter()
        while len(done) < most and time.perf_counter() - started < budget_s:
            try:
                done.append(self.round())
            except Exception as exc:
                self._error = exc
                break
        return done

    def send_rounds(self, most: int, budget_s: float = 0.0) -> None:
        """Ask for a batch of rounds (see rounds); receive_rounds() returns it. Here in the same
        thread the batch runs when it is received; the engine process runs it meanwhile."""
        self._asked = (most, budget_s)

    def receive_rounds(self) -> list[list[StepTrace]]:
        asked, self._asked = self._asked, None
        if asked is None:
            raise RuntimeError("receive_rounds() without send_rounds()")
        return self.rounds(*asked)

    def discard_rounds(self) -> None:
        """Forget the batch asked for (nothing ran yet here)."""
        self._asked = None

    def end(self) -> None:
        self._error = None
        self._asked = None
        streams, self._streams = self._streams, {}
        for stream in streams.values():
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    def release_model(self) -> None:
        self.end()
        self._loaded = None
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()

    def close(self) -> None:
        self.release_model()

    def _load(self, name: str, device, dtype_name: str):
        from kvviz.devices import resolve_dtype
        from kvviz.models.presets import load_model, load_tokenizer

        key = (name, str(device), dtype_name)
        if self._loaded is not None and self._loaded[0] == key:
            return self._loaded[1], self._loaded[2], None
        self.release_model()  # free the previous model before the next one is loaded
        tokenizer = load_tokenizer(name)
        model = load_model(name, device, None)
        dtype = resolve_dtype(None if dtype_name == "auto" else dtype_name, device, model.cfg.dtype)
        model = model.to(dtype)
        self._loaded = (key, model, tokenizer)
        return model, tokenizer, ModelChoice(name=name, config=model.cfg)


def _serve(conn) -> None:
    """Answer ("ok", value) or ("error", one-line message) to each command until "close"."""
    session = EngineSession()
    commands = {
        "environment": session.environment,
        "start": session.start,
        "round": session.round,
        "rounds": session.rounds,
        "end": session.end,
    }
    while True:
        try:
            command, args = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            break  # the app went away
        if command == "close":
            break
        try:
            try:
                value = commands[command](*args)
            except Exception as exc:
                if not isinstance(exc, ValueError):
                    traceback.print_exc()
                if is_out_of_memory(exc):
                    session.release_model()
                else:
                    session.end()
                conn.send(("error", error_message(exc)))
            else:
                conn.send(("ok", value))
        except (EOFError, OSError):
            break  # the app went away while this command ran: nobody to answer
    session.close()


def serve_engines() -> None:
    """The engine process's entry point: listen, print the address on stdout, serve one connection."""
    from multiprocessing.connection import Listener

    from kvviz.timing import steady_allocator

    steady_allocator()  # as `kvviz bench` does (see kvviz.timing.steady_allocator)
    authkey = bytes.fromhex(os.environ.pop(_KEY_VARIABLE))
    with Listener(authkey=authkey) as listener:
        print(json.dumps(listener.address), flush=True)
        os.dup2(2, 1)  # later output goes to stderr: nobody reads this pipe after the address
        conn = listener.accept()
    _serve(conn)


_KEY_VARIABLE = "KVVIZ_ENGINE_AUTHKEY"
_ENTRY = "from kvviz.ui.worker import serve_engines; serve_engines()"


class EngineProcess:
    """An EngineSession in a child process, with the same methods.

    The child is a fresh interpreter running `serve_engines` (not a multiprocessing fork or spawn,
    which would re-import the caller's main script); it answers on an authenticated local
    connection. Calls block the calling thread (the worker's) until the child answers. `abort()`
    may be called from any thread: it kills the child, and a call in progress raises EngineError."""

    def __init__(self, interrupt: threading.Event | None = None) -> None:
        self._proc: subprocess.Popen | None = None
        self._conn = None
        self.interrupt = interrupt or threading.Event()  # set from any thread: waits give up (Stop)
        self._gone: str = ""  # why the last child is gone, said in the next run's notes

    def environment(self) -> Environment:
        return self._call("environment")

    def start(self, req: RunRequest):
        """Start a run; a child that died while idle (killed, crashed) or was ended by Stop is replaced
        first, transparently, and the run's notes say so."""
        if self._proc is not None and self._proc.poll() is not None:
            self._gone = _tr("the engine process had ended (exit code {0})").format(self._proc.returncode)
            self._drop()
        info, loaded, notes = self._call("start", req)
        if self._gone:
            notes = [_tr("{0}; a new one was started and the model loaded again").format(self._gone), *notes]
            self._gone = ""
        return info, loaded, notes

    def round(self) -> list[StepTrace]:
        return self._call("round")

    def rounds(self, most: int, budget_s: float = 0.0) -> list[list[StepTrace]]:
        return self._call("rounds", most, budget_s)

    def send_rounds(self, most: int, budget_s: float = 0.0) -> None:
        """Ask for a batch without waiting: the child runs it while the caller handles the last."""
        self._send("rounds", most, budget_s)

    def receive_rounds(self) -> list[list[StepTrace]]:
        return self._receive()

    def discard_rounds(self) -> None:
        """Wait (at most STOP_GRACE_S) for the batch asked for and drop it: the connection is then free
        again, or the child that did not answer is killed."""
        try:
            self._receive(STOP_GRACE_S)
        except EngineStopped:
            pass

    def end(self) -> None:
        if self._proc is not None:
            self._send("end")
            try:
                self._receive(STOP_GRACE_S)
            except EngineStopped:
                pass

    def release_model(self) -> None:
        """The child freed it already when it reported out-of-memory."""

    def abort(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()

    def close(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if proc is None:
            return
        try:
            if conn is not None:
                conn.send(("close", ()))
                conn.close()
        except (OSError, ValueError):
            pass
        try:
            proc.wait(CLOSE_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(CLOSE_WAIT_S)

    def _launch(self) -> None:
        from multiprocessing.connection import Client

        import kvviz

        authkey = secrets.token_bytes(32)
        root = str(Path(kvviz.__file__).resolve().parent.parent)
        env = dict(os.environ, **{_KEY_VARIABLE: authkey.hex()})
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        self._proc = proc = subprocess.Popen([sys.executable, "-c", _ENTRY], stdout=subprocess.PIPE, env=env)
        line = proc.stdout.readline()
        proc.stdout.close()
        if not line:
            self._proc = None
            raise EngineError(_tr("the engine process did not start (exit code {0})").format(proc.wait()))
        address = json.loads(line)
        self._conn = Client(tuple(address) if isinstance(address, list) else address, authkey=authkey)

    def _call(self, command: str, *args):
        self._send(command, *args)
        return self._receive()

    def _send(self, command: str, *args) -> None:
        if self._proc is None:
            self._launch()
        try:
            self._conn.send((command, args))
        except (OSError, ValueError):
            self._lost()

    def _receive(self, grace_s: float | None = None):
        """The child's answer. Waits as long as a step takes, unless `grace_s` is given or `interrupt`
        is set: then a child silent that much longer (stopped, stuck) is killed (EngineStopped)."""
        if self._conn is None:
            self._lost()
        deadline = None if grace_s is None else time.monotonic() + grace_s
        try:
            while not self._conn.poll(POLL_S):
                if deadline is None and self.interrupt.is_set():
                    deadline = time.monotonic() + STOP_GRACE_S
                if deadline is not None and time.monotonic() >= deadline:
                    self._kill(_tr("the engine process did not answer Stop within {0:g} s and was ended")
                               .format(STOP_GRACE_S))
                    raise EngineStopped()
            status, value = self._conn.recv()
        except (EOFError, OSError, ValueError):
            self._lost()
        if status == "error":
            raise EngineError(value)
        return value

    def _kill(self, why: str) -> None:
        """End the child now (SIGKILL ends a stopped process too); the next run starts a new one."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        self._drop()
        self._gone = why

    def _drop(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            conn.close()
        if proc is not None and proc.poll() is None:
            proc.kill()
        if proc is not None:
            proc.wait()

    def _lost(self):
        """The child is gone (killed, crashed): reap it and raise EngineError saying so."""
        proc, self._proc = self._proc, None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        code = None
        if proc is not None:
            try:
                code = proc.wait(CLOSE_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
        raise EngineError(_tr("the engine process ended unexpectedly (exit code {0}{1})").format(
            code, _tr(": killed, perhaps out of memory") if code == -9 else "")) from None


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
        if self._stop.is_set() and isinstance(error, EngineError):
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
        finally:
            self.run_finished.emit(run_id)


__all__ = ["EngineError", "EngineProcess", "EngineSession", "EngineStopped", "RunWorker", "default_threads",
           "error_message", "is_out_of_memory", "naive_weights_bytes", "serve_engines"]
