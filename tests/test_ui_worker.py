"""RunWorker on its own: lockstep rounds, pause / step / resume / stop, pacing, errors, and the engine
process. The worker stays in the test's thread here (no QThread), so its signals are direct and
pytest-qt may wait on them; the window tests cover the threaded path."""
from __future__ import annotations

import time

import pytest

from kvviz.config import RunConfig, SamplingConfig, TraceOptions
from kvviz.runtime.messages import Rounds, RunRequest

PROMPT = "The cache keeps"


@pytest.fixture
def worker(qtbot, torch_cpu):
    from kvviz.ui.worker import RunWorker

    w = RunWorker(isolate=False)
    yield w
    w.shut_down()


@pytest.fixture(params=["in-thread", "engine-process"])
def any_worker(request, qtbot, torch_cpu):
    """Both sessions: in the worker's thread, and the app's own (a child process, whose next batch
    is asked for before the last is handed on)."""
    from kvviz.ui.worker import RunWorker

    w = RunWorker(isolate=request.param == "engine-process")
    yield w
    w.shut_down()


def request(run_id="r1", *, tokens=6, engines=("naive", "concat", "static", "paged"), speed=0.0,
            paused=False, model="tiny-random", weights_layer=0, prompt=PROMPT) -> RunRequest:
    run = RunConfig(prompt=prompt, max_new_tokens=tokens, engines=tuple(engines), sampling=SamplingConfig(),
                    trace=TraceOptions(masks=True, weights_layer=weights_layer, weights_head=0))
    return RunRequest(run_id=run_id, model=model, run=run, steps_per_s=speed, start_paused=paused, threads=1)


class Recorder:
    def __init__(self, worker) -> None:
        self.traces, self.failed, self.finished, self.started, self.notes = [], [], [], [], []
        worker.step_traced.connect(self.traces.append)
        worker.run_failed.connect(lambda rid, msg: self.failed.append((rid, msg)))
        worker.run_finished.connect(self.finished.append)
        worker.run_started.connect(self.started.append)
        worker.run_noted.connect(lambda rid, note: self.notes.append((rid, note)))


def test_environment_lists_presets_devices_and_engines(worker, qtbot):
    with qtbot.waitSignal(worker.environment_listed, timeout=60_000) as got:
        worker.list_environment()
    env = got.args[0]
    names = [m.name for m in env.models]
    assert "tiny-random" in names and env.default_model in names
    assert env.devices[:2] == ("auto", "cpu")
    assert [k for k, _ in env.engines][:2] == ["naive", "concat"]
    assert all(help_text for _, help_text in env.engines)
    assert all(m.config is not None for m in env.models)


def test_lockstep_every_engine_before_the_next_step(any_worker, qtbot):
    worker = any_worker
    rec = Recorder(worker)
    with qtbot.waitSignal(worker.run_finished, timeout=60_000):
        worker.start_run(request(tokens=8))
    assert rec.failed == []
    assert rec.finished == ["r1"]
    engines = ["naive", "concat", "static", "paged"]
    assert [(t.engine, t.step) for t in rec.traces] == [(e, k) for k in range(8) for e in engines]
    info = rec.started[0]
    assert info.run_id == "r1" and info.engines == tuple(engines) and info.max_new_tokens == 8
    assert info.kv_bytes_per_token == 2 * info.n_layer * info.n_kv_head * info.head_dim * 4
    tokens = {e: [t.token_id for t in rec.traces if t.engine == e] for e in engines}
    assert len({tuple(v) for v in tokens.values()}) == 1


