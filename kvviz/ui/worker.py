"""The run worker: lists what the machine offers, loads the model and drives the engines in lockstep.

A QObject the window moves onto a QThread; torch, the models and the engines are imported here, in
that thread, only when first needed. It forwards each engine's StepTrace as it is; it knows nothing
about panels or painting. One lockstep round (step k of every engine) runs per timer tick, so the
thread's event loop stays live between rounds and the control slots act at once.
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, replace

from PySide6.QtCore import QCoreApplication, QObject, Qt, QTimer, Signal, Slot

from kvviz import errors
from kvviz.trace import StepTrace
from kvviz.ui.history import RunInfo
from kvviz.ui.messages import Environment, ModelChoice, RunRequest

# A naive engine's weights are [T, T] at every step, so a long run would hold T^3 floats in all.
NAIVE_WEIGHTS_BUDGET_BYTES = 256 << 20


def _tr(text: str) -> str:
    return QCoreApplication.translate("RunWorker", text)


def default_threads() -> int:
    """Torch CPU threads for a run: every core but one, which the GUI thread keeps for painting."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def naive_weights_bytes(n_prompt: int, max_new_tokens: int) -> int:
    """Bytes of float32 attention weights a naive run would copy out: step k attends (P+k) x (P+k)."""
    return sum((n_prompt + k) ** 2 for k in range(max_new_tokens)) * 4


def is_out_of_memory(exc: BaseException) -> bool:
    """A device allocator ran out (see kvviz.errors), or the host did (MemoryError)."""
    return isinstance(exc, MemoryError) or errors.is_out_of_memory(exc)


def error_message(exc: BaseException) -> str:
    """One line for the window: what went wrong, and for out-of-memory what to try instead."""
    if isinstance(exc, MemoryError):
        text = _tr("out of memory; {0}").format(errors.OOM_HINT)
    else:
        text = " ".join(errors.friendly_error(exc).strip().splitlines()[:1]) or type(exc).__name__
    return text if len(text) <= 400 else text[:397] + "..."


@dataclass
class _ActiveRun:
    request: RunRequest
    info: RunInfo
    streams: dict[str, Iterator[StepTrace]]
    rounds: int = 0  # lockstep rounds completed

    def close(self) -> None:
        for stream in self.streams.values():
            close = getattr(stream, "close", None)
            if close is not None:
                close()


