"""Soak the app (prints figures): many runs in one window, and many windows closed mid-run.

    python scripts/soak.py [--runs 20] [--tokens 200] [--closes 100] [--model tiny]

1. --runs consecutive runs of every engine in one window (the engines in their child process, as the
   app runs them): the window's resident memory (RSS) and the engine process's after each run.
2. --closes starts of `kvviz gui` (the app as `python main.py` runs it), each closed mid-run (the window
   closed, Ctrl+Q, or Ctrl+C in the terminal, in turn) at a step between 1 and 20: the exit code, and
   every process of the app's session still alive after it exited (the engine process must not be).

Exit code 1 when a close was not clean. On the xcb platform when DISPLAY is set, else offscreen.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from measure_gui import PROMPT, ROOT, default_model  # scripts/ is this script's own folder on sys.path
from measure_gui import child_env as gui_child_env

ENGINES = ("naive", "concat", "static", "paged")
CLOSE_WAYS = ("window", "ctrl+q", "sigint")


def child_env() -> dict[str, str]:
    """measure_gui's environment for a child app, with a runtime folder of its own where none is set."""
    env = gui_child_env()
    if not env.get("XDG_RUNTIME_DIR"):
        env["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="kvviz-xdg-")
    return env


def settings_file(model: str, tokens: int) -> Path:
    """A fresh settings file holding the run form: the window starts with it filled in, so the soak
    needs nothing of the window but start_run()."""
    path = Path(tempfile.mkdtemp(prefix="kvviz-soak-")) / "soak.ini"
    path.write_text(f'[run]\nprompt="{PROMPT}"\nmodel={model}\nengines="{",".join(ENGINES)}"\ntokens={tokens}\n'
                    "[transport]\nspeed=0\n", encoding="utf-8")
    return path


def rss_mib(pid: int | str = "self") -> float:
    """Resident memory of a process (VmRSS), MiB; 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _stat(pid: str) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # fields after the command name: state, ppid, pgrp, session


def children(pid: int) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and (s := _stat(p)) and s[1] == str(pid)]


def in_session(sid: int) -> list[str]:
    """Every process of session sid still there: 'pid state command'."""
    left = []
    for p in os.listdir("/proc"):
        if p.isdigit() and (s := _stat(p)) and s[3] == str(sid):
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:80]
            left.append(f"{p} {s[0]} {cmd}")
    return left


# -- 1. runs in one window ----------------------------------------------------------------------------------
def soak_runs(n_runs: int, tokens: int, model: str) -> None:
    os.environ.update({k: v for k, v in child_env().items() if k in ("QT_QPA_PLATFORM", "XDG_RUNTIME_DIR")})
    from PySide6.QtCore import QEventLoop, QSettings, QTimer

    from kvviz.ui import app

    qt = app.ensure_app()
    window = app.create_window(QSettings(str(settings_file(model, tokens)), QSettings.Format.IniFormat))
    window.show()

    def wait(signal_, timeout_s: float) -> bool:
        loop = QEventLoop()
        signal_.connect(loop.quit)
        QTimer.singleShot(int(timeout_s * 1000), lambda: loop.exit(1))
        code = loop.exec()
        signal_.disconnect(loop.quit)
        return code == 0

    def settle(seconds: float) -> None:
        loop = QEventLoop()
        QTimer.singleShot(int(seconds * 1000), loop.quit)
        loop.exec()

    if window.env is None and not wait(window.environment_ready, 120):
        sys.exit("soak: the model list did not arrive in 120 s")
    settle(1.0)
    print(f"{n_runs} runs of {'+'.join(ENGINES)}, {tokens} tokens, {model}, platform "
          f"{qt.platformName()}: RSS after each run (MiB)", flush=True)
    print(" run  window  engine process  seconds", flush=True)
    figures = []
    for i in range(1, n_runs + 1):
        t0 = time.perf_counter()
        if not window.start_run():
            sys.exit(f"soak: run {i} refused: {window.validation_text()}")
        if not wait(window.run_finished, 600):
            sys.exit(f"soak: run {i} did not finish in 600 s")
        seconds = time.perf_counter() - t0
        settle(1.0)  # the panels' repaint timer draws the last step
        engine = sum(rss_mib(c) for c in children(os.getpid()))
        figures.append((rss_mib(), engine))
        print(f"{i:4d}  {figures[-1][0]:6.1f}  {engine:14.1f}  {seconds:7.1f}", flush=True)
    if n_runs >= 3:
        per_run = [(figures[-1][k] - figures[1][k]) / (n_runs - 2) for k in (0, 1)]
        print(f"growth per run after the second: window {per_run[0]:+.2f} MiB, engine process "
              f"{per_run[1]:+.2f} MiB", flush=True)
    window.close()


# -- 2. closes mid-run ------------------------------------------------------------------------------------
def close_child(after: int, how: str, tokens: int, model: str) -> None:
    """In a fresh process: `kvviz gui` as a user starts it; a run of every engine starts as soon as the
    model list arrives, and the window is closed `how` after step `after` was traced."""
    from PySide6.QtCore import QTimer

    from kvviz.cli import main
    from kvviz.ui import app

    create = app.create_window

    def create_and_close(*args, **kwargs):
        window = create(*args, **kwargs)

        def go() -> None:
            if not window.start_run():
                print("REFUSED", window.validation_text(), flush=True)
                QTimer.singleShot(0, window.close)

        def close_at(trace) -> None:
            if trace.step == after and trace.engine == ENGINES[-1]:
                window.step_traced.disconnect(close_at)
                print(f"CLOSING {how} at step {after} of {tokens}, state {window.state.value}", flush=True)
                if how == "sigint":
                    os.kill(os.getpid(), signal.SIGINT)  # Ctrl+C in the terminal
                elif how == "ctrl+q":
                    QTimer.singleShot(0, window.act_quit.trigger)
                else:
                    QTimer.singleShot(0, window.close)

        window.environment_ready.connect(go)
        window.step_traced.connect(close_at)
        return window

    app.create_window = create_and_close
    sys.exit(main(["gui", "--settings", str(settings_file(model, tokens))]))


def close_once(i: int, after: int, how: str, model: str) -> tuple[list[str], float]:
    """One start closed mid-run: (what was wrong, seconds from start to exit)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--close-child", str(after), how, model],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
                            cwd=ROOT, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    seconds = time.perf_counter() - t0
    left = in_session(proc.pid)
    problems = []
    if proc.returncode != 0:
        problems.append(f"exit code {proc.returncode}")
    if "CLOSING" not in out:
        problems.append("not closed mid-run")
    if left:
        problems.append(f"left behind: {left}")
        for pid in left:  # leave the machine as it was
            os.kill(int(pid.split()[0]), signal.SIGKILL)
    if "Traceback" in err or "QThread: Destroyed" in err:
        problems.append(err.strip().splitlines()[-1])
    return problems, seconds


def soak_closes(n: int, model: str, jobs: int = 1, seed: int = 0) -> bool:
    from concurrent.futures import ThreadPoolExecutor

    rng = random.Random(seed)
    plan = [(i, rng.randint(1, 20), CLOSE_WAYS[i % len(CLOSE_WAYS)]) for i in range(n)]
    print(f"{n} starts of `kvviz gui` ({model}) closed mid-run (a run of 2000 tokens, closed after step 1-20), "
          f"{jobs} at a time", flush=True)
    clean, seconds = 0, []
    with ThreadPoolExecutor(jobs) as pool:
        for (i, after, how), (problems, took) in zip(plan, pool.map(lambda p: close_once(*p, model), plan)):
            seconds.append(took)
            clean += not problems
            print(f"close {i + 1} ({how} after step {after}, {took:.0f} s): {'; '.join(problems) or 'clean'}",
                  flush=True)
    print(f"closes: {clean}/{n} clean (exit code 0, closed mid-run, no process of the app's session left); "
          f"start to exit {sorted(seconds)[len(seconds) // 2]:.1f} s median", flush=True)
    return clean == n


def main() -> int:
    if sys.argv[1:2] == ["--close-child"]:
        after, how, model = sys.argv[2:5]
        close_child(int(after), how, 2000, model)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--closes", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=1, help="closes run this many at a time")
    parser.add_argument("--model", default=None, help="default: tiny when its weights exist, else tiny-random")
    args = parser.parse_args()
    model = args.model or default_model()
    if args.runs:
        soak_runs(args.runs, args.tokens, model)
    return 0 if not args.closes or soak_closes(args.closes, model, args.jobs) else 1


if __name__ == "__main__":
    sys.exit(main())
