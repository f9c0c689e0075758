"""The engine session: loads a model, sets up every engine's step generator and runs them in lockstep
rounds; and the engine process, the same session in a child interpreter, with its wire protocol
(commands in, ("ok", value) or ("error", one line) out). No Qt: kvviz.ui.worker is the Qt adapter
around it, and a notebook or a script can drive either directly.

Its messages go through `_tr`, which the Qt adapter points at Qt's translator (set_translator); here
and in the engine process they stay English.
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
from collections.abc import Iterator
from dataclasses import fields, replace
from pathlib import Path

from kvviz import errors
from kvviz.records.repeats import RepeatedRunInfo
from kvviz.records.trace import RunInfo, StepTrace
from kvviz.runtime.messages import Environment, ModelChoice, RunRequest, cached_choices

# A naive engine's weights are [T, T] at every step, so a long run would hold T^3 floats in all.
NAIVE_WEIGHTS_BUDGET_BYTES = 256 << 20
CLOSE_WAIT_S = 0.3  # an engine process gets this long to exit after it is asked to, then it is killed:
# it holds nothing to save, and a large model's teardown took seconds (Ctrl+Q mid-run on `wide`: 3.6 s)
LAUNCH_WAIT_S = 120.0  # a new engine process must say where it listens within this long
# Running as fast as possible, the engine process runs rounds back to back for this long per batch:
# one message per batch instead of a request and an answer per step, and the next batch is asked
# for before this one is handed on (RunWorker._take). Pause shows the rounds run until the batch in
# flight ends (at most this much more); Stop drops that batch.
BATCH_S = 0.02
# Stop ends a run within this long whatever the engine process does: after it, a child that has not
# answered (stopped with SIGSTOP, stuck in a step) is killed, and the next run starts a new one.
STOP_GRACE_S = 0.5
POLL_S = 0.05  # how often a wait for the engine process looks at the stop flag


_translate = str  # the Qt adapter sets Qt's translator (context "RunWorker") with set_translator


def _tr(text: str) -> str:
    return _translate(text)


def set_translator(translate) -> None:
    """Messages this module makes go through translate(text) from now on (the app: Qt's, "RunWorker")."""
    global _translate
    _translate = translate


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


class EngineStopped(Exception):
    """Stop was asked for and the engine process did not answer within STOP_GRACE_S: it was killed."""


class EngineError(Exception):
    """A failure reported by the engine process, already worded for the window."""


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

    def start(self, req: RunRequest) -> tuple[RunInfo, ModelChoice | None, list[str]]:
        """Load (or reuse) the model and set up every engine's step generator. Returns the run's
        info, the loaded model's description when it was (re)loaded, and notes for the window."""
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
        check_cache_settings(rc.engines, len(prompt_ids), rc.max_new_tokens, rc.window, rc.sinks, rc.residual)
        cache_opts = dict(block_size=rc.block_size, window=rc.window, sinks=rc.sinks, residual=rc.residual)
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
        earlier = {}
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
            decode_kernels=tuple(kernels), **_wall_fields(cfg, dtype, device))
        if req.repeat > 1:
            info = RepeatedRunInfo(**{f.name: getattr(info, f.name) for f in fields(RunInfo)}, repeat=req.repeat,
                                   earlier_ms={lane: tuple(ms for _tokens, ms in runs)
                                               for lane, runs in earlier.items()})
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
        except (EOFError, OSError):
            break  # the app went away
        if command == "close":
            break
        try:
            try:
                value = commands[command](*args)
            except Exception as exc:
                if not isinstance(exc, ValueError):
                    traceback.print_exc()
                if errors.is_out_of_memory(exc):
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

    from kvviz.measure.timing import steady_allocator

    steady_allocator()  # as `kvviz bench` does (see kvviz.measure.timing.steady_allocator)
    authkey = bytes.fromhex(os.environ.pop(_KEY_VARIABLE))
    # On Linux a socket in the abstract namespace: nothing on disk, so a child killed (Stop, a close it did
    # not answer in time) leaves no pymp-* folder in the temporary directory, as a path-named socket did.
    address = f"\0kvviz-engine-{os.getpid()}-{secrets.token_hex(8)}" if sys.platform.startswith("linux") else None
    with Listener(address, authkey=authkey) as listener:
        print(json.dumps(address or listener.address), flush=True)  # (Python gives an abstract one as bytes)
        os.dup2(2, 1)  # later output goes to stderr: nobody reads this pipe after the address
        conn = listener.accept()
    _serve(conn)


