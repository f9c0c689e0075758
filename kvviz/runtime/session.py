"""The engine session: loads a model, sets up every engine's step generator and runs them in lockstep
rounds; and EngineProcess, the same session in a child interpreter behind kvviz.runtime.process's proxy (the
requests it answers are in kvviz.runtime.messages). No Qt: kvviz.ui.worker is the Qt adapter around it, and a
notebook or a script can drive either directly. Messages go through kvviz.runtime.process's translator.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from dataclasses import replace

from kvviz.records.trace import RunInfo, StepTrace
from kvviz.runtime.messages import (
    Environment,
    ListEnvironment,
    ModelChoice,
    NextRound,
    Rounds,
    RunRequest,
    RunStarted,
    StartRun,
    cached_choices,
)
from kvviz.runtime.process import EndRun, EngineProxy, _tr
from kvviz.runtime.process import EngineError as EngineError
from kvviz.runtime.process import EngineStopped as EngineStopped
from kvviz.runtime.process import error_message as error_message
from kvviz.runtime.process import set_translator as set_translator

# A naive engine's weights are [T, T] at every step, so a long run would hold T^3 floats in all.
NAIVE_WEIGHTS_BUDGET_BYTES = 256 << 20
CLOSE_WAIT_S = 0.3  # an engine process gets this long to exit after it is asked to, then it is killed:
# it holds nothing to save, and a large model's teardown took seconds (Ctrl+Q mid-run on `wide`: 3.6 s)


def default_threads() -> int:
    """Torch CPU threads for a run: every core but one, which the GUI keeps for painting."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def _cached_models() -> tuple[ModelChoice, ...]:
    """The hub checkpoints in the Hugging Face and ModelScope caches (offline); none if the caches cannot be read."""
    from kvviz.models.hub import list_cached_models

    try:
        return cached_choices(list_cached_models())
    except Exception:  # a cache kvviz cannot list must not keep the window from starting
        return ()


def naive_weights_bytes(n_prompt: int, max_new_tokens: int) -> int:
    """Bytes of float32 attention weights a naive run would copy out: step k attends (P+k) x (P+k)."""
    return sum((n_prompt + k) ** 2 for k in range(max_new_tokens)) * 4


