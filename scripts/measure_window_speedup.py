"""The window's naive/concat speedup run to run: the app's worker with its engine process (as the window runs
it), `tiny`, 300 new tokens, naive + concat, 1 thread, PyTorch's ops, the form's trace level, ten runs at Speed 0,
20, 50, 100, 0 steps/s twice. Prints each run's speedup (sums of step times) and concat's median decode step,
then the spread; compare with `kvviz bench --model tiny --threads 1 --kernel torch --engines naive,concat
--tokens 300 --trace full --repeat 3`.

    python scripts/measure_window_speedup.py [--rounds 2]
"""
from __future__ import annotations

import os
import statistics
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QCoreApplication, QEventLoop, Qt, QThread, QTimer  # noqa: E402

from kvviz.config import RunConfig, SamplingConfig, TraceOptions  # noqa: E402
from kvviz.runtime.messages import RunRequest  # noqa: E402
from kvviz.ui.worker import RunWorker  # noqa: E402

SPEEDS = (0, 20, 50, 100, 0)
PROMPT = "The key and value of a token never change once computed, so"


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="times through the Speed settings (default 2)")
    rounds = max(1, parser.parse_args().rounds)
    app = QCoreApplication([])
    worker = RunWorker(isolate=True)
    thread = QThread()
    worker.moveToThread(thread)
    thread.finished.connect(worker.shut_down, Qt.ConnectionType.DirectConnection)  # the engine process ends there
    thread.start()
    traces, done = [], []
    worker.step_traced.connect(traces.append)
    worker.run_finished.connect(done.append)
    speedups = []
    try:
        for i, speed in enumerate(SPEEDS * rounds):
            traces.clear()
            done.clear()
            run = RunConfig(prompt=PROMPT, max_new_tokens=300, engines=("naive", "concat"), sampling=SamplingConfig(),
                            trace=TraceOptions(masks=True, weights_layer=0, weights_head=0), kernel="torch")
            req = RunRequest(run_id=f"r{i}", model="tiny", run=run, steps_per_s=float(speed), threads=1)
            QTimer.singleShot(0, worker, lambda req=req: worker.start_run(req))
            start = time.time()
            while not done and time.time() - start < 300:
                app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)
            steps = {e: [t.latency_ms for t in traces if t.engine == e] for e in ("naive", "concat")}
            speedups.append(sum(steps["naive"]) / sum(steps["concat"]))
            print(f"Speed {speed:>3} steps/s: naive/concat {speedups[-1]:.2f}x, concat's median decode step "
                  f"{statistics.median(steps['concat'][1:]):.3f} ms, load average {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        thread.quit()
        thread.wait(30_000)
    mid = statistics.median(speedups)
    print(f"{len(speedups)} runs: {min(speedups):.2f}-{max(speedups):.2f}x, median {mid:.2f}x, the farthest "
          f"{100 * max(abs(s / mid - 1) for s in speedups):.1f}% from it")
    return 0


if __name__ == "__main__":
    os._exit(main())  # the engine process is the worker's; nothing else to wait for