def test_traces_are_forwarded_as_the_engine_made_them(worker, qtbot, watch_engines):
    made = []
    watch_engines(made.append)
    rec = Recorder(worker)
    with qtbot.waitSignal(worker.run_finished, timeout=60_000):
        worker.start_run(request(tokens=4, engines=("naive", "paged")))
    # the engines run a batch engine by engine, ahead of what is shown: the same records, shown in step order
    assert len(made) == 8 and {id(t) for t in made} == {id(t) for t in rec.traces}
    assert [t.step for t in rec.traces] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_pause_step_resume_stop(any_worker, qtbot):
    worker = any_worker
    rec = Recorder(worker)
    # Long enough that the pause below lands mid-run: with the native step, 50 tokens of four engines
    # (200 steps) once ran to the end before it arrived (a fresh-clone CI run of 07de973)
    worker.start_run(request(tokens=400, paused=True))
    # Started paused: exactly the first round ran.
    assert [t.step for t in rec.traces] == [0, 0, 0, 0]
    qtbot.wait(100)
    assert len(rec.traces) == 4
    worker.request_step()
    worker.request_step()
    assert [t.step for t in rec.traces[4:]] == [1, 1, 1, 1, 2, 2, 2, 2]
    worker.set_paused(False)
    qtbot.waitUntil(lambda: len(rec.traces) >= 24, timeout=30_000)
    worker.set_paused(True)
    n = len(rec.traces)
    assert n % 4 == 0  # a pause falls between rounds, never inside one
    qtbot.wait(150)
    assert len(rec.traces) == n
    worker.request_stop()
    assert rec.finished == ["r1"] and rec.failed == []
    assert len(rec.traces) < 1600
    worker.request_step()  # after the stop: nothing
    assert len(rec.traces) == n


def test_step_is_ignored_while_running_freely(worker, qtbot):
    rec = Recorder(worker)
    worker.start_run(request(tokens=30, speed=20))
    worker.request_step()
    assert rec.traces == []  # the first round waits for the timer; a Step does not jump the queue
    worker.request_stop()


def test_pacing_sleeps_between_rounds_outside_the_timed_region(worker, qtbot):
    rec = Recorder(worker)
    t0 = time.perf_counter()
    with qtbot.waitSignal(worker.run_finished, timeout=30_000):
        worker.start_run(request(tokens=10, speed=50, engines=("concat",)))
    elapsed = time.perf_counter() - t0
    assert elapsed >= 9 * 0.02 * 0.9  # 10 rounds at 50 per second: at least 9 gaps of 20 ms
    decode = [t.latency_ms for t in rec.traces[1:]]
    assert sum(decode) / len(decode) < 15.0  # the 20 ms waits are not in the engine's latency


def test_speed_change_takes_effect_mid_run(any_worker, qtbot):
    worker = any_worker
    rec = Recorder(worker)
    worker.start_run(request(tokens=200, speed=2, engines=("concat",)))
    qtbot.waitUntil(lambda: len(rec.traces) >= 1, timeout=10_000)
    worker.set_speed(0)
    with qtbot.waitSignal(worker.run_finished, timeout=60_000):
        pass
    assert len(rec.traces) == 200


def test_a_bad_model_fails_with_one_line_and_still_finishes(worker, qtbot):
    rec = Recorder(worker)
    with qtbot.waitSignal(worker.run_finished, timeout=30_000):
        worker.start_run(request(model="no-such-model"))
    assert rec.finished == ["r1"]
    (run_id, message), = rec.failed
    assert run_id == "r1" and "no-such-model" in message and "\n" not in message
    assert rec.traces == [] and rec.started == []


def test_a_prompt_too_long_for_the_context_is_refused(worker, qtbot):
    rec = Recorder(worker)
    with qtbot.waitSignal(worker.run_finished, timeout=30_000):
        worker.start_run(request(prompt="x" * 2040, tokens=20))
    assert "exceeds the model's context" in rec.failed[0][1]


def test_an_engine_failure_mid_run_keeps_the_steps_so_far(worker, qtbot, watch_engines):
    def fail(trace) -> None:
        if trace.step == 3 and trace.engine == "static":
            raise RuntimeError("injected failure\nsecond line")

    unwatch = watch_engines(fail)
    rec = Recorder(worker)
    with qtbot.waitSignal(worker.run_finished, timeout=30_000):
        worker.start_run(request(tokens=10, engines=("concat", "static")))
    assert rec.failed == [("r1", "RuntimeError: injected failure")]
    # Rounds are whole: the failed round's concat step is not forwarded, so the history stays in lockstep.
    assert [(t.engine, t.step) for t in rec.traces] == [(e, k) for k in range(3) for e in ("concat", "static")]
    # The worker is usable again.
    rec2 = Recorder(worker)
    unwatch()
    with qtbot.waitSignal(worker.run_finished, timeout=30_000):
        worker.start_run(request("r2", tokens=3, engines=("concat",)))
    assert rec2.failed == [] and len(rec2.traces) == 3


