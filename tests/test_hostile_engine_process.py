"""Hostile input: engine-process faults in every state. The child is stopped
with SIGSTOP while it starts (before it says where it listens), while it loads the model, mid-run, and
while idle; Stop (or the next Run) must end it, say so in a note, and the next run must work with a
fresh child. The time from Stop to the run's end is printed (`-s`) and recorded in docs/hostile-input.md,
not asserted (pytest-qt's waitSignal bound of 5 s is a hang detector).
"""
from __future__ import annotations

import os
import signal
import time

import pytest

from kvviz.config import RunConfig, SamplingConfig, TraceOptions
from kvviz.runtime.messages import RunRequest
from tests.test_ui_worker import Recorder

HANG_MS = 5_000


def request(run_id: str, tokens: int = 4, prompt: str = "KV cache") -> RunRequest:
    run = RunConfig(prompt=prompt, max_new_tokens=tokens, engines=("concat", "static"), sampling=SamplingConfig(),
                    trace=TraceOptions(masks=True))
    return RunRequest(run_id=run_id, model="tiny-random", run=run, steps_per_s=0.0, start_paused=False, threads=1)


@pytest.fixture
def threaded_worker(qtbot, torch_cpu):
    """A RunWorker with an engine process, on its own QThread as the window has it; start/stop as signals."""
    from tests.conftest import threaded_worker

    win, thread, worker = threaded_worker()
    frozen: list[int] = []
    yield win, worker, Recorder(worker), frozen
    for pid in frozen:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    thread.quit()
    thread.wait(10_000)


def _wait_for(condition, timeout_s: float = 120.0, step_s: float = 0.0005) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(step_s)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie not yet reaped still answers kill(0)
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2][1:2] == b"Z"
    except OSError:
        return True


def _stop_and_time(qtbot, win, worker, rec, pid: int) -> float:
    t0 = time.perf_counter()
    with qtbot.waitSignal(worker.run_finished, timeout=HANG_MS):
        win.stop.emit()
    return time.perf_counter() - t0


def _next_run_works(qtbot, win, worker, rec, old_pid: int) -> None:
    with qtbot.waitSignal(worker.run_finished, timeout=120_000):
        win.start.emit(request("next"))
    assert [rid for rid, _ in rec.failed] == [], rec.failed
    assert len([t for t in rec.traces if t.run_id == "next"]) == 2 * 4  # 2 engines x 4 steps, counted
    assert worker.session._proc.pid != old_pid  # a fresh child
    assert _gone(old_pid)


@pytest.mark.parametrize("state", ["starting", "loading", "running"])
def test_stop_ends_a_stopped_engine_process_in_every_state(qtbot, threaded_worker, state):
    win, worker, rec, frozen = threaded_worker
    session = worker.session
    win.start.emit(request("r1", tokens=1000 if state == "running" else 4, prompt="x"))
    if state == "starting":
        _wait_for(lambda: session._proc is not None)
    elif state == "loading":
        _wait_for(lambda: session._conn is not None)  # connected: the start command follows at once
    else:
        qtbot.waitUntil(lambda: len(rec.traces) > 0, timeout=120_000)
    pid = session._proc.pid
    os.kill(pid, signal.SIGSTOP)
    frozen.append(pid)
    if state == "starting":
        assert session._conn is None, "the child said where it listens before it was stopped: not 'starting'"
    if state == "loading":
        assert rec.started == [], "the run had started before the child was stopped: not 'loading'"
    elapsed = _stop_and_time(qtbot, win, worker, rec, pid)
    print(f"\nStop with the engine process stopped while {state}: the run ended in {elapsed * 1000:.0f} ms")
    assert rec.failed == []  # Stop is not a failure
    notes = [note for rid, note in rec.notes if rid == "r1"]
    assert len(notes) == 1 and "ended" in notes[0], rec.notes  # it says so, in one note
    _wait_for(lambda: _gone(pid), timeout_s=5)
    _next_run_works(qtbot, win, worker, rec, pid)
    assert any("a new one was started" in note for rid, note in rec.notes if rid == "next")


def test_a_stopped_idle_engine_process_is_replaced_by_the_next_run(qtbot, threaded_worker):
    win, worker, rec, frozen = threaded_worker
    with qtbot.waitSignal(worker.run_finished, timeout=120_000):
        win.start.emit(request("r1"))
    pid = worker.session._proc.pid
    os.kill(pid, signal.SIGSTOP)
    frozen.append(pid)
    _wait_for(lambda: open(f"/proc/{pid}/stat", "rb").read().rpartition(b")")[2][1:2] == b"T", timeout_s=5)
    t0 = time.perf_counter()
    _next_run_works(qtbot, win, worker, rec, pid)
    print(f"\nRun with the idle engine process stopped: a fresh one ran 4 steps in {time.perf_counter() - t0:.1f} s")
    assert any("while idle" in note for rid, note in rec.notes if rid == "next"), rec.notes


def test_closing_ends_a_busy_engine_process_at_once(torch_cpu):
    """close() asks the child to exit and kills it after CLOSE_WAIT_S: a frozen child does not hold it."""
    from kvviz.runtime.session import CLOSE_WAIT_S, EngineProcess

    proc = EngineProcess()
    proc.environment()
    pid = proc._proc.pid
    os.kill(pid, signal.SIGSTOP)
    t0 = time.perf_counter()
    proc.close()
    elapsed = time.perf_counter() - t0
    print(f"\nclose() with a stopped child: {elapsed * 1000:.0f} ms (grace {CLOSE_WAIT_S} s)")
    assert _gone(pid)
