"""The one proxy to an engine process: a fresh child interpreter serving one session object over a private socket
pair, typed requests in (frozen dataclasses that say what the session does), frozen records out, one error type,
and one policy for the child's life (a deadline to start, a grace after Stop, a kill, no orphan, SIGINT left to
the parent). No Qt, no torch: the sessions (kvviz.runtime.session, kvviz.serving.session) declare the requests.
"""
from __future__ import annotations

import importlib
import os
import socket
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from kvviz import errors

LAUNCH_WAIT_S = 120.0  # a new engine process must say it is ready within this long
# Stop ends a wait within this long whatever the engine process does: after it, a child that has not answered
# (stopped with SIGSTOP, stuck in a step) is killed, and the next run starts a new one.
STOP_GRACE_S = 0.5
POLL_S = 0.05  # how often a wait for the engine process looks at the stop flag
PARENT_POLL_S = 0.5  # how often the engine process looks whether its parent is still there
ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding the kvviz package, for the child's sys.path
# The child ignores SIGINT from its first line: Ctrl+C in a terminal reaches the whole process group, and the
# parent alone decides what an interrupt means (end the run, close the child, exit 130). Set before any import,
# so an interrupt while the child starts prints no KeyboardInterrupt either.
_ENTRY = ("import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
          "from kvviz.runtime.process import serve; serve()")

_translate = str  # the compare view's Qt adapter sets Qt's translator (context "RunWorker") with set_translator


def _tr(text: str) -> str:
    return _translate(text)


def set_translator(translate) -> None:
    """Messages the engine sessions make go through translate(text) from now on (the app: Qt's, "RunWorker")."""
    global _translate
    _translate = translate


class EngineError(ValueError):
    """A failure the engine process reported, or the end of the process itself, in one line for the window (a
    ValueError: every caller says it as it is, with no traceback)."""


class EngineStopped(EngineError):
    """Stop was asked for and the engine process did not answer within STOP_GRACE_S (or was starting): it was
    killed. Not a failure: the run simply ends."""


def error_message(exc: BaseException) -> str:
    """One line for the window: what went wrong, and for out-of-memory what to try instead."""
    if isinstance(exc, EngineError):
        text = str(exc)
    elif isinstance(exc, MemoryError) and not isinstance(exc, errors.InsufficientMemory):
        text = _tr("out of memory; {0}").format(errors.OOM_HINT)
    else:
        text = errors.friendly_error(exc).strip() or type(exc).__name__
    return errors.one_line(text)


# -- what crosses the process boundary ------------------------------------------------------------------
class Request:
    """What the engine process is asked: a frozen dataclass whose apply(session) runs in the child and returns
    the record sent back. A session answers end(), release_model() and close() besides its own requests."""

    def apply(self, session):
        raise NotImplementedError


@dataclass(frozen=True)
class EndRun(Request):
    """Drop the run (its engines and streams); the model stays loaded."""

    def apply(self, session) -> None:
        session.end()


@dataclass(frozen=True)
class Close(Request):
    """Exit: the loop ends, the session is closed (answered by the child's exit)."""


@dataclass(frozen=True)
class Ready:
    """The child's first record: its session is built and it takes requests."""

    pid: int


@dataclass(frozen=True)
class Failed:
    """The child's answer to a request that failed: what went wrong, in one line (EngineError in the parent)."""

    message: str


# -- the child --------------------------------------------------------------------------------------------
def serve() -> None:
    """The engine process's entry point: argv holds the socket's descriptor and the session as "module:Class"."""
    from kvviz.measure.timing import steady_allocator

    conn = Connection(int(sys.argv[1]))
    os.dup2(2, 1)  # a stray print goes to stderr: the parent's stdout is its own
    _end_with_parent(os.getppid())
    steady_allocator()  # as `kvviz bench` does (see kvviz.measure.timing.steady_allocator)
    module, _, name = sys.argv[2].partition(":")
    serve_requests(getattr(importlib.import_module(module), name)(), conn)


def serve_requests(session, conn: Connection) -> None:
    """Say Ready, then answer each request with the session's record, or Failed (the run ended, and for
    out-of-memory the model freed), until Close or the parent goes away."""
    try:
        conn.send(Ready(os.getpid()))
    except OSError:
        return
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            break  # the parent went away
        except Exception as exc:  # a request whose class this process cannot import: said in the answer
            request = exc
        if isinstance(request, Close):
            break
        try:
            if isinstance(request, Exception):
                raise request
            if not isinstance(request, Request):
                raise EngineError(f"the engine process takes requests, not a {type(request).__name__}")
            reply = request.apply(session)
        except Exception as exc:
            if not isinstance(exc, ValueError):
                traceback.print_exc()
            if errors.is_out_of_memory(exc):
                session.release_model()
            else:
                session.end()
            reply = Failed(error_message(exc))
        try:
            conn.send(reply)
        except OSError:
            break  # the parent went away while the request ran: nobody to answer
    session.close()