# -- the engines, without Qt ----------------------------------------------------------------------
class EngineSession:
    """Loads a model (kept while name, device and dtype stay the same) and runs one compare run's
    engines in lockstep. No Qt: it runs in the engine process, or in the worker's thread."""

    def __init__(self) -> None:
        self._loaded: tuple[tuple[str, str, str], object, object] | None = None  # (key, model, tokenizer)
        self._streams: dict[str, Iterator[StepTrace]] = {}
        self._steps = 0
        self._shadows = None  # kvviz.measure.quality.Shadows: the approximate engines' quality, in lockstep
        self._error: BaseException | None = None  # raised by the next round (see rounds)
        self._asked: tuple[int, float] | None = None  # the batch send_rounds asked for
        self._pace: tuple[dict, float] | None = None  # (a run's streams, seconds its last round took): batch sizes

    def environment(self) -> Environment:
        import torch

        from kvviz.engines import ENGINE_HELP, ENGINE_KEYS
        from kvviz.models.presets import PRESETS, TINY_DIR, preset_config
        from kvviz.runtime.devices import resolve_device

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
                           torch_version=torch.__version__, threads=default_threads(),
                           cached_models=_cached_models())

    def start(self, req: RunRequest) -> RunStarted:
        """Load (or reuse) the model and set up every engine's step generator: the run's info, the loaded
        model's description when it was (re)loaded, and notes for the window."""
        if not isinstance(req, RunRequest):
            raise ValueError(f"a run starts from a RunRequest, not a {type(req).__name__}")
        import torch

        from kvviz.catalog import is_exact
        from kvviz.engines import make_engine
        from kvviz.kernels import lane_engine, lane_kernel
        from kvviz.measure.quality import Shadows, reference_key
        from kvviz.options import check_against_model, check_cache_settings, check_value
        from kvviz.runtime.devices import resolve_device

        self.end()
        rc = req.run
        if not rc.engines:
            raise ValueError(_tr("choose at least one engine"))
        check_value("repeat", req.repeat, "repeat")
        threads = req.threads if req.threads is not None else default_threads()
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        device = resolve_device(req.device)
        model, tokenizer, loaded = self._load(req.model, device, req.dtype)
        cfg = model.cfg
        prompt_ids = tokenizer.encode(rc.prompt)
        check_against_model(cfg, len(prompt_ids), rc.max_new_tokens, block_size=rc.block_size,
                            top_k=rc.sampling.top_k)
        check_cache_settings(rc.engines, len(prompt_ids), rc.max_new_tokens, rc.window, rc.sinks, rc.residual,
                             rc.spec_k, rc.rollback)
        cache_opts = dict(block_size=rc.block_size, window=rc.window, sinks=rc.sinks, residual=rc.residual,
                          spec_k=rc.spec_k, rollback=rc.rollback)
        reference = reference_key(rc.engines)
        trace = rc.trace
        if trace.weights_layer is not None:
            if not 0 <= trace.weights_layer < cfg.n_layer:
                raise ValueError(_tr("attention layer {0} is outside 0..{1}").format(
                    trace.weights_layer, cfg.n_layer - 1))
            if not 0 <= trace.weights_head < cfg.n_head:
                raise ValueError(_tr("attention head {0} is outside 0..{1}").format(
                    trace.weights_head, cfg.n_head - 1))
        notes = []
        kernels = []
        made = []  # (lane, engine, kernel, trace options): what a repeat runs again
        # A kernel comparison names lanes ("static@native", kvviz.kernels.lane): each is its engine under its own
        # kernel, its records named by the lane; an engine's name alone decodes with the run's kernel.
        for lane in rc.engines:
            key, kernel = lane_engine(lane), lane_kernel(lane) or rc.kernel
            options = trace
            if key == "naive" and trace.weights_layer is not None and \
                    naive_weights_bytes(len(prompt_ids), rc.max_new_tokens) > NAIVE_WEIGHTS_BUDGET_BYTES:
                options = replace(trace, weights_layer=None)
                notes.append(_tr("naive: attention weights not captured, a run this long would hold more "
                                 "than {0} MiB of them").format(NAIVE_WEIGHTS_BUDGET_BYTES >> 20))
            if lane == reference:
                options = replace(options, logits=True)  # the quality figures compare with its logits
            engine = make_engine(key, model, kernel=kernel, **cache_opts)
            kernels.append(engine.kernel)  # what decoded the lane (make_engine refuses an engine it cannot run)
            stream = engine.generate(prompt_ids, rc.max_new_tokens, rc.sampling, options,
                                     run_id=req.run_id, token_text=tokenizer.token_text)
            self._streams[lane] = stream if lane == key else _named(stream, lane)
            made.append((lane, key, kernel, options))
        self._steps = rc.max_new_tokens
        earlier: dict[str, list] = {}
        if req.repeat > 1:
            earlier = _earlier_runs(model, made, prompt_ids, rc, cache_opts, req.repeat - 1)
            if any(len({tokens for tokens, _ms in runs}) > 1 for runs in earlier.values()):
                notes.append(_tr("the repeats gave different tokens: their times are not of the same work"))
        if reference is not None:
            shadows = {lane: make_engine(lane_engine(lane), model, kernel=lane_kernel(lane) or rc.kernel,
                                         **cache_opts) for lane in rc.engines if not is_exact(lane)}
            self._shadows = Shadows(shadows, prompt_ids, rc.max_new_tokens, reference, keep_logits=trace.logits)
        dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        info = RunInfo(
            run_id=req.run_id, model_name=req.model, device=str(device), dtype=dtype, prompt=rc.prompt,
            prompt_ids=tuple(prompt_ids), prompt_labels=tuple(tokenizer.token_text(i) for i in prompt_ids),
            engines=tuple(rc.engines), max_new_tokens=rc.max_new_tokens, n_layer=cfg.n_layer,
            n_head=cfg.n_head, n_kv_head=cfg.n_kv_head, head_dim=cfg.head_dim,
            param_count=cfg.param_count(), kv_bytes_per_token=cfg.kv_bytes_per_token(dtype),
            block_size=rc.block_size, window=rc.window, sinks=rc.sinks, residual=rc.residual or 0,
            spec_k=rc.spec_k, rollback=rc.rollback,
            decode_kernels=tuple(kernels), repeat=req.repeat,
            earlier_ms={lane: tuple(ms for _tokens, ms in runs) for lane, runs in earlier.items()},
            **_wall_fields(cfg, dtype, device))
        return RunStarted(info, loaded, tuple(notes))

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
        return traces if self._shadows is None else self._shadows.annotate(traces)

    def rounds(self, most: int, budget_s: float = 0.0) -> list[list[StepTrace]]:
        """Rounds of step k of every engine, at least one and at most `most`, as many as fit in `budget_s` at the
        pace of the last one (the first round of a run is run alone to time it).

        One call per batch, and in it each engine runs its steps back to back, one engine after the other, as
        `kvviz bench` runs them: a step that follows its own engine's last step finds its weights and cache
        still in the CPU's caches. Step by step in turns, naive's whole-sequence step had evicted concat's
        (tiny, 300 tokens, 1 thread, PyTorch: concat 0.55-0.60 ms a step in turns, 0.34 ms back to back). The
        rounds come back in step order, so the window still shows step k of every engine before step k+1
        of any. A failure after some rounds returns those; the next call raises it, so no computed step is
        lost."""
        done: list[list[StepTrace]] = []
        started = time.perf_counter()
        if self._pace is None or self._pace[0] is not self._streams:
            done.append(self.round())
            self._pace = (self._streams, time.perf_counter() - started)
        elif self._error is not None:
            error, self._error = self._error, None
            raise error
        left_s = budget_s - (time.perf_counter() - started)
        n = min(most - len(done), int(left_s / max(self._pace[1], 1e-6)) if left_s > 0 else 0)
        n = max(n, 0 if done else 1)
        if n == 0:
            return done
        started = time.perf_counter()
        columns: dict[str, list[StepTrace]] = {}
        error = None
        for key, stream in self._streams.items():
            steps = columns[key] = []
            try:
                while len(steps) < n:
                    steps.append(next(stream))
            except StopIteration:
                error = RuntimeError(f"{key} stopped after {len(steps)} of the {n} steps asked of it")
            except Exception as exc:
                error = exc
            n = len(steps)  # the engines after one that failed run no further than it did
        batch = [[steps[i] for steps in columns.values()] for i in range(n)]
        if batch:
            self._pace = (self._streams, (time.perf_counter() - started) / len(batch))
        if self._shadows is not None:
            batch = [self._shadows.annotate(traces) for traces in batch]
        done += batch
        if error is not None and not done:
            raise error
        self._error = error
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
        shadows, self._shadows = self._shadows, None
        if shadows is not None:
            shadows.close()
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
        from kvviz.models.presets import load_model, load_tokenizer
        from kvviz.runtime.devices import resolve_dtype

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


