"""How large each panel's plots are drawn (prints figures, asserts nothing): the data area in pixels
of the work matrix's views, the recompute plot, the attention map, the latency and bytes plots and
the cache memory plot, at window sizes from a laptop's to a projector's, with the Inputs dock, in
presentation mode (F11), and with panels hidden in View.

    python scripts/measure_layout.py [--tokens 20] [--model tiny-random]
          [--layouts "1600x1000 1280x720 1280x720:present 1280x720:present:token_stream,summary"]
    python scripts/measure_layout.py --xcb TRACE.json[,TRACE.json] [--screens 1280x720,1500x920,1920x1080]
          [--zooms 100,150] [--display :81] [--root .]
    python scripts/measure_layout.py --million [--positions 1000000]

A layout is WxH[:present][:panel,panel to hide]. Runs offscreen when there is no display; the
offscreen platform lays out as a screen would (the same fonts), so the figures are the window's own.

--xcb: `python main.py` (through tests/xcb_driver.py) on an Xvfb of each screen size, the window
resized to the screen, each trace opened with File > Open trace (Ctrl+Shift+O, its path typed),
then the smallest data area of each panel shown, in root pixels, one JSON line per screen, zoom and
trace, and a grab beside it (--shots). --root: the kvviz tree to start (another checkout's, for
a before/after).

--million: a synthetic history of a N-token prompt and 12 steps of the four exact engines drawn by a
PanelGrid offscreen (the first draw and a scrub), seconds per panel; not a test (no timed asserts).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

DEFAULT_LAYOUTS = ("1600x1000 1280x720 1280x720:present 1280x720:present:token_stream,summary "
                   "1024x768 1024x768:present")
# The plot each panel is judged by: its smallest data area (the work matrix's four views are alike;
# the latency and bytes panels' two plots), or, for the attention panel, the map beside its colour bar.
LARGEST = {"attention"}


def plot_areas(panel) -> list[tuple[int, int]]:
    import pyqtgraph as pg

    boxes = [item for view in panel.findChildren(pg.GraphicsView) for item in view.scene().items()
             if isinstance(item, pg.ViewBox) and item.isVisible() and item.width() > 1]
    return [(int(b.width()), int(b.height())) for b in boxes]


def million(positions: int) -> int:
    """Draw a history of a `positions`-token prompt and 12 steps; print seconds per panel."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings

    from kvviz.records.trace import MaskSpec, RunInfo, StepTrace
    from kvviz.ui import app
    from kvviz.ui.grid import PanelGrid
    from kvviz.ui.history import RunHistory

    qt_app = app.ensure_app()
    engines = ("naive", "concat", "static", "paged")
    info = RunInfo(run_id="m", prompt_ids=tuple(range(positions)), engines=engines, max_new_tokens=12)
    history = RunHistory()
    history.reset(info)
    t = time.perf_counter()
    for step in range(12):
        for e in engines:
            stop = positions + step
            start = 0 if e == "naive" or step == 0 else stop - 1
            history.add(StepTrace(
                run_id="m", engine=e, step=step, phase="prefill" if step == 0 else "decode", token_id=65,
                token_text="A", pos_start=start, pos_stop=stop, cache_len=stop, cache_capacity=stop,
                cache_bytes=stop * 64, bytes_copied=0, bytes_written=64, bytes_gathered=0, kv_projections=stop - start,
                latency_ms=1.0, mask_spec=MaskSpec(q_len=stop - start, kv_len=stop, past_len=start),
                block_size=16 if e == "paged" else None,
                block_table=tuple(range(-(-stop // 16))) if e == "paged" else None))
    print(f"history of {positions:,} positions x 12 steps x 4 engines built in {time.perf_counter() - t:.2f} s")
    with tempfile.TemporaryDirectory(prefix="kvviz-layout-") as tmp:
        grid = PanelGrid(QSettings(os.path.join(tmp, "s.ini"), QSettings.Format.IniFormat))
        grid.resize(1500, 800)
        grid.show()
        grid.install()
        for _ in range(3):
            qt_app.processEvents()
        for step in (11, 5):
            t = time.perf_counter()
            drawn = grid.draw(history, step, (history.version, step))
            qt_app.processEvents()
            grid.grab()  # painted, as the screen would be
            cells = ", ".join(f"{k} {v:.3f}" for k, v in drawn.items())
            print(f"step {step}: drawn and painted in {time.perf_counter() - t:.2f} s ({cells})", flush=True)
    return 0


def xcb(args) -> int:
    """The window on Xvfb per screen size, zoom and trace: the smallest data area of each panel shown."""
    import json
    import queue
    import signal
    import subprocess
    import sys
    import threading
    from pathlib import Path

    root = Path(args.root).resolve()
    shots = Path(args.shots)
    shots.mkdir(parents=True, exist_ok=True)
    for size in args.screens.split(","):
        width, height = (int(v) for v in size.split("x"))
        for zoom in (int(z) for z in args.zooms.split(",")):
            for trace in args.xcb.split(","):
                server = subprocess.Popen(["Xvfb", args.display, "-screen", "0", f"{width}x{height}x24", "-nolisten",
                                           "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1.5)
                env = {k: v for k, v in os.environ.items()
                       if k not in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY", "XAUTHORITY", "QT_SCALE_FACTOR")}
                env.update(DISPLAY=args.display, PYTHONPATH=str(root), QT_QPA_PLATFORM="xcb")
                ini = shots / "measure.ini"
                ini.write_text("[run]\nmodel=tiny-random\n", encoding="utf-8")
                command = [sys.executable, str(root / "tests" / "xcb_driver.py"), "--settings", str(ini)]
                command += ["--zoom", str(zoom)] if zoom != 100 else []
                proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, env=env, cwd=root)
                answers: queue.Queue = queue.Queue()
                events: queue.Queue = queue.Queue()

                def read(proc=proc, answers=answers, events=events) -> None:
                    for line in proc.stdout:
                        try:
                            message = json.loads(line)
                        except ValueError:
                            continue
                        (events if "event" in message else answers).put(message)

                threading.Thread(target=read, daemon=True).start()

                def ask(question: str, proc=proc, answers=answers) -> dict:
                    proc.stdin.write(question + "\n")
                    proc.stdin.flush()
                    return answers.get(timeout=60)

                def xdotool(*words: str, env=env) -> None:
                    subprocess.run(["xdotool", *words], env=env, check=True, timeout=60)

                try:
                    while events.get(timeout=180)["event"] != "ready":
                        pass
                    window = str(ask("state")["window_id"])
                    xdotool("windowmove", window, "0", "0")
                    xdotool("windowsize", window, str(width), str(height))
                    time.sleep(2)
                    xdotool("mousemove", "--sync", str(width // 2), str(height // 2))
                    xdotool("click", "1")
                    xdotool("key", "ctrl+shift+o")
                    time.sleep(3)
                    xdotool("type", "--delay", "20", trace)
                    xdotool("key", "Return")
                    deadline = time.monotonic() + 120
                    state = ask("state")
                    while state["n_steps"] == 0 and time.monotonic() < deadline:
                        time.sleep(0.5)
                        state = ask("state")
                    time.sleep(6)  # the frame drawn, the grid's checks done
                    rects = ask("rects")
                    shot = shots / f"{args.tag}_{width}x{height}_{zoom}_{Path(trace).parent.name}.png"
                    ask(f"grab {shot}")
                finally:
                    proc.send_signal(signal.SIGINT)
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                    server.terminate()
                    server.wait()
                    time.sleep(0.5)
                areas = {}
                for key, rect in rects.items():
                    if key == "prompt":
                        continue
                    plots = rect["plots"][:1] if key == "cache_memory" else rect["plots"]
                    if plots:  # the block pool (cache memory's second) is a picture, not a plot
                        areas[key] = (min(p[2] for p in plots), min(p[3] for p in plots))
                smallest = min(areas.items(), key=lambda kv: kv[1][0] * kv[1][1], default=None)
                print(json.dumps({"tag": args.tag, "screen": size, "zoom": zoom, "trace": trace,
                                  "steps": state["n_steps"], "smallest": smallest, "areas": areas,
                                  "shot": str(shot)}), flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--model", default="tiny-random")
    parser.add_argument("--layouts", default=DEFAULT_LAYOUTS)
    parser.add_argument("--xcb", metavar="TRACE.json[,...]", help="measure the window on Xvfb with these traces")
    parser.add_argument("--screens", default="1280x720,1500x920,1920x1080")
    parser.add_argument("--zooms", default="100,150")
    parser.add_argument("--display", default=":81")
    parser.add_argument("--root", default=".")
    parser.add_argument("--shots", default="layout-shots")
    parser.add_argument("--tag", default="now")
    parser.add_argument("--million", action="store_true", help="time drawing a long synthetic history")
    parser.add_argument("--positions", type=int, default=1_000_000)
    args = parser.parse_args()
    if args.million:
        return million(args.positions)
    if args.xcb:
        return xcb(args)
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from PySide6.QtCore import QSettings, qInstallMessageHandler

    from kvviz.options import parse_size
    from kvviz.ui import app
    from kvviz.ui.headless import quiet_qt_messages
    from kvviz.ui.shot import _wait

    qInstallMessageHandler(quiet_qt_messages)
    qt_app = app.ensure_app()
    with tempfile.TemporaryDirectory(prefix="kvviz-layout-") as tmp:
        window = app.create_window(QSettings(os.path.join(tmp, "s.ini"), QSettings.Format.IniFormat))
        window.show()
        if not _wait(window.environment_ready, 120):
            raise SystemExit("the engines did not start")
        window.form.set_model(args.model)
        window.form.tokens_spin.setValue(args.tokens)
        window.toolbar.speed_spin.setValue(0)
        window.torch_threads = 1
        if not window.start_run() or not _wait(window.run_finished, 300):
            raise SystemExit(f"the run did not finish: {window.validation_text() or window.error_text()}")
        print("data area of each panel's plot, width x height in pixels (work matrix: each of its views)")
        for layout in args.layouts.split():
            size, *options = layout.split(":")
            width, height = parse_size(size)
            present = "present" in options
            hide = [k for opt in options if opt != "present" for k in opt.split(",") if k]
            window.presentation.set(False)
            for key, act in window.grid.panel_actions.items():
                act.setChecked(key not in hide)
            window.resize(width, height)
            if present:
                window.presentation.set(True, full_screen=False)  # full screen would take the screen's size
            window.select_step(args.tokens // 2)
            for _ in range(6):  # layouts settle, the panels draw, Qt paints (a grab paints it all)
                qt_app.processEvents()
                window.refresh()
                window.grab()
                time.sleep(0.02)
            cells = []
            for key, panel in window.grid.panels.items():
                areas = plot_areas(panel)
                if window.grid.frames[key].isHidden() or not areas:
                    continue
                w, h = (max if key in LARGEST else min)(areas, key=lambda a: a[0] * a[1])
                cells.append(f"{key} {w}x{h}")
            mode = "presentation" if present else "with Inputs"
            hidden = f", hidden: {','.join(hide)}" if hide else ""
            print(f"{size} {mode}{hidden}: " + ", ".join(cells), flush=True)
        window.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
