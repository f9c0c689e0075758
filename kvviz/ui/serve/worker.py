"""The serve worker: the Qt adapter around the library's serving engine (kvviz.serving.engine), one
ServeEngine per ticked scheduler, stepped in lockstep rounds (step k of every scheduler before step
k+1 of any), the records forwarded in batches as signals.

A QObject the Serve window moves onto a QThread: typed slots in, past-tense signals out, one batch per
timer tick so the thread's event loop stays live and Pause, Step and Stop act between rounds. The
library runs in this thread (not in the compare view's engine process: its protocol answers compare
runs only). The model is loaded through the commands' own loader (kvviz.commands.bench.setup) and
served by kvviz.serving.engine, both imported in the worker's thread, never by the window or panels.
"""
from __future__ import annotations

import threading
import time
import traceback

from PySide6.QtCore import QMetaObject, QObject, Qt, QTimer, Signal, Slot

from kvviz.session import default_threads, error_message
from kvviz.ui.serve.spec import ServeSpec

BATCH_S = 0.02  # as fast as possible: rounds back to back for this long, then one signal with them all


class ServeWorker(QObject):
    """Every slot runs in the worker's thread; `request_stop` is safe from any thread."""

    run_started = Signal(str, object)  # run_id, meta (workload, model, settings per scheduler, ...)
    steps_traced = Signal(str, object)  # run_id, [(scheduler, ServeStep, {request: token text}), ...]
    results_ready = Signal(str, object)  # run_id, {scheduler: (RequestResult, ...)} at a run's end
    run_failed = Signal(str, str)  # run_id, one-line message
    run_finished = Signal(str)  # run_id; always, after run_failed if the run failed

    def __init__(self, parent: QObject | None = None, *, device: str = "auto", dtype: str = "auto",
                 threads: int | None = None) -> None:
        super().__init__(parent)
        self.device, self.dtype = device, dtype
        self.threads = threads
        self._stop = threading.Event()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._loaded: tuple | None = None  # (key, model, tokenizer)
        self._engines: dict = {}
        self._streams: dict = {}
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
        if self._run_id:
            self._end()
        self._stop.clear()
        self._run_id = spec.run_id
        self._paused = spec.start_paused
        self._interval_s = 1.0 / spec.steps_per_s if spec.steps_per_s > 0 else 0.0
        try:
            meta = self._start(spec)
        except Exception as exc:
            self._end(exc)
            return
        self.run_started.emit(spec.run_id, meta)
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

    @Slot()
    def request_step(self) -> None:
        """One lockstep round while paused."""
        if self._run_id and self._paused:
            self._round_batch(0.0)

    @Slot()
    def shut_down(self) -> None:
        """Drop the run and the model (connected, direct, to the thread's `finished`)."""
        self._timer.stop()
        self._streams, self._engines, self._run_id = {}, {}, ""
        self._loaded = None

    # -- the run ---------------------------------------------------------------------------------
    def _load(self, name: str):
        """The model and tokenizer, loaded as every command loads them (kvviz.commands.bench.setup: the
        device, dtype and threads options), kept while the name stays the same."""
        import argparse

        from kvviz.commands.bench import setup

        key = (name, self.device, self.dtype, self.threads)
        if self._loaded is None or self._loaded[0] != key:
            self._loaded = None
            args = argparse.Namespace(model=name, device=self.device, dtype=self.dtype, prompt=name,
                                      threads=self.threads or default_threads(), temperature=0.0, top_k=None,
                                      top_p=None, seed=0)
            model, tokenizer, _sampling, _device = setup(args)
            self._loaded = (key, model, tokenizer)
        return self._loaded[1], self._loaded[2]

    def _start(self, spec: ServeSpec) -> dict:
        from kvviz.serving.engine import ServeEngine
        from kvviz.serving.record import SchedulerSettings

        if not spec.schedulers:
            raise ValueError("tick at least one scheduler")
        model, tokenizer = self._load(spec.model)
        workload = spec.workload()
        settings = SchedulerSettings(max_batch=spec.max_batch, blocks=spec.blocks, block_size=spec.block_size,
                                     token_budget=spec.token_budget)
        self._engines = {k: ServeEngine(model, tokenizer, workload, k, settings) for k in spec.schedulers}
        self._streams = {k: e.steps_iter() for k, e in self._engines.items()}
        self._tokenizer = tokenizer
        first = next(iter(self._engines.values()))
        return {"run_id": spec.run_id, "workload": workload, "model": first.info,
                "settings": {k: e.settings for k, e in self._engines.items()},
                "prompt_lens": tuple(len(p) for p in first.prompts), "start_paused": spec.start_paused}

    def _round(self) -> list:
        """Step k of every scheduler that has not finished; [] once all have."""
        out = []
        for k, stream in list(self._streams.items()):
            record = next(stream, None)
            if record is None:
                del self._streams[k]
                continue
            texts = {r: self._tokenizer.token_text(t) for r, t in record.emitted}
            out.append((k, record, texts))
        return out

    def _round_batch(self, budget_s: float) -> None:
        """Rounds back to back for budget_s (at least one), emitted as one batch."""
        run_id, batch = self._run_id, []
        started = time.perf_counter()
        try:
            while True:
                got = self._round()
                batch += got
                if not got or self._stop.is_set() or time.perf_counter() - started >= budget_s:
                    break
        except Exception as exc:
            if batch:
                self.steps_traced.emit(run_id, batch)
            self._end(exc)
            return
        if batch:
            self.steps_traced.emit(run_id, batch)
        if not self._streams:
            self.results_ready.emit(run_id, {k: e.result().results for k, e in self._engines.items()})
            self._end()

    @Slot()
    def _on_timer_timeout(self) -> None:
        if not self._run_id or self._paused or self._stop.is_set():
            return
        started = time.perf_counter()
        self._round_batch(BATCH_S if self._interval_s == 0 else 0.0)
        if self._run_id and not self._paused:
            delay = max(0.0, self._interval_s - (time.perf_counter() - started))
            self._timer.start(round(delay * 1000))

    def _end(self, error: BaseException | None = None) -> None:
        run_id, self._run_id = self._run_id, ""
        self._timer.stop()
        self._streams, self._engines = {}, {}
        if error is not None:
            if not isinstance(error, ValueError):
                traceback.print_exception(error)
            self.run_failed.emit(run_id, error_message(error))
        self.run_finished.emit(run_id)