class EngineProcess(EngineProxy):
    """An EngineSession in a child process (kvviz.runtime.process.EngineProxy), with the same methods. `abort()`
    may be called from any thread: it kills the child, and a call in progress raises EngineError."""

    session = "kvviz.runtime.session:EngineSession"
    close_wait_s = CLOSE_WAIT_S

    def environment(self) -> Environment:
        return self.call(ListEnvironment())

    def start(self, req: RunRequest) -> RunStarted:
        """Start a run; a child that died while idle (killed, crashed) or was ended by Stop is replaced
        first, transparently, and the run's notes say so."""
        if not isinstance(req, RunRequest):
            raise ValueError(f"a run starts from a RunRequest, not a {type(req).__name__}")
        self.renew()
        started = self.call(StartRun(req))
        note = self.take_note()
        return replace(started, notes=(note, *started.notes)) if note else started

    def round(self) -> list[StepTrace]:
        return self.call(NextRound())

    def rounds(self, most: int, budget_s: float = 0.0) -> list[list[StepTrace]]:
        return self.call(Rounds(most, budget_s))

    def send_rounds(self, most: int, budget_s: float = 0.0) -> None:
        """Ask for a batch without waiting: the child runs it while the caller handles the last."""
        self.send(Rounds(most, budget_s))

    def receive_rounds(self) -> list[list[StepTrace]]:
        return self.receive()

    def discard_rounds(self) -> None:
        """Wait (at most STOP_GRACE_S) for the batch asked for and drop it: the connection is then free
        again, or the child that did not answer is killed."""
        self.drop_answer()

    def end(self) -> None:
        """End the run; a child that does not answer within STOP_GRACE_S is killed."""
        if self._proc is not None:
            self.send(EndRun())
            self.drop_answer()

    def release_model(self) -> None:
        """The child freed it already when it reported out-of-memory."""


