"""`python -m kvviz.ui.serve [--replay FILE] [--settings INI]`: the Serve window alone.

`--bench WORKLOAD --schedulers a,b,c`: serve the workload in the window as fast as possible, then print
the frame times (each frame's drawing of every panel) and the longest stall of the GUI thread (the
largest gap a 5 ms heartbeat timer saw, less its period) while the run streamed in. The library runs in
the worker's thread of this process, so the stall includes any time it held the interpreter lock.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

HEARTBEAT_MS = 5


def bench(app, window, workload: str, schedulers: str, blocks: int, size: tuple[int, int]) -> int:
    from PySide6.QtCore import QEventLoop, QTimer

    window.resize(*size)
    window.form.load_preset(workload)
    window.form.set_schedulers(schedulers.split(","))
    window.form.blocks.setValue(blocks)
    gaps: list[float] = []
    last = [time.perf_counter()]
    cpu0, wall0 = [0.0], [0.0]

    def beat() -> None:
        now = time.perf_counter()
        gaps.append((now - last[0]) * 1000 - HEARTBEAT_MS)
        last[0] = now

    heart = QTimer()
    heart.setInterval(HEARTBEAT_MS)
    heart.timeout.connect(beat)
    done: list[str] = []
    window.run_finished.connect(done.append)

    def reset(_run_id: str) -> None:  # the model's load is not the view's cost
        gaps.clear()
        window.frame_ms.clear()
        window.frame_cpu_ms.clear()
        last[0] = time.perf_counter()
        cpu0[0], wall0[0] = time.thread_time(), time.perf_counter()

    window.run_started.connect(reset)
    started = time.perf_counter()
    heart.start()
    if not window.start_run():
        print(f"kvviz: {window.form.problem()}", file=sys.stderr)
        return 2
    if not done:
        loop = QEventLoop()
        window.run_finished.connect(loop.quit)
        loop.exec()
    heart.stop()
    gui_cpu, run_wall = time.thread_time() - cpu0[0], time.perf_counter() - wall0[0]
    wall = time.perf_counter() - started
    if window.error_text():
        print(f"kvviz: {window.error_text()}", file=sys.stderr)
        return 1
    frames = sorted(window.frame_ms)
    run = window.run
    print(f"serve view bench: {workload}, schedulers {schedulers}, {run.n_requests()} requests, "
          f"{run.n_steps()} lockstep steps ({', '.join(f'{k} {run.n_steps(k)}' for k in run.schedulers)}), "
          f"window {size[0]}x{size[1]}, {wall:.1f} s from Run to the last frame")
    print(f"frames drawn: {len(frames)}; frame time median {statistics.median(frames):.1f} ms, "
          f"p90 {frames[int(0.9 * (len(frames) - 1))]:.1f} ms, max {frames[-1]:.1f} ms")
    cpu = sorted(window.frame_cpu_ms)
    print(f"frame CPU time (the GUI thread's own, whatever the load): median {statistics.median(cpu):.1f} ms, "
          f"max {cpu[-1]:.1f} ms; the GUI thread used {gui_cpu:.2f} s of CPU in the run's {run_wall:.2f} s")
    print(f"GUI thread: longest stall {max(gaps):.1f} ms, stalls over 50 ms: {sum(g > 50 for g in gaps)} "
          f"(heartbeat every {HEARTBEAT_MS} ms, {len(gaps)} beats)")
    # The same record scrubbed step by step with no run going on: the view's own cost.
    gaps.clear()
    window.frame_ms.clear()
    window.frame_cpu_ms.clear()
    steps = iter(int(s) for s in run.event_steps())
    scrub = QTimer()
    scrub.setInterval(33)
    loop = QEventLoop()

    def next_step() -> None:
        step = next(steps, None)
        if step is None:
            loop.quit()
        else:
            window.select_step(step)

    scrub.timeout.connect(next_step)
    last[0] = time.perf_counter()
    heart.start()
    scrub.start()
    loop.exec()
    heart.stop()
    frames, cpu = sorted(window.frame_ms), sorted(window.frame_cpu_ms)
    print(f"scrubbing it (no run, a step every 33 ms): frame time median {statistics.median(frames):.1f} ms, "
          f"p90 {frames[int(0.9 * (len(frames) - 1))]:.1f} ms, max {frames[-1]:.1f} ms (CPU median "
          f"{statistics.median(cpu):.1f}, max {cpu[-1]:.1f} ms); longest stall {max(gaps):.1f} ms")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvviz.ui.serve", description="The kvviz Serve window.")
    parser.add_argument("--replay", metavar="FILE",
                        help="show a saved serve record (kvviz serve --json) without a model")
    parser.add_argument("--model", default="tiny", help="the model the form starts with (default: tiny)")
    parser.add_argument("--settings", metavar="FILE", help="keep the window's settings in this INI file")
    parser.add_argument("--bench", metavar="WORKLOAD", help="serve this preset, print frame times and stalls, exit")
    parser.add_argument("--schedulers", default="static,continuous,paged,prefix", help="for --bench")
    parser.add_argument("--blocks", type=int, default=64, help="for --bench: the pool's blocks (default 64)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all cores but one)")
    parser.add_argument("--size", default="1920x1080", help="for --bench: the window's size (default 1920x1080)")
    parser.add_argument("--both", action="store_true",
                        help="for --bench: the engines in a child process, then in the worker's thread, one run each")
    args = parser.parse_args(argv)
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setOrganizationName("kvviz")
    app.setApplicationName("kvviz")
    from kvviz.ui.serve.window import ServeWindow
    from kvviz.ui.serve.worker import ServeWorker

    settings = QSettings(args.settings, QSettings.Format.IniFormat) if args.settings else None
    if args.bench:
        w, _, h = args.size.partition("x")
        for isolate in (True, False) if args.both else (True,):
            window = ServeWindow(ServeWorker(threads=args.threads, isolate=isolate), settings)
            window.form.set_models([args.model], args.model)
            window.show()
            print("engines in a child process:" if isolate else "engines in the worker's thread:")
            code = bench(app, window, args.bench, args.schedulers, args.blocks, (int(w), int(h)))
            window.close()
            if code:
                return code
        return 0
    window = ServeWindow(ServeWorker(threads=args.threads), settings)
    window.form.set_models([args.model], args.model)
    window.show()
    if args.replay and not window.exports.open_record(args.replay):
        print(f"kvviz: {window.error_text()}", file=sys.stderr)
        return 2
    return int(app.exec())


if __name__ == "__main__":
    sys.exit(main())