_KEY_VARIABLE = "KVVIZ_ENGINE_AUTHKEY"
# The child ignores SIGINT from its first line: Ctrl+C in a terminal reaches the whole process group, and the
# parent alone decides what an interrupt means (end the run, close the child, exit 130). Set before the
# import, so an interrupt while the child starts prints no KeyboardInterrupt either.
_ENTRY = ("import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
          "from kvviz.runtime.session import serve_engines; serve_engines()")


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
        elif self._proc is not None and _is_stopped(self._proc.pid):
            self._kill(_tr("the engine process was stopped (SIGSTOP) while idle and was ended"))
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
        """Ask the child to exit; kill it if it has not within CLOSE_WAIT_S (a frozen or busy one at once)."""
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
            proc.wait()

    def ending_note(self) -> str:
        """Why the last child was ended (Stop killed it, it was found stopped), or ''."""
        return self._gone

    def _launch(self) -> None:
        from multiprocessing.connection import Client

        import kvviz

        authkey = secrets.token_bytes(32)
        root = str(Path(kvviz.__file__).resolve().parent.parent)
        env = dict(os.environ, **{_KEY_VARIABLE: authkey.hex()})
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        self._proc = proc = subprocess.Popen([sys.executable, "-c", _ENTRY], stdout=subprocess.PIPE, env=env)
        # Both the address line and the handshake wait on the child: in a helper thread, so Stop (or a
        # child stopped with SIGSTOP while it starts) cannot hold this one (a kill ends the helper's wait).
        line = self._while_interruptible(proc.stdout.readline, proc)
        proc.stdout.close()
        if not line:
            self._proc = None
            raise EngineError(_tr("the engine process did not start (exit code {0})").format(proc.wait()))
        address = json.loads(line)
        address = tuple(address) if isinstance(address, list) else address
        self._conn = self._while_interruptible(lambda: Client(address, authkey=authkey), proc)

    def _while_interruptible(self, wait, proc: subprocess.Popen):
        """wait()'s result; if `interrupt` is set first (or LAUNCH_WAIT_S passes), the child is killed and
        EngineStopped (EngineError) raised."""
        done: list = []

        def run() -> None:
            try:
                done.append(("ok", wait()))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                done.append(("error", exc))

        helper = threading.Thread(target=run, daemon=True, name="kvviz-engine-launch")
        helper.start()
        deadline = time.monotonic() + LAUNCH_WAIT_S
        while helper.is_alive():
            helper.join(POLL_S)
            if helper.is_alive() and (self.interrupt.is_set() or time.monotonic() > deadline):
                stopped = self.interrupt.is_set()
                self._kill(_tr("the engine process was ended by Stop while it started") if stopped else
                           _tr("the engine process did not start within {0:g} s and was ended").format(LAUNCH_WAIT_S))
                helper.join()
                if stopped:
                    raise EngineStopped()
                raise EngineError(self._gone)
        status, value = done[0]
        if status == "error":
            if isinstance(value, (OSError, EOFError)):
                self._drop()
                raise EngineError(_tr("the engine process did not start ({0})").format(errors.one_line(str(value))))
            raise value
        return value

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


def _is_stopped(pid: int) -> bool:
    """True when the process is stopped (SIGSTOP, a debugger): Linux's /proc/PID/stat says 'T' or 't'."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read(512)
    except OSError:
        return False
    return stat.rpartition(b")")[2][1:2] in (b"T", b"t")


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