def _earlier_runs(model, made, prompt_ids, rc, cache_opts, runs: int) -> dict[str, list]:
    """`runs` whole runs of every lane before the one shown, as `kvviz bench --repeat` times them: a short
    warm-up of each lane first, then run after run, each lane's steps back to back, lanes in turn (so drift on a
    noisy machine reaches each alike), each run under the shown run's trace options. Per lane, each run's
    (tokens, step times)."""
    from kvviz.engines import make_engine

    def one(key, kernel, options, n):
        engine = make_engine(key, model, kernel=kernel, **cache_opts)
        steps = [(t.token_id, t.latency_ms) for t in engine.generate(prompt_ids, n, rc.sampling, options)]
        return tuple(t for t, _ms in steps), tuple(ms for _t, ms in steps)

    for _lane, key, kernel, options in made:  # first-call allocations and kernel choices stay out of the times
        one(key, kernel, options, min(4, rc.max_new_tokens))
    earlier: dict[str, list] = {lane: [] for lane, *_ in made}
    for _ in range(runs):
        for lane, key, kernel, options in made:
            earlier[lane].append(one(key, kernel, options, rc.max_new_tokens))
    return earlier


def _named(stream: Iterator[StepTrace], lane: str) -> Iterator[StepTrace]:
    """A lane's records: its engine's, named by the lane (after each step's clock has stopped)."""
    make = StepTrace.of
    try:
        for trace in stream:
            yield make({**trace.__dict__, "engine": lane})
    finally:
        stream.close()


def _wall_fields(cfg, dtype: str, device) -> dict:
    """RunInfo's memory-wall figures: the weights a forward reads (kvviz.costs.wall), and the read ceiling of the
    device the run uses at the run's threads, with the copy bandwidth beside it (kvviz.measure.bandwidth: CUDA
    measured now, a CPU's cached per machine and thread count)."""
    from kvviz.costs.wall import WallShape
    from kvviz.measure.bandwidth import last_level_cache_bytes, read_ceiling

    shape = WallShape.from_config(cfg, dtype)
    try:
        c = read_ceiling(device)
        read, threads, copy, peak = c.read_gbps, c.threads, c.copy_gbps or 0.0, c.peak_gbps or 0.0
    except (RuntimeError, MemoryError, ValueError, OSError):  # a device too full for a 1 GiB matrix
        read, threads, copy, peak = 0.0, 0, 0.0, 0.0
    cache = (last_level_cache_bytes() or 0) if getattr(device, "type", str(device)) == "cpu" else 0
    return dict(weights_read_bytes=shape.weights_bytes, embed_row_bytes=shape.row_bytes, copy_gbps=copy,
                peak_gbps=peak, read_gbps=read, read_threads=threads, cache_bytes=cache)
