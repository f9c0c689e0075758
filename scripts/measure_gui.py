"""Measure the app (prints figures, asserts nothing): launch-to-shown time, the GUI thread's longest
stall during a long concat run, and that run's mean step latency beside `kvviz bench`'s.

    python scripts/measure_gui.py [--tokens 2000] [--launches 3] [--repeat 3] [--model tiny]

Runs offscreen when there is no display. The default model is `tiny` when its weights exist, else
`tiny-random` (the same shape). The prompt is short so prompt + 2000 tokens fit the 2048 context.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "The key and value of a token"


def default_model() -> str:
    return "tiny" if (ROOT / "assets" / "tiny" / "model.safetensors").is_file() else "tiny-random"


def child_env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if sys.platform.startswith("linux") and not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")):
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
    return env


# -- 1. launch to a shown window ----------------------------------------------------------------------
def launch_child() -> None:
    """Run in a fresh process: `kvviz gui` as the user starts it, printing the time of the window's
    first paint, of the panels being built, and of the model list arriving from the engine process."""
    from PySide6.QtCore import QEvent, QObject, QTimer

    from kvviz.cli import main
    from kvviz.ui import app

    class FirstPaint(QObject):
        def eventFilter(self, obj, event):  # noqa: N802 (Qt override)
            if event.type() == QEvent.Type.Paint:
                print(f"SHOWN {time.time():.6f}", flush=True)
                obj.removeEventFilter(self)
            return False

    watcher = FirstPaint()
    create = app.create_window

    def create_and_watch(*args, **kwargs):
        window = create(*args, **kwargs)
        window.installEventFilter(watcher)
        window.panels_ready.connect(lambda: print(f"PANELS {time.time():.6f}", flush=True))

        def ready():
            print(f"READY {time.time():.6f}", flush=True)
            QTimer.singleShot(0, window.close)

        window.environment_ready.connect(ready)
        return window

    app.create_window = create_and_watch
    with tempfile.TemporaryDirectory() as tmp:
        main(["gui", "--settings", str(Path(tmp) / "s.ini")])


def measure_launch(n: int) -> list[dict[str, float]]:
    results = []
    for _ in range(n):
        t0 = time.time()
        out = subprocess.run([sys.executable, __file__, "--child-launch"], capture_output=True, text=True,
                             env=child_env(), cwd=ROOT, timeout=180)
        marks = {}
        for line in out.stdout.splitlines():
            name, _, value = line.partition(" ")
            if name in ("SHOWN", "PANELS", "READY"):
                marks[name] = float(value) - t0
        if "SHOWN" not in marks:
            print(out.stdout, out.stderr, file=sys.stderr)
            raise SystemExit("the child did not report a shown window")
        results.append(marks)
    return results


# -- 2. a long run with the window open ---------------------------------------------------------------
def measure_run(model: str, tokens: int, engines: tuple[str, ...]) -> dict:
    os.environ.update({k: v for k, v in child_env().items() if k == "QT_QPA_PLATFORM"})
    from PySide6.QtCore import QEventLoop, QSettings, QTimer

    from kvviz.ui import app

    qt_app = app.ensure_app()
    tmp = tempfile.TemporaryDirectory()
    window = app.create_window(QSettings(str(Path(tmp.name) / "s.ini"), QSettings.Format.IniFormat))
    window.show()
    loop = QEventLoop()
    window.environment_ready.connect(loop.quit)
    loop.exec()
    # A user reads the window before clicking Run: idle ticks in which panels warm up (half a second).
    QTimer.singleShot(500, loop.quit)
    loop.exec()
    window.form.set_model(model)
    window.form.set_engines(engines)
    window.form.prompt_edit.setPlainText(PROMPT)
    window.form.tokens_spin.setValue(tokens)
    window.toolbar.speed_spin.setValue(0)
    window.torch_threads = 1
    gaps: list[float] = []
    last = [0.0]
    running = [False]

    def tick() -> None:
        now = time.perf_counter()
        if running[0] and last[0]:
            gaps.append((now - last[0]) * 1000.0)
        last[0] = now

    probe = QTimer()
    probe.setInterval(10)
    probe.timeout.connect(tick)
    probe.start()
    paint_ms: list[float] = []
    original = window._repaint

    def timed_repaint(*args, **kwargs):
        t = time.perf_counter()
        original(*args, **kwargs)
        paint_ms.append((time.perf_counter() - t) * 1000.0)

    window._repaint = timed_repaint
    draws: dict[str, list[float]] = {}
    draw_panel = window.grid.draw_panel

    def timed_draw(key, history, step):
        t = time.perf_counter()
        draw_panel(key, history, step)
        draws.setdefault(key, []).append((time.perf_counter() - t) * 1000.0)

    window.grid.draw_panel = timed_draw
    window.run_finished.connect(lambda _rid: running.__setitem__(0, False))
    window.run_failed.connect(lambda _rid, msg: print("run failed:", msg, file=sys.stderr))
    window.run_finished.connect(loop.quit)
    # The stall is measured from the click on Run (the run's set-up in the window counts) to the end.
    running[0] = True
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    if not window.start_run():
        raise SystemExit(f"the form refused the run: {window.validation_text()}")
    loop.exec()
    wall_s = time.perf_counter() - t0
    cpu_s = time.process_time() - cpu0
    probe.stop()
    result = {"wall_s": wall_s, "gui_cpu_s": cpu_s, "gaps_ms": gaps, "paint_ms": paint_ms, "panels": {},
              "draws": draws}
    for key in engines:
        steps = [t.latency_ms for t in window.history.traces.get(key, [])]
        result[key] = steps
    # Each panel's own cost near the end of the run: show_step, then rendering its frame.
    history, n = window.history, window.history.n_steps()
    for key, panel in window.grid.panels.items():
        draw, render = [], []
        for step in range(max(0, n - 5), n):
            t = time.perf_counter()
            panel.show_step(history, step)
            t1 = time.perf_counter()
            window.grid.frames[key].grab()
            draw.append((t1 - t) * 1000.0)
            render.append((time.perf_counter() - t1) * 1000.0)
        result["panels"][key] = (statistics.median(draw), statistics.median(render))
    window.close()
    qt_app.processEvents()
    tmp.cleanup()
    return result


def bench(model: str, tokens: int, engine: str, trace: str) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        cmd = [sys.executable, "-m", "kvviz", "bench", "--model", model, "--engines", engine, "--tokens",
               str(tokens), "--threads", "1", "--repeat", "1", "--prompt", PROMPT, "--trace", trace,
               "--json", str(out)]
        subprocess.run(cmd, check=True, cwd=ROOT, env=child_env(), capture_output=True, text=True)
        doc = json.loads(out.read_text())
    return doc["results"][0]["step_ms"]


def describe(steps: list[float]) -> str:
    decode = steps[1:] or steps
    return (f"mean {statistics.fmean(steps):.3f} ms (decode {statistics.fmean(decode):.3f}), "
            f"median {statistics.median(steps):.3f} ms, over {len(steps)} steps")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--launches", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3, help="app runs, each between two bench runs")
    parser.add_argument("--skip-launch", action="store_true")
    parser.add_argument("--child-launch", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_launch:
        launch_child()
        return 0
    sys.path.insert(0, str(ROOT))
    model = args.model or default_model()
    print(f"machine: {os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.2f}; model {model}")
    if not args.skip_launch:
        launches = measure_launch(args.launches)
        for name, what in (("SHOWN", "shown window"), ("PANELS", "panels built"),
                           ("READY", "model list from the engine process (torch imported)")):
            times = [m[name] for m in launches if name in m]
            if times:
                print(f"launch to {what}: " + ", ".join(f"{t:.2f} s" for t in times)
                      + f" (median {statistics.median(times):.2f} s)")
    apps, fulls, offs, worst_gaps = [], [], [], []
    for i in range(args.repeat):
        # Side by side: the bench just before and just after each app run, on the same machine state.
        full = bench(model, args.tokens, "concat", "full")
        run = measure_run(model, args.tokens, ("concat",))
        off = bench(model, args.tokens, "concat", "off")
        gaps = run["gaps_ms"]
        worst_gaps.append(max(gaps))
        apps.append(statistics.fmean(run["concat"]))
        fulls.append(statistics.fmean(full))
        offs.append(statistics.fmean(off))
        print(f"run {i + 1}: {args.tokens}-step concat run with the window open: {run['wall_s']:.1f} s wall; "
              f"the GUI process used {run['gui_cpu_s']:.1f} s of CPU ({run['gui_cpu_s'] / run['wall_s']:.2f} cores)")
        print(f"  GUI thread: longest gap between 10 ms ticks {max(gaps):.1f} ms (stall {max(gaps) - 10:.1f} ms), "
              f"99th percentile {statistics.quantiles(gaps, n=100)[98]:.1f} ms, {len(gaps)} ticks")
        paints = run["paint_ms"]
        if paints:
            print(f"  repaints: {len(paints)}, mean {statistics.fmean(paints):.1f} ms, max {max(paints):.1f} ms")
        print("  draws during the run (show_step and settling, before the paint), max / median ms: " + ", ".join(
            f"{k} {max(v):.0f}/{statistics.median(v):.0f}" for k, v in run["draws"].items()))
        if i == 0:
            for key, (draw, render) in run["panels"].items():
                print(f"    panel {key:<13} show_step {draw:6.1f} ms, render {render:6.1f} ms "
                      "(median of the last 5 steps)")
        print(f"  engine in the app:                {describe(run['concat'])}")
        for label, steps in (("bench --trace full", full), ("bench --trace off", off)):
            print(f"  {label:<35}{describe(steps)}; app / bench {apps[-1] / statistics.fmean(steps):.3f}")
    print("  (--trace full copies masks and layer 0 head 0 weights each step, as the app does)")
    ratio_full = [a / b for a, b in zip(apps, fulls)]
    ratio_off = [a / b for a, b in zip(apps, offs)]
    print(f"over {args.repeat} runs: longest GUI stall per run " + ", ".join(f"{g - 10:.0f}" for g in worst_gaps)
          + f" ms (max {max(worst_gaps) - 10:.0f}); app / bench mean step latency: --trace full "
          + ", ".join(f"{r:.3f}" for r in ratio_full) + f" (median {statistics.median(ratio_full):.3f}), "
          + "--trace off " + ", ".join(f"{r:.3f}" for r in ratio_off) + f" (median {statistics.median(ratio_off):.3f})")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
