"""How large each panel's plots are drawn (prints figures, asserts nothing): the data area in pixels
of the work matrix's views, the recompute plot, the attention map, the latency and bytes plots and
the cache memory plot, at window sizes from a laptop's to a projector's, with the Inputs dock, in
presentation mode (F11), and with panels hidden in View.

    python scripts/measure_layout.py [--tokens 20] [--model tiny-random]
          [--layouts "1600x1000 1280x720 1280x720:present 1280x720:present:token_stream,summary"]

A layout is WxH[:present][:panel,panel to hide]. Runs offscreen when there is no display; the
offscreen platform lays out as a screen would (the same fonts), so the figures are the window's own.
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--model", default="tiny-random")
    parser.add_argument("--layouts", default=DEFAULT_LAYOUTS)
    args = parser.parse_args()
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from PySide6.QtCore import QSettings, qInstallMessageHandler

    from kvviz.ui import app
    from kvviz.ui.headless import quiet_qt_messages
    from kvviz.ui.shot import _wait, parse_size

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
