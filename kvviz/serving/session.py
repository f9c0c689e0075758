"""The serving session and its engine process: ServeSession loads a model and steps one ServeEngine per
scheduler in lockstep rounds (kvviz.serving.engine), answering with frozen records (kvviz.serving.record's
ServeStarted and ServeBatch); ServeProcess is the same session in a child process behind kvviz.runtime.process's
proxy (the requests are below), so the engines never share the window's interpreter lock. No Qt (the library side
of the Serve view, beside kvviz.runtime.session for the compare view): the worker (kvviz.ui.serve.worker) is the Qt
adapter around either. With "vLLM beside" (ServeSpec.vllm_beside), vLLM runs the same workload in its own child
(kvviz.peers.vllm, started from a thread here: VllmBeside); its records join the rounds as the "vllm" lane, and the
schedulers wait for them, so that every lane steps in lockstep.
"""
from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass

from kvviz.runtime.loading import load_for_run
from kvviz.runtime.process import EndRun, EngineProxy, Request
from kvviz.runtime.session import default_threads, error_message
from kvviz.serving.record import LaneRecord, PeerProgress, SchedulerSettings, ServeBatch, ServeStarted
from kvviz.serving.spec import ServeSpec

CLOSE_WAIT_S = 2.0  # the engine process gets this long to exit when asked (vLLM beside ended, its folder removed)
PROGRESS_S = 0.25  # while vLLM starts, a call of steps() waits at most this long, then says how long it waited
VLLM = "vllm"  # the lane's key in a round (kvviz.serving.history.VLLM)