def test_out_of_memory_messages_say_what_to_try(torch_cpu):
    from kvviz.errors import is_out_of_memory
    from kvviz.runtime.session import error_message

    oom = torch_cpu.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert is_out_of_memory(oom) and is_out_of_memory(MemoryError())
    for exc in (oom, MemoryError()):
        text = error_message(exc)
        assert "out of" in text and "memory" in text and "fewer new tokens" in text and "\n" not in text
    assert error_message(ValueError("plain reason")) == "plain reason"
    assert error_message(KeyError("k")).startswith("KeyError")


def test_naive_attention_weights_are_skipped_when_they_would_not_fit(worker, qtbot):
    from kvviz.runtime.session import NAIVE_WEIGHTS_BUDGET_BYTES, naive_weights_bytes

    assert naive_weights_bytes(10, 3) == (100 + 121 + 144) * 4
    assert naive_weights_bytes(20, 2000) > NAIVE_WEIGHTS_BUDGET_BYTES
    rec = Recorder(worker)
    worker.start_run(request(tokens=2000, engines=("naive", "concat"), paused=True))
    assert len(rec.notes) == 1 and "naive" in rec.notes[0][1]
    naive, concat = rec.traces
    assert naive.attn_weights is None and concat.attn_weights is not None
    worker.request_stop()


def test_a_new_run_replaces_the_running_one(any_worker, qtbot):
    worker = any_worker
    rec = Recorder(worker)
    worker.start_run(request("a", tokens=500, speed=5))
    with qtbot.waitSignal(worker.run_finished, timeout=30_000, check_params_cb=lambda rid: rid == "b"):
        worker.start_run(request("b", tokens=3, engines=("concat",)))
    assert rec.finished == ["a", "b"]
    assert {t.run_id for t in rec.traces if t.engine == "concat" and t.run_id == "b"} == {"b"}


def test_the_engine_process_runs_the_same_engines(qtbot, torch_cpu):
    """The default worker's engines live in a child process: same records, and a kill is a message."""
    from kvviz.runtime.session import EngineError, EngineProcess, EngineSession

    local = EngineSession()
    proc = EngineProcess()
    try:
        env = proc.environment()
        assert "tiny-random" in [m.name for m in env.models]
        req = request(tokens=5, engines=("naive", "paged"))
        started = proc.start(req)
        info, loaded, notes = started.info, started.loaded, started.notes
        assert info.run_id == "r1" and loaded is not None and loaded.config.name == "tiny-random" and notes == ()
        remote = [proc.round() for _ in range(2)] + proc.rounds(3, 60.0)  # one batch of the last three
        local.start(req)
        here = [local.round() for _ in range(5)]
        assert [[(t.engine, t.step, t.token_id) for t in r] for r in remote] == \
               [[(t.engine, t.step, t.token_id) for t in r] for r in here]
        assert remote[-1][1].block_table == here[-1][1].block_table
        proc.end()
        with pytest.raises(EngineError, match="no-such-model"):
            proc.start(request(model="no-such-model"))
        proc.start(req)  # still serving after a refused request
        proc.abort()
        with pytest.raises(EngineError, match="ended unexpectedly"):
            proc.round()
        assert proc.environment().default_model  # a fresh process on the next call
    finally:
        proc.close()
        local.close()


def test_rounds_run_back_to_back_and_a_failure_waits_for_the_next_call(torch_cpu):
    from kvviz.runtime.session import EngineSession

    session = EngineSession()
    try:
        session.start(request(tokens=4, engines=("concat", "static")))
        assert len(session.rounds(3, 0.0)) == 1  # no budget: one round
        batch = session.rounds(10, 60.0)  # three more, then the streams are spent
        assert [[(t.engine, t.step) for t in r] for r in batch] == \
               [[("concat", k), ("static", k)] for k in (1, 2, 3)]
        with pytest.raises(RuntimeError, match="stopped after"):
            session.rounds(1, 60.0)  # the failure the batch ran into, raised now
        session.start(request(tokens=2, engines=("concat",)))
        assert len(session.rounds(2, 60.0)) == 2  # a new run starts with no failure pending
    finally:
        session.close()


