"""`kvviz shot --out FILE.png`: a compare run in the real window, offscreen, saved as a screenshot.

It fills the window's form and presses Run as a person would, so the picture is what the app shows;
the engines run in the window's own worker. No torch here. Runs offscreen unless QT_QPA_PLATFORM
names another platform.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from kvviz import catalog
from kvviz.format import DEFAULT_PROMPT
from kvviz.options import add_run_options, add_tokens, bounded, parse_size


def configure(parser) -> None:
    parser.add_argument("--out", required=True, metavar="FILE.png", help="where to write the PNG")
    add_run_options(parser)  # shared with export and shot: kvviz.options, one set of bounds
    parser.set_defaults(model=None)
    add_tokens(parser, 40)
    parser.add_argument("--engines", default=",".join(catalog.DEFAULT_ENGINES),
                        help="comma list (default: the chapter's four)")
    parser.add_argument("--step", type=bounded("step"), default=None,
                        help="the step to show (default: the last; negative counts from the end)")
    parser.add_argument("--size", default="1600x1000", metavar="WxH", help="window size in pixels")
    parser.add_argument("--zoom", type=bounded("zoom"), default=100, metavar="PERCENT",
                        help="text and plots at this size, as View > Zoom shows them in the app, e.g. --size "
                             "1920x1080 --zoom 150 for a 1080p projector (default 100)")
    parser.add_argument("--presentation", action="store_true",
                        help="presentation mode (F11) at --size: the Inputs dock and the status bar hidden")
    parser.add_argument("--hide", default="", metavar="PANELS",
                        help="comma list of panels to hide (View menu), the others laid out in their room")
    parser.add_argument("--layer", type=bounded("layer"), default=0, help="attention layer whose weights are drawn")
    parser.add_argument("--head", type=bounded("head"), default=0, help="attention head whose weights are drawn")
    parser.add_argument("--timeout", type=bounded("timeout"), default=600.0, help="seconds to wait for the run")
    parser.epilog = (f"--model defaults to the app's: tiny when its weights are trained, else tiny-random. "
                     f"--prompt defaults to {DEFAULT_PROMPT!r}.")


def parse_engine_list(text: str) -> tuple[str, ...]:
    """`naive,concat` -> ("naive", "concat"); the names are checked against the worker's registry."""
    items = tuple(s.strip() for s in text.split(",") if s.strip())
    if not items:
        raise ValueError("--engines names no engine")
    if len(set(items)) != len(items):
        raise ValueError(f"an engine is named twice in {text!r}")
    return items


def run(args) -> int:
    width, height = parse_size(args.size)
    out = Path(args.out)
    if not out.parent.is_dir() and str(out.parent):
        raise ValueError(f"{out.parent}: no such folder")
    if args.tokens < 1:
        raise ValueError(f"--tokens must be at least 1, got {args.tokens}")
    engines = parse_engine_list(args.engines)
    from kvviz.kernels import check_engines

    check_engines(args.kernel, engines)  # a kernel one of the engines cannot decode with: before any window
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be at least 1, got {args.threads}")
    from kvviz.ui.headless import Interrupts

    with Interrupts() as interrupts:  # before Qt's import: Ctrl+C is acted on between pieces of work
        return _run_window(args, engines, width, height, out, interrupts)


def _run_window(args, engines, width, height, out: Path, interrupts) -> int:
    from kvviz.ui.zoom import check_zoom

    zoom = check_zoom(args.zoom)
    if "QT_SCALE_FACTOR" in os.environ and zoom != 100:
        raise ValueError("--zoom and QT_SCALE_FACTOR both set: use one")
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    import tempfile

    from PySide6.QtCore import QSettings, qInstallMessageHandler

    from kvviz.ui import app
    from kvviz.ui.headless import dispose, quiet_qt_messages

    qInstallMessageHandler(quiet_qt_messages)

    qt_app = app.ensure_app()
    interrupts.check()
    with tempfile.TemporaryDirectory(prefix="kvviz-shot-") as tmp:
        settings = QSettings(str(Path(tmp) / "settings.ini"), QSettings.Format.IniFormat)
        window = app.create_window(settings)
        # View > Zoom, as `kvviz --zoom` sets it: the app's font and the panels' plots at the zoom, laid out in
        # --size as the app lays them out on a screen of that size
        window.presentation.set_zoom(zoom, save=False)
        try:
            return _shoot(window, qt_app, args, engines, width, height, out, interrupts)
        finally:
            # The app's font back at 100% while Python runs: the panels hidden or behind tabs (kept without a
            # parent) are destroyed at the interpreter's exit, where under a zoomed font a plot's layout calls
            # back into Python after it is gone (a segfault after the PNG is written).
            window.presentation.set_zoom(100, save=False)
            qt_app.processEvents()
            dispose(window)