class ServeSession:
    """The model (kept while its name, device, dtype and threads stay the same) and one run's engines."""

    def __init__(self) -> None:
        self._loaded: tuple | None = None  # (key, model, tokenizer)
        self._engines: dict = {}
        self._streams: dict = {}
        self._solo: tuple | None = None  # (model, prompts, workload, settings) of the run started last
        self._beside: VllmBeside | None = None  # vLLM's run on its way
        self._vllm_steps: list[LaneRecord] = []  # vLLM's steps not yet handed out, each with its tokens' text

    def _load(self, name: str, device: str, dtype: str, threads: int | None):
        key = (name, device, dtype, threads)
        if self._loaded is None or self._loaded[0] != key:
            self._loaded = None
            model, tokenizer, _ = load_for_run(name, device, dtype, threads or default_threads(), warn=False)
            self._loaded = (key, model, tokenizer)
        return self._loaded[1], self._loaded[2]

    def start(self, spec: ServeSpec, device: str = "auto", dtype: str = "auto",
              threads: int | None = None) -> ServeStarted:
        """Set up every ticked scheduler's engine; what the window builds the run's history from."""
        from kvviz.serving.engine import ServeEngine

        _check_spec(spec)
        self.end()
        if not spec.schedulers:
            raise ValueError("tick at least one scheduler")
        model, tokenizer = self._load(spec.model, device, dtype, threads)
        workload = spec.workload()
        settings = SchedulerSettings(max_batch=spec.max_batch, blocks=spec.blocks, block_size=spec.block_size,
                                     token_budget=spec.token_budget)
        self._engines = {k: ServeEngine(model, tokenizer, workload, k, settings) for k in spec.schedulers}
        self._streams = {k: e.steps_iter() for k, e in self._engines.items()}
        self._tokenizer = tokenizer
        first = next(iter(self._engines.values()))
        self._solo = (model, first.prompts, workload, settings)
        vllm = ""
        if spec.vllm_beside:
            counterpart = counterpart_of(spec.schedulers)
            mapped = self._engines[counterpart].settings if counterpart else settings
            self._beside = VllmBeside(model, spec.model, first.prompts, workload, mapped, counterpart or "paged",
                                      threads or default_threads())
            vllm = counterpart or "-"
        return ServeStarted(run_id=spec.run_id, workload=workload, model=first.info,
                            settings={k: e.settings for k, e in self._engines.items()},
                            prompt_lens=tuple(len(p) for p in first.prompts), start_paused=spec.start_paused,
                            vllm=vllm)

    def round(self) -> list[LaneRecord]:
        """Step k of every scheduler not finished yet, each with its tokens' text; and vLLM's engine steps up to
        the last step of those records (one a round once the schedulers are done)."""
        out = []
        top = -1
        for k, stream in list(self._streams.items()):
            record = next(stream, None)
            if record is None:
                del self._streams[k]
                continue
            top = max(top, record.last_step)
            out.append(LaneRecord(k, record, {r: self._tokenizer.token_text(t) for r, t in record.emitted}))
        lane = self._vllm_steps
        while lane and (lane[0].record.step <= top or (not self._streams and not out)):
            out.append(lane.pop(0))
            if top < 0:
                break
        return out

    def steps(self, budget_s: float = 0.0) -> ServeBatch:
        """Rounds back to back for budget_s (at least one); with them, once every scheduler has finished,
        each one's results. While vLLM beside has not returned its run, only how long it has been waited for
        (the "vllm" lane's PeerProgress, after waiting up to PROGRESS_S for it): the schedulers hold, so that
        every lane steps in lockstep."""
        beside = self._beside
        if beside is not None:
            if not beside.wait(min(max(budget_s, 0.05), PROGRESS_S)):
                return ServeBatch((LaneRecord(VLLM, beside.progress(), {}),))
            self._beside = None
            batch = self._take(beside)
        else:
            batch = []
        started = time.perf_counter()
        while True:
            got = self.round()
            batch += got
            if not got or time.perf_counter() - started >= budget_s:
                break
        if self._streams or self._vllm_steps:
            return ServeBatch(tuple(batch))
        return ServeBatch(tuple(batch), {k: e.result().results for k, e in self._engines.items()})

    def _take(self, beside: VllmBeside) -> list[LaneRecord]:
        """vLLM's run into the lane (its steps to come in the rounds, each with its tokens' text), or its
        failure said once."""
        if beside.run is None:
            return [LaneRecord(VLLM, PeerProgress("failed", beside.waited_s(), beside.error), {})]
        run = beside.run
        counts = {r.request: 0 for r in run.requests}
        for step in run.steps:
            texts = {}
            for r in step.emitted:
                ids = run.requests[r].token_ids
                if counts[r] < len(ids):
                    texts[r] = self._tokenizer.token_text(ids[counts[r]])
                counts[r] += 1
            self._vllm_steps.append(LaneRecord(VLLM, step, texts))
        return [LaneRecord(VLLM, run, {})]

    def solo(self, index: int) -> tuple[int, ...]:
        """Request `index` of the run alone through the static engine (kvviz.serving.solo): its tokens, for the
        check of every scheduler's tokens against them. The model's run keeps what it needs after the run."""
        from kvviz.serving.solo import solo_request

        if self._solo is None:
            raise ValueError("no run to check")
        return solo_request(*self._solo, index)

    def vllm_pid(self) -> int | None:
        """vLLM's child process while the run's vLLM lane has one running (None otherwise)."""
        return None if self._beside is None else self._beside.child_pid

    def end(self) -> None:
        self._streams, self._engines = {}, {}
        self._solo = None
        self._vllm_steps = []
        beside, self._beside = self._beside, None
        if beside is not None:
            beside.cancel()

    def release_model(self) -> None:
        """End the run and drop the model (after an out-of-memory error)."""
        self.end()
        self._loaded = None

    def close(self) -> None:
        self.release_model()

    def abort(self) -> None:
        """Nothing to kill in this thread."""


def _check_spec(spec) -> None:
    if not isinstance(spec, ServeSpec):
        raise ValueError(f"a serve run starts from a ServeSpec, not a {type(spec).__name__}")


def counterpart_of(schedulers) -> str:
    """The ticked scheduler vLLM's settings follow (kvviz.serving.history.counterpart_of): prefix when ticked
    (prefix caching on), else chunked, paged or continuous (off); "" when none is ticked."""
    from kvviz.serving.history import counterpart_of as of

    return of(schedulers, "prefix" in schedulers)