class RunWorker(QObject):
    """Typed slots in, past-tense signals out. Every slot runs in the worker's own thread."""

    environment_listed = Signal(object)  # Environment
    model_loaded = Signal(object)  # ModelChoice with the loaded model's config
    run_started = Signal(object)  # RunInfo
    run_noted = Signal(str, str)  # run_id, a one-line note about the run (e.g. a capture turned off)
    step_traced = Signal(object)  # StepTrace, as the engine made it
    run_failed = Signal(str, str)  # run_id ("" outside a run), one-line message
    run_finished = Signal(str)  # run_id; always emitted, after run_failed if the run failed

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._timer = QTimer(self)  # a child, so it moves to the worker's thread with it
        self._timer.setSingleShot(True)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._run: _ActiveRun | None = None
        self._paused = False
        self._interval_s = 0.0
        self._loaded: tuple[tuple[str, str, str], object, object] | None = None  # (key, model, tokenizer)

    # -- control slots ---------------------------------------------------------------------------
    @Slot()
    def list_environment(self) -> None:
        try:
            env = self._environment()
        except Exception as exc:  # a broken torch install: say so in the window
            traceback.print_exc()
            self.run_failed.emit("", error_message(exc))
            return
        self.environment_listed.emit(env)

    @Slot(object)
    def start_run(self, request: RunRequest) -> None:
        if self._run is not None:
            self._end(self._run.request.run_id)
        self._paused = request.start_paused
        self.set_speed(request.steps_per_s)
        try:
            self._run = self._prepare(request)
        except Exception as exc:
            self._end(request.run_id, exc)
            return
        self.run_started.emit(self._run.info)
        if request.start_paused:
            self._round()
        else:
            self._timer.start(0)

    @Slot()
    def request_stop(self) -> None:
        if self._run is not None:
            self._end(self._run.request.run_id)

    @Slot(bool)
    def set_paused(self, paused: bool) -> None:
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

    @Slot()
    def shut_down(self) -> None:
        """Drop the run and the model without signalling. Connected (direct) to the thread's
        `finished`, so it runs in the worker's thread as the thread ends."""
        self._timer.stop()
        run, self._run = self._run, None
        if run is not None:
            run.close()
        self._loaded = None

    # -- the run ---------------------------------------------------------------------------------
    @Slot()
    def _on_timer_timeout(self) -> None:
        if self._run is None or self._paused:
            return
        started = time.perf_counter()
        self._round()
        if self._run is not None and not self._paused:
            # Pacing happens here, between rounds: outside every engine's timed region.
            delay_s = max(0.0, self._interval_s - (time.perf_counter() - started))
            self._timer.start(round(delay_s * 1000))

    def _round(self) -> None:
        """Step k of every engine before step k+1 of any."""
        run = self._run
        if run is None:
            return
        try:
            for key, stream in run.streams.items():
                try:
                    trace = next(stream)
                except StopIteration:
                    raise RuntimeError(f"{key} stopped after {run.rounds} of "
                                       f"{run.request.run.max_new_tokens} steps") from None
                self.step_traced.emit(trace)
        except Exception as exc:
            self._end(run.request.run_id, exc)
            return
        run.rounds += 1
        if run.rounds >= run.request.run.max_new_tokens:
            self._end(run.request.run_id)

    def _end(self, run_id: str, error: BaseException | None = None) -> None:
        run, self._run = self._run, None
        self._timer.stop()
        self._paused = False
        try:
            if run is not None:
                run.close()
            if error is not None:
                if not isinstance(error, ValueError):
                    traceback.print_exception(error)
                if is_out_of_memory(error):
                    self._release_model()
                self.run_failed.emit(run_id, error_message(error))
        finally:
            self.run_finished.emit(run_id)

    def _prepare(self, req: RunRequest) -> _ActiveRun:
        import torch

        from kvviz.devices import resolve_device
        from kvviz.engines import make_engine, validate_request

        rc = req.run
        if not rc.engines:
            raise ValueError(_tr("choose at least one engine"))
        threads = req.threads if req.threads is not None else default_threads()
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        device = resolve_device(req.device)
        model, tokenizer = self._load(req.model, device, req.dtype)
        cfg = model.cfg
        prompt_ids = tokenizer.encode(rc.prompt)
        validate_request(cfg.max_seq_len, len(prompt_ids), rc.max_new_tokens)
        trace = rc.trace
        if trace.weights_layer is not None:
            if not 0 <= trace.weights_layer < cfg.n_layer:
                raise ValueError(_tr("attention layer {0} is outside 0..{1}").format(
                    trace.weights_layer, cfg.n_layer - 1))
            if not 0 <= trace.weights_head < cfg.n_head:
                raise ValueError(_tr("attention head {0} is outside 0..{1}").format(
                    trace.weights_head, cfg.n_head - 1))
        streams: dict[str, Iterator[StepTrace]] = {}
        for key in rc.engines:
            options = trace
            if key == "naive" and trace.weights_layer is not None and \
                    naive_weights_bytes(len(prompt_ids), rc.max_new_tokens) > NAIVE_WEIGHTS_BUDGET_BYTES:
                options = replace(trace, weights_layer=None)
                self.run_noted.emit(req.run_id, _tr(
                    "naive: attention weights not captured, a run this long would hold more than {0} MiB "
                    "of them").format(NAIVE_WEIGHTS_BUDGET_BYTES >> 20))
            engine = make_engine(key, model, block_size=rc.block_size)
            streams[key] = engine.generate(prompt_ids, rc.max_new_tokens, rc.sampling, options,
                                           run_id=req.run_id, token_text=tokenizer.token_text)
        dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        info = RunInfo(
            run_id=req.run_id, model_name=req.model, device=str(device), dtype=dtype, prompt=rc.prompt,
            prompt_ids=tuple(prompt_ids), prompt_labels=tuple(tokenizer.token_text(i) for i in prompt_ids),
            engines=tuple(rc.engines), max_new_tokens=rc.max_new_tokens, n_layer=cfg.n_layer,
            n_head=cfg.n_head, n_kv_head=cfg.n_kv_head, head_dim=cfg.head_dim,
            param_count=cfg.param_count(), kv_bytes_per_token=cfg.kv_bytes_per_token(dtype),
            block_size=rc.block_size)
        return _ActiveRun(request=req, info=info, streams=streams)

    def _load(self, name: str, device, dtype_name: str):
        """The model and tokenizer, reused while name, device and dtype stay the same."""
        from kvviz.devices import resolve_dtype
        from kvviz.models.presets import load_model, load_tokenizer

        key = (name, str(device), dtype_name)
        if self._loaded is not None and self._loaded[0] == key:
            return self._loaded[1], self._loaded[2]
        self._release_model()  # free the previous model before the next one is loaded
        tokenizer = load_tokenizer(name)
        model = load_model(name, device, None)
        dtype = resolve_dtype(None if dtype_name == "auto" else dtype_name, device, model.cfg.dtype)
        model = model.to(dtype)
        self._loaded = (key, model, tokenizer)
        self.model_loaded.emit(ModelChoice(name=name, config=model.cfg))
        return model, tokenizer

    def _release_model(self) -> None:
        self._loaded = None
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()

    def _environment(self) -> Environment:
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
                           torch_version=torch.__version__, threads=torch.get_num_threads())


__all__ = ["RunWorker", "error_message", "is_out_of_memory", "naive_weights_bytes"]
