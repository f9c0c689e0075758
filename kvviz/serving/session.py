"""The serving session and its engine process: ServeSession loads a model and steps one ServeEngine per
scheduler in lockstep rounds (kvviz.serving.engine); ServeProcess is the same session in a child process,
so the engines never share the window's interpreter lock. No Qt (the library side of the Serve view, beside
kvviz.runtime.session for the compare view): the worker (kvviz.ui.serve.worker) is
the Qt adapter around either.

The child is a fresh interpreter (`python -c`, as kvviz.runtime.session's engine process; a multiprocessing spawn
re-imports the caller's main script, and a script without a __main__ guard then starts itself again). It
speaks over its stdin and stdout pipes, private to the two processes: (command, args) in, ("ok", value) or
("error", one line) out; commands "start", "steps", "solo", "end", "close".
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path

from kvviz.runtime.session import default_threads, error_message
from kvviz.serving.spec import ServeSpec

CLOSE_WAIT_S = 2.0
# SIGINT ignored from the first line, as kvviz.runtime.session's engine process: a terminal's Ctrl+C reaches the whole
# process group, and the parent alone decides what it means
_ENTRY = ("import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
          "from kvviz.serving.session import serve_stdio; serve_stdio()")


class ServeSession:
    """The model (kept while its name, device, dtype and threads stay the same) and one run's engines."""

    def __init__(self) -> None:
        self._loaded: tuple | None = None  # (key, model, tokenizer)
        self._engines: dict = {}
        self._streams: dict = {}
        self._solo: tuple | None = None  # (model, prompts, workload, settings) of the run started last

    def _load(self, name: str, device: str, dtype: str, threads: int | None):
        """Loaded as every command loads a model (kvviz.commands.bench.setup: device, dtype, threads)."""
        from kvviz.commands.bench import setup

        key = (name, device, dtype, threads)
        if self._loaded is None or self._loaded[0] != key:
            self._loaded = None
            args = argparse.Namespace(model=name, device=device, dtype=dtype, prompt=name,
                                      threads=threads or default_threads(), temperature=0.0, top_k=None,
                                      top_p=None, seed=0)
            model, tokenizer, _sampling, _device = setup(args)
            self._loaded = (key, model, tokenizer)
        return self._loaded[1], self._loaded[2]

    def start(self, spec: ServeSpec, device: str = "auto", dtype: str = "auto", threads: int | None = None) -> dict:
        """Set up every ticked scheduler's engine; the run's meta for the window."""
        from kvviz.serving.engine import ServeEngine
        from kvviz.serving.record import SchedulerSettings

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
        return {"run_id": spec.run_id, "workload": workload, "model": first.info,
                "settings": {k: e.settings for k, e in self._engines.items()},
                "prompt_lens": tuple(len(p) for p in first.prompts), "start_paused": spec.start_paused}

    def round(self) -> list:
        """Step k of every scheduler not finished yet: [(scheduler, ServeStep, {request: token text})]."""
        out = []
        for k, stream in list(self._streams.items()):
            record = next(stream, None)
            if record is None:
                del self._streams[k]
                continue
            out.append((k, record, {r: self._tokenizer.token_text(t) for r, t in record.emitted}))
        return out

    def steps(self, budget_s: float = 0.0) -> tuple[list, dict | None]:
        """Rounds back to back for budget_s (at least one); with them, once every scheduler has finished,
        each one's results ({scheduler: (RequestResult, ...)}), else None."""
        batch: list = []
        started = time.perf_counter()
        while True:
            got = self.round()
            batch += got
            if not got or time.perf_counter() - started >= budget_s:
                break
        if self._streams:
            return batch, None
        return batch, {k: e.result().results for k, e in self._engines.items()}

    def solo(self, index: int) -> tuple[int, ...]:
        """Request `index` of the run alone through the static engine (kvviz.serving.solo): its tokens, for the
        check of every scheduler's tokens against them. The model's run keeps what it needs after the run."""
        from kvviz.serving.solo import solo_request

        if self._solo is None:
            raise ValueError("no run to check")
        return solo_request(*self._solo, index)

    def end(self) -> None:
        self._streams, self._engines = {}, {}
        self._solo = None

    def close(self) -> None:
        self.end()
        self._loaded = None

    def abort(self) -> None:
        """Nothing to kill in this thread."""


def serve_stdio() -> None:
    """The engine process's entry point: commands on stdin, answers on stdout (later prints go to stderr)."""
    answers = os.dup(1)
    os.dup2(2, 1)
    serve_child(Connection(os.dup(0), writable=False), Connection(answers, readable=False))


def serve_child(commands_in: Connection, answers_out: Connection) -> None:
    """The engine process's loop: answer each command until "close" or the parent goes away."""
    session = ServeSession()
    commands = {"start": session.start, "steps": session.steps, "solo": session.solo, "end": session.end}
    while True:
        try:
            command, args = commands_in.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            break
        if command == "close":
            break
        try:
            value = commands[command](*args)
        except Exception as exc:
            if not isinstance(exc, ValueError):
                traceback.print_exc()
            session.end()
            reply = ("error", error_message(exc))
        else:
            reply = ("ok", value)
        try:
            answers_out.send(reply)
        except (EOFError, OSError):
            break
    session.close()


class ServeProcess:
    """A ServeSession in a child process, with the same methods; calls block the caller (the worker's
    thread) until the child answers, without holding the interpreter lock."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._to: Connection | None = None
        self._from: Connection | None = None

    def _launch(self) -> None:
        import kvviz

        root = str(Path(kvviz.__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        self._proc = proc = subprocess.Popen([sys.executable, "-c", _ENTRY], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, env=env)
        self._to = Connection(os.dup(proc.stdin.fileno()), readable=False)
        self._from = Connection(os.dup(proc.stdout.fileno()), writable=False)
        proc.stdin.close()
        proc.stdout.close()

    def _call(self, command: str, *args):
        if self._proc is None or self._proc.poll() is not None:
            self._drop()
            self._launch()
        try:
            self._to.send((command, args))
            status, value = self._from.recv()
        except (EOFError, OSError) as exc:
            code = self._proc.poll() if self._proc is not None else None
            self._drop()
            raise RuntimeError(f"the serve engine process ended unexpectedly (exit code {code})") from exc
        if status == "error":
            raise ValueError(value)
        return value

    def start(self, spec: ServeSpec, device: str = "auto", dtype: str = "auto", threads: int | None = None) -> dict:
        return self._call("start", spec, device, dtype, threads)

    def steps(self, budget_s: float = 0.0) -> tuple[list, dict | None]:
        return self._call("steps", budget_s)

    def solo(self, index: int) -> tuple[int, ...]:
        return self._call("solo", index)

    def end(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._call("end")

    def abort(self) -> None:
        """From any thread: end the child now (a call in progress raises in the caller)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()

    def close(self) -> None:
        if self._to is not None:
            try:
                self._to.send(("close", ()))
            except (OSError, ValueError):
                pass
        self._drop()

    def _drop(self) -> None:
        proc, to, frm = self._proc, self._to, self._from
        self._proc = self._to = self._from = None
        for conn in (to, frm):
            if conn is not None:
                conn.close()
        if proc is not None:
            try:
                proc.wait(CLOSE_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