def _shoot(window, qt_app, args, engines, width, height, out: Path, interrupts) -> int:
    from kvviz.fileio import atomic_write_bytes
    from kvviz.ui.exporters import describe_os_error, png_bytes
    from kvviz.ui.headless import wait_for

    failures: list[str] = []
    window.run_failed.connect(lambda _rid, message: failures.append(message))
    ratio = window.devicePixelRatioF()  # QT_SCALE_FACTOR: a window of W x H pixels is W/ratio x H/ratio to Qt
    window.resize(round(width / ratio), round(height / ratio))
    window.show()
    if not wait_for(window.environment_ready, args.timeout, interrupts):
        raise ValueError(failures[0] if failures else "the engines did not start in time")
    _fill_form(window, args, engines)
    if not window.start_run():
        raise ValueError(window.validation_text())
    if not wait_for(window.run_finished, args.timeout, interrupts):
        raise ValueError(f"the run did not finish within {args.timeout:g} s")
    if failures:
        print(f"kvviz shot: the run failed: {failures[-1]}", file=sys.stderr)
        return 1
    n = window.history.n_steps()
    step = n - 1 if args.step is None else (n + args.step if args.step < 0 else args.step)
    if not 0 <= step < n:
        raise ValueError(f"--step {args.step} is outside the run's {n} steps")
    window.select_step(step)
    if args.presentation:
        window.presentation.set(True, full_screen=False)  # full screen would take the screen's size
    for _ in range(3):  # layouts settle, then the panels draw the step, then Qt paints them
        qt_app.processEvents()
        window.refresh()
    pixmap = window.grab()
    size = _check_size(pixmap, width, height, ratio, args.zoom)

    data = png_bytes(pixmap.toImage())  # encoded in memory: a full disk is then an OSError that names itself
    interrupts.check()
    try:
        interrupts.keep(atomic_write_bytes(out, data, sync=True))
    except OSError as exc:
        raise ValueError(describe_os_error(out, exc)) from None
    zoom = round(ratio * window.presentation.zoom)
    mode = f", zoom {zoom}%" if zoom != 100 else ""
    mode += ", presentation mode" if window.presentation.active() else ""
    print(f"kvviz shot: wrote {out} ({size[0]}x{size[1]}{mode}, step {step} of {n}, engines {','.join(engines)}: "
          f"{window.transport.badge.text()}; panels {','.join(window.grid.shown_panels())})")
    return 0


def _check_size(pixmap, width: int, height: int, ratio: float, zoom: int) -> tuple[int, int]:
    """The grabbed window's size in device pixels; ValueError, in words, where it is not --size (a zoom may round
    by a pixel): a window smaller than its menus, Inputs dock and panels need at that zoom cannot be made."""
    size = (pixmap.width(), pixmap.height())
    if abs(size[0] - width) <= ratio and abs(size[1] - height) <= ratio:
        return size
    need = [f"{n} pixels {word}" for n, asked, word in ((size[0], width, "wide"), (size[1], height, "tall"))
            if n > asked + ratio]
    if need:
        raise ValueError(f"the window cannot be {width}x{height} at zoom {zoom}%: its menus, Inputs dock and panels "
                         f"need at least {' and '.join(need)}; give a larger --size or a smaller --zoom")
    raise ValueError(f"the window could not be {width}x{height} (it is {size[0]}x{size[1]})")


def _fill_form(window, args, engines) -> None:
    env = window.env
    known = [k for k, _ in env.engines]
    unknown = [e for e in engines if e not in known]
    if unknown:
        raise ValueError(f"unknown engine {unknown[0]!r}; choose from {', '.join(known)}")
    window.form.prompt_edit.setPlainText(args.prompt)
    window.form.set_model(args.model or env.default_model)
    device = (args.device or "auto").strip().lower()
    if window.form.device_combo.findData(device) < 0:
        raise ValueError(f"device {device!r} is not available here; choose {', '.join(env.devices)}")
    window.form.device_combo.setCurrentIndex(window.form.device_combo.findData(device))
    dtype = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(args.dtype, args.dtype)
    if window.form.dtype_combo.findData(dtype) < 0:
        raise ValueError(f"unknown dtype {args.dtype!r}; choose auto, fp32, bf16 or fp16")
    window.form.dtype_combo.setCurrentIndex(window.form.dtype_combo.findData(dtype))
    window.form.kernel_combo.setCurrentIndex(window.form.kernel_combo.findData(args.kernel))
    window.form.set_engines(engines)
    hide = [k.strip() for k in args.hide.split(",") if k.strip()]
    unknown = [k for k in hide if k not in window.grid.panel_actions]
    if unknown:
        raise ValueError(f"unknown panel {unknown[0]!r}; choose from {', '.join(window.grid.panel_actions)}")
    for key in hide:
        window.grid.panel_actions[key].setChecked(False)
    window.form.greedy_check.setChecked(args.temperature == 0)
    if args.top_k is not None and args.top_k < 1:
        raise ValueError(f"--top-k must be at least 1, got {args.top_k}")
    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise ValueError(f"--top-p must be in (0, 1], got {args.top_p}")
    if args.layer < 0 or args.head < 0:
        raise ValueError("--layer and --head must be 0 or more")
    for option, spin, value in (("--tokens", window.form.tokens_spin, args.tokens),
                                ("--block-size", window.form.block_spin, args.block_size),
                                ("--window", window.form.window_spin, args.window),
                                ("--sinks", window.form.sinks_spin, args.sinks),
                                ("--residual", window.form.residual_spin, args.residual or 0),
                                ("--spec-k", window.form.spec_k_spin, args.spec_k),
                                ("--temperature", window.form.temperature_spin, args.temperature),
                                ("--top-k", window.form.top_k_spin, args.top_k or 0),
                                ("--top-p", window.form.top_p_spin, 1.0 if args.top_p is None else args.top_p),
                                ("--seed", window.form.seed_spin, args.seed),
                                ("--layer", window.form.layer_spin, args.layer),
                                ("--head", window.form.head_spin, args.head)):
        spin.setValue(value)
        if abs(spin.value() - value) > 1e-9:  # a spin box clamps silently: say so instead
            raise ValueError(f"{option} {value} is outside {spin.minimum():g}..{spin.maximum():g} for this model")
    window.form.rollback_combo.setCurrentIndex(window.form.rollback_combo.findData(args.rollback))
    window.toolbar.speed_spin.setValue(0)
    window.torch_threads = args.threads