def test_the_engine_process_exits_cleanly_when_the_app_goes_away_mid_command(torch_cpu):
    """The app's end of the connection closes while a batch runs: the answer has nowhere to go,
    and the child ends with exit code 0 instead of a traceback about a broken pipe."""
    from kvviz.runtime.session import EngineProcess

    proc = EngineProcess()
    proc.environment()
    proc.start(request(tokens=300, engines=("naive",)))
    child, conn = proc._proc, proc._conn
    conn.send(Rounds(300, 2.0))  # a batch of up to 2 s
    conn.close()
    proc._proc = proc._conn = None
    assert child.wait(60) == 0


# -- a killed or stopped engine process ------------------------------------------------------------------
def _engine_pid(worker) -> int:
    return worker.session._proc.pid


def test_a_killed_idle_engine_process_is_replaced_with_a_note(qtbot, torch_cpu):
    """Before: the next Run failed with "ended unexpectedly (exit code -9: killed...)" and only the one
    after it worked."""
    import os
    import signal

    from kvviz.ui.worker import RunWorker

    w = RunWorker(isolate=True)
    try:
        rec = Recorder(w)
        with qtbot.waitSignal(w.run_finished, timeout=120_000):
            w.start_run(request("r1", tokens=3))
        assert rec.failed == []
        os.kill(_engine_pid(w), signal.SIGKILL)
        time.sleep(0.2)
        with qtbot.waitSignal(w.run_finished, timeout=120_000):
            w.start_run(request("r2", tokens=3))
        assert rec.failed == [], rec.failed
        assert len([t for t in rec.traces if t.run_id == "r2"]) == 3 * 4
        assert any("exit code -9" in n and "new one was started" in n for _rid, n in rec.notes), rec.notes
    finally:
        w.shut_down()


@pytest.mark.parametrize("paused", [False, True])
def test_stop_ends_the_run_within_a_second_while_the_engine_process_is_stopped(qtbot, torch_cpu, paused):
    """SIGSTOP on the child mid-run: Stop ends the run within a second (the child is killed after a
    grace period), and the next run works with a new child. Before: Stop waited for SIGCONT."""
    import os
    import signal

    from kvviz.ui.worker import RunWorker

    w = RunWorker(isolate=True)
    try:
        rec = Recorder(w)
        with qtbot.waitSignal(w.run_started, timeout=120_000):
            w.start_run(request("r1", tokens=400, speed=0.0 if not paused else 50.0, paused=paused))
        pid = _engine_pid(w)
        os.kill(pid, signal.SIGSTOP)
        try:
            t0 = time.perf_counter()
            with qtbot.waitSignal(w.run_finished, timeout=5_000):
                w.request_stop()
            elapsed = time.perf_counter() - t0
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        print(f"Stop with a stopped engine process ended the run in {elapsed * 1000:.0f} ms")
        assert rec.failed == []  # the bound is waitSignal's 5 s; before the fix Stop waited for SIGCONT
        with qtbot.waitSignal(w.run_finished, timeout=120_000):
            w.start_run(request("r2", tokens=2))
        assert rec.failed == [] and len([t for t in rec.traces if t.run_id == "r2"]) == 2 * 4
    finally:
        w.shut_down()


def test_stop_from_the_window_thread_ends_a_run_blocked_on_a_stopped_engine_process(qtbot, torch_cpu):
    """The app's arrangement: the worker on its own QThread, blocked waiting for a batch from a stopped
    child; Stop comes as a signal from the window's thread and still ends the run within a second."""
    import os
    import signal

    from tests.conftest import threaded_worker

    win, thread, w = threaded_worker()
    try:
        rec = Recorder(w)
        with qtbot.waitSignal(w.step_traced, timeout=120_000):
            win.start.emit(request("r1", tokens=1500, prompt="x"))
        pid = _engine_pid(w)
        os.kill(pid, signal.SIGSTOP)
        time.sleep(0.3)  # the worker thread is now waiting on the stopped child
        t0 = time.perf_counter()
        with qtbot.waitSignal(w.run_finished, timeout=5_000):
            win.stop.emit()
        elapsed = time.perf_counter() - t0
        print(f"Stop from the window's thread ended the run in {elapsed * 1000:.0f} ms")
        assert rec.failed == []  # the bound is waitSignal's 5 s; before the fix Stop waited for SIGCONT
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except (ProcessLookupError, UnboundLocalError):
            pass
        thread.quit()
        thread.wait(10_000)