class VllmBeside:
    """vLLM's run of one workload, made in a thread of this process: the model written as a checkpoint (once
    per model, kvviz.peers.hf_export.cached_checkpoint), the settings mapped from `scheduler`'s
    (kvviz.peers.vllm.map_settings), the requests run by vLLM in its child. `run` or `error` once done."""

    def __init__(self, model, name: str, prompts, workload, settings, scheduler: str, threads: int) -> None:
        self.run = None
        self.error = ""
        self._started = time.monotonic()
        self._done = threading.Event()
        self._cancelled = False
        self._child = None  # vLLM's child process once it exists (kvviz.peers.vllm.run_vllm's `started`)
        args = (model, name, [list(p) for p in prompts], workload, settings, scheduler, threads)
        self._thread = threading.Thread(target=self._work, args=args, name="kvviz-vllm-beside", daemon=True)
        self._thread.start()

    def _work(self, model, name, prompts, workload, settings, scheduler, threads) -> None:
        from kvviz.peers.hf_export import cached_checkpoint
        from kvviz.peers.vllm import Requests, map_settings, run_vllm

        try:
            mapped = map_settings(scheduler, settings, prompts, [r.new_tokens for r in workload.requests],
                                  max_seq_len=model.cfg.max_seq_len, threads=threads)
            checkpoint = cached_checkpoint(name, model)
            work = Requests(prompts=tuple(tuple(p) for p in prompts),
                            new_tokens=tuple(r.new_tokens for r in workload.requests),
                            arrivals=tuple(r.arrival for r in workload.requests))
            if not self._cancelled:
                self.run, = run_vllm(checkpoint, [work], mapped, head_dim=model.cfg.head_dim, warmup=False,
                                     started=self._child_started)
        except Exception as exc:  # noqa: BLE001 - said in the lane in one line; the schedulers go on
            if not isinstance(exc, ValueError):
                traceback.print_exc()
            self.error = error_message(exc)
        finally:
            self._done.set()

    def waited_s(self) -> float:
        return time.monotonic() - self._started

    def wait(self, timeout_s: float) -> bool:
        """Whether the run (or its failure) is in, after waiting up to timeout_s for it."""
        return self._done.wait(timeout_s)

    def progress(self) -> PeerProgress:
        return PeerProgress("starting", self.waited_s())

    def _child_started(self, proc) -> None:
        self._child = proc
        if self._cancelled:  # Stop came while the child was being made
            self._kill_child()

    @property
    def child_pid(self) -> int | None:
        """vLLM's child while it runs (None before it starts)."""
        return None if self._child is None else self._child.pid

    def _kill_child(self) -> None:
        try:
            os.killpg(self._child.pid, signal.SIGKILL)  # it leads its own process group (kvviz.peers.vllm)
        except (ProcessLookupError, PermissionError):
            pass

    def cancel(self) -> None:
        """End vLLM's child now (the thread then ends with a one-line error nobody reads)."""
        self._cancelled = True
        if not self._done.is_set() and self._child is not None:
            self._kill_child()
        self._thread.join(timeout=30)



# -- the requests a ServeSession answers in the engine process (kvviz.runtime.process.Request) -------------
@dataclass(frozen=True)
class StartServe(Request):
    spec: ServeSpec
    device: str = "auto"
    dtype: str = "auto"
    threads: int | None = None

    def apply(self, session) -> ServeStarted:
        return session.start(self.spec, self.device, self.dtype, self.threads)


@dataclass(frozen=True)
class ServeSteps(Request):
    budget_s: float = 0.0

    def apply(self, session) -> ServeBatch:
        return session.steps(self.budget_s)


@dataclass(frozen=True)
class SoloRun(Request):
    """Request `index` alone through the static engine: its token ids."""

    index: int

    def apply(self, session) -> tuple[int, ...]:
        return session.solo(self.index)


class ServeProcess(EngineProxy):
    """A ServeSession in a child process (kvviz.runtime.process.EngineProxy), with the same methods; calls block
    the caller (the worker's thread) until the child answers, without holding the interpreter lock."""

    session = "kvviz.serving.session:ServeSession"
    close_wait_s = CLOSE_WAIT_S

    def start(self, spec: ServeSpec, device: str = "auto", dtype: str = "auto",
              threads: int | None = None) -> ServeStarted:
        """Start a run; a child that died or was stopped (SIGSTOP) while idle is replaced first."""
        _check_spec(spec)
        self.renew()
        return self.call(StartServe(spec, device, dtype, threads))

    def steps(self, budget_s: float = 0.0) -> ServeBatch:
        return self.call(ServeSteps(budget_s))

    def solo(self, index: int) -> tuple[int, ...]:
        return self.call(SoloRun(index))

    def end(self) -> None:
        """End the run and wait for the child: ending vLLM beside (its process group, its folder) takes seconds."""
        if self._proc is not None and self._proc.poll() is None:
            self.call(EndRun())