def _end_with_parent(parent: int) -> None:
    """Exit when the parent is gone, even mid-step (killed outright, it cannot close this process)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="kvviz-engine-parent").start()


# -- the parent -------------------------------------------------------------------------------------------
class EngineProxy:
    """The parent's end of one engine process serving `session` ("module:Class"), started at the first request.

    call(request) returns the child's record (a Failed answer raises EngineError); send and receive split it, so
    that the child works while the caller does. Calls block the calling thread; `interrupt` (set from any thread)
    gives the child STOP_GRACE_S more, then kills it (EngineStopped); abort() kills it from any thread; close()
    asks it to exit and kills it after `close_wait_s`. renew() replaces a child that died or was stopped (SIGSTOP)
    while idle; ending_note() says why the last child was ended."""

    session = ""
    close_wait_s = 0.3

    def __init__(self, interrupt: threading.Event | None = None) -> None:
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None  # set once the child said Ready
        self.interrupt = interrupt or threading.Event()
        self._gone = ""  # why the last child is gone, said in the next run's notes

    def call(self, request: Request):
        self.send(request)
        return self.receive()

    def send(self, request: Request) -> None:
        if self._proc is None:
            self._launch()
        try:
            self._conn.send(request)
        except (OSError, ValueError):
            self._lost()

    def receive(self, grace_s: float | None = None):
        """The child's record. Waits as long as a step takes, unless `grace_s` is given or `interrupt` is set:
        then a child silent that much longer (stopped, stuck) is killed (EngineStopped)."""
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
                    raise EngineStopped(self._gone)
            reply = self._conn.recv()
        except EngineStopped:
            raise
        except (EOFError, OSError, ValueError):  # ValueError: the connection was closed under the wait (abort)
            self._lost()
        if isinstance(reply, Failed):
            raise EngineError(reply.message)
        return reply

    def drop_answer(self, grace_s: float = STOP_GRACE_S) -> None:
        """Wait (at most grace_s) for the record on its way and drop it: the connection is then free again, or
        the child that did not answer is killed."""
        try:
            self.receive(grace_s)
        except EngineStopped:
            pass

    def renew(self) -> None:
        """Before a run: end a child that died or was stopped (SIGSTOP) while idle; the next request starts a
        new one, and take_note() says why."""
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            self._gone = _tr("the engine process had ended (exit code {0})").format(proc.returncode)
            self._drop()
        elif proc is not None and _is_stopped(proc.pid):
            self._kill(_tr("the engine process was stopped (SIGSTOP) while idle and was ended"))

    def take_note(self) -> str:
        """Once a run has started on a new child: why the last one was replaced, or ''."""
        gone, self._gone = self._gone, ""
        return _tr("{0}; a new one was started and the model loaded again").format(gone) if gone else ""

    def ending_note(self) -> str:
        """Why the last child was ended (Stop killed it, it was found stopped), or ''."""
        return self._gone

    def abort(self) -> None:
        """From any thread: kill the child now (a call in progress raises EngineError in its caller)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()

    def close(self) -> None:
        """Ask the child to exit; kill it if it has not within close_wait_s (a frozen or busy one at once)."""
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if proc is None:
            return
        try:
            if conn is not None:
                conn.send(Close())
                conn.close()
        except (OSError, ValueError):
            pass
        try:
            proc.wait(self.close_wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _launch(self) -> None:
        """Start the child and wait for its Ready: killed on `interrupt` (EngineStopped) or after LAUNCH_WAIT_S."""
        # A fresh interpreter, not a multiprocessing spawn: that re-imports the caller's main script, and a
        # script without a __main__ guard then starts itself again.
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH", "")) if p)
        mine, theirs = socket.socketpair()
        with mine, theirs:
            self._proc = proc = subprocess.Popen([sys.executable, "-c", _ENTRY, str(theirs.fileno()), self.session],
                                                 pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env)
            conn = Connection(mine.detach())
        deadline = time.monotonic() + LAUNCH_WAIT_S
        try:
            while not conn.poll(POLL_S):
                if self.interrupt.is_set() or time.monotonic() > deadline:
                    conn.close()
                    if self.interrupt.is_set():
                        self._kill(_tr("the engine process was ended by Stop while it started"))
                        raise EngineStopped(self._gone)
                    self._kill(_tr("the engine process did not start within {0:g} s and was ended")
                               .format(LAUNCH_WAIT_S))
                    raise EngineError(self._gone)
            conn.recv()  # Ready
        except (EOFError, OSError) as exc:
            conn.close()
            code = proc.wait()
            self._proc = None
            raise EngineError(_tr("the engine process did not start (exit code {0})").format(code)) from exc
        self._conn = conn

    def _kill(self, why: str) -> None:
        """End the child now (SIGKILL ends a stopped process too); the next run starts a new one."""
        self._drop()
        self._gone = why

    def _drop(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            conn.close()
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
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
                code = proc.wait(self.close_wait_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
        raise EngineError(_tr("the engine process ended unexpectedly (exit code {0}{1})").format(
            code, _tr(": killed, perhaps out of memory") if code == -9 else "")) from None


def _is_stopped(pid: int) -> bool:
    """True when the process is stopped (SIGSTOP, a debugger): Linux's /proc/PID/stat says 'T' or 't'."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read(512)
    except OSError:
        return False
    return stat.rpartition(b")")[2][1:2] in (b"T", b"t")
