"""The one proxy to an engine process (kvviz.runtime.process.EngineProxy): both views' engine processes are it,
typed requests in and frozen records out, one error type with a one-line message, Stop's grace and kill, a child
stopped while idle replaced, no child left behind a parent killed outright. A small session of this module's
own (NapSession) stands in for the engines where a test needs no model.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass

import pytest

from kvviz.runtime.process import EngineError, EngineProxy, EngineStopped, Request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Napped:
    pid: int
    seconds: float


class NapSession:
    """A session with one request (Nap): sleep, then say who slept."""

    def __init__(self) -> None:
        self.ended = 0

    def nap(self, seconds: float) -> Napped:
        time.sleep(seconds)
        return Napped(os.getpid(), seconds)

    def end(self) -> None:
        self.ended += 1

    def release_model(self) -> None:
        self.end()

    def close(self) -> None:
        self.end()


@dataclass(frozen=True)
class Nap(Request):
    seconds: float

    def apply(self, session) -> Napped:
        return session.nap(self.seconds)


class NapProcess(EngineProxy):
    session = f"{__name__}:NapSession"


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2][1:2] == b"Z"
    except OSError:
        return True


def _wait_for(condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.01)


@pytest.fixture
def naps(monkeypatch):
    """A NapProcess whose child imports this module by the name pytest gave it."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([os.path.dirname(os.path.abspath(__file__)), ROOT]))
    proxy = NapProcess()
    yield proxy
    proxy.close()


def test_both_views_engine_processes_are_the_one_proxy():
    from kvviz.runtime.session import EngineProcess
    from kvviz.serving.session import ServeProcess

    assert issubclass(EngineProcess, EngineProxy) and issubclass(ServeProcess, EngineProxy)
    assert EngineProcess.session.endswith(":EngineSession") and ServeProcess.session.endswith(":ServeSession")


def test_a_request_comes_back_as_a_frozen_record_from_the_child(naps):
    record = naps.call(Nap(0.0))
    assert isinstance(record, Napped) and record.pid == naps._proc.pid != os.getpid()
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.pid = 0


def test_a_failed_or_foreign_request_is_one_line_and_the_child_serves_on(naps, tmp_path, monkeypatch):
    with pytest.raises(EngineError) as failed:
        naps.call(Nap(-1.0))  # time.sleep refuses a negative length in the child
    assert "\n" not in str(failed.value) and "negative" in str(failed.value)
    pid = naps._proc.pid
    naps.send(("nap", (0.0,)))  # a tuple, not a request
    with pytest.raises(EngineError, match="takes requests, not a tuple"):
        naps.receive()
    (tmp_path / "parent_only.py").write_text("from kvviz.runtime.process import Request\n\n"
                                             "class Foreign(Request):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # this process imports it, the child cannot
    from parent_only import Foreign

    with pytest.raises(EngineError, match="parent_only") as failed:
        naps.call(Foreign())
    assert "\n" not in str(failed.value)
    assert naps.call(Nap(0.0)).pid == pid  # the same child, still serving


def test_stop_gives_a_busy_child_its_grace_then_kills_it(naps):
    from kvviz.runtime.process import STOP_GRACE_S

    naps.call(Nap(0.0))
    pid = naps._proc.pid
    naps.send(Nap(60.0))
    threading.Timer(0.2, naps.interrupt.set).start()
    t0 = time.perf_counter()
    with pytest.raises(EngineStopped):
        naps.receive()
    print(f"\nStop on a busy child: ended after {(time.perf_counter() - t0) * 1000:.0f} ms (grace {STOP_GRACE_S} s)")
    assert _gone(pid) and naps._proc is None and "did not answer Stop" in naps.ending_note()
    naps.interrupt.clear()
    assert naps.call(Nap(0.0)).pid != pid  # the next request starts a new child


def test_a_child_stopped_while_idle_is_replaced_with_a_note(naps):
    pid = naps.call(Nap(0.0)).pid
    os.kill(pid, signal.SIGSTOP)
    _wait_for(lambda: open(f"/proc/{pid}/stat", "rb").read().rpartition(b")")[2][1:2] == b"T", 5)
    naps.renew()
    assert _gone(pid)
    assert naps.call(Nap(0.0)).pid != pid
    note = naps.take_note()
    assert "stopped (SIGSTOP) while idle" in note and "a new one was started" in note
    assert naps.take_note() == ""  # said once


def test_a_child_that_cannot_build_its_session_says_so_in_one_line():
    class Broken(EngineProxy):
        session = "kvviz.no_such_module:Session"

    proxy = Broken()
    with pytest.raises(EngineError, match=r"did not start \(exit code 1\)") as failed:
        proxy.call(Nap(0.0))
    assert "\n" not in str(failed.value) and proxy._proc is None


def test_the_child_of_a_parent_killed_outright_mid_request_ends():
    """The parent is SIGKILLed while its child sleeps in a request: nobody closes the child, and it must not
    stay (an orphan would sleep on for a minute)."""
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {ROOT!r})
        from tests.test_engine_proxy import Nap, NapProcess
        proxy = NapProcess()
        proxy.call(Nap(0.0))
        proxy.send(Nap(60.0))
        print(proxy._proc.pid, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        child = int(parent.stdout.readline())
        time.sleep(0.3)  # the child is in its nap
        assert not _gone(child)
    finally:
        parent.kill()
        parent.wait()
    _wait_for(lambda: _gone(child), 30)  # a hang detector: it ends within PARENT_POLL_S


def test_the_serve_engine_process_answers_with_frozen_records(torch_cpu):
    """No dict meta and no tuples on the wire: a run's start, its batches and its results come as records."""
    from kvviz.runtime.process import EndRun
    from kvviz.serving.record import LaneRecord, ServeBatch, ServeStarted
    from kvviz.serving.session import ServeProcess, ServeSteps, StartServe
    from kvviz.serving.spec import ServeSpec, preset_requests

    spec = ServeSpec(model="tiny-random", requests=tuple(preset_requests("shared-prefix"))[:2],
                     schedulers=("paged", "prefix"), blocks=64, block_size=16)
    proc = ServeProcess()
    try:
        started = proc.call(StartServe(spec, threads=1))
        assert isinstance(started, ServeStarted) and set(started.settings) == {"paged", "prefix"}
        assert len(started.prompt_lens) == 2 and all(n > 0 for n in started.prompt_lens)
        batch = proc.call(ServeSteps(0.0))
        assert isinstance(batch, ServeBatch) and batch.results is None
        assert [type(r) for r in batch.records] == [LaneRecord, LaneRecord]
        assert [r.lane for r in batch.records] == ["paged", "prefix"] and batch.records[0].record.step == 0
        with pytest.raises(dataclasses.FrozenInstanceError):
            batch.records[0].lane = "static"
        proc.call(EndRun())
        with pytest.raises(EngineError, match="tick at least one scheduler"):
            proc.start(dataclasses.replace(spec, schedulers=()))
        assert proc.start(spec).settings.keys() == {"paged", "prefix"}  # still serving after a refused run
    finally:
        proc.close()
