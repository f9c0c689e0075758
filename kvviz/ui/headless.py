"""The window without a screen, for `kvviz export`: build it offscreen with throwaway settings, fill its
form, run a compare run to the end, then write the asked-for files with export_actions' functions.

Drives only the window's public surface; the run itself goes through the window's own worker, so the
files show exactly what the app shows. Progress goes to stderr.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kvviz.ui.export_actions import WINDOW, draw_step, export_animation, export_data, export_image

DATA_FILES = {"json": ("json", "trace.json"), "csv": ("steps_csv", "steps.csv"),
              "summary_csv": ("summary_csv", "summary.csv"), "md": ("summary_md", "summary.md")}


@dataclass
class ExportJob:
    """What `kvviz export` was asked for, already checked for shape (not against the model)."""

    out: Path
    prompt: str
    tokens: int
    engines: tuple[str, ...]
    model: str | None  # None: the app's default model
    panels: tuple[str, ...] = (WINDOW,)
    images: tuple[str, ...] = ()  # "png", "svg"
    animations: tuple[str, ...] = ()  # "gif", "mp4"
    data: tuple[str, ...] = ()  # keys of DATA_FILES
    device: str = "auto"
    dtype: str = "auto"
    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int = 0
    threads: int | None = None
    block_size: int = 16
    window: int = 32  # W, S, R of the approximate caches (kvviz.options defaults)
    sinks: int = 4
    residual: int | None = None
    lang: str = "en"
    size: tuple[int, int] = (1600, 1000)
    scale: float = 1.0
    fps: float = 4.0
    step: int | None = None  # for images; None = the last step
    first: int | None = None  # animation range; None = all steps
    last: int | None = None
    written: list[tuple[Path, str]] = field(default_factory=list)  # (path, note) as written


class ProgressLine:
    """`kvviz export: <what> k/n` on stderr: rewritten in place on a terminal, every ~10% otherwise."""

    def __init__(self, stream=sys.stderr) -> None:
        self.stream = stream
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self._last = -1

    def update(self, what: str, done: int, total: int) -> bool:
        if self.tty:
            self.stream.write(f"\rkvviz export: {what} {done}/{total}")
            if done >= total:
                self.stream.write("\n")
        else:
            tenth = done * 10 // max(total, 1)
            if tenth != self._last or done >= total:
                self._last = tenth
                self.stream.write(f"kvviz export: {what} {done}/{total}\n")
        self.stream.flush()
        if done >= total:
            self._last = -1
        return True

    def say(self, text: str) -> None:
        self.stream.write(f"kvviz export: {text}\n")
        self.stream.flush()


class RunError(Exception):
    """The run itself failed (out of memory, a broken checkpoint): exit code 1."""


def quiet_qt_messages(_mode, _context, message: str) -> None:
    """Qt's own messages, less the offscreen platform's notes that it cannot raise or resize windows."""
    if "This plugin does not support" not in message:
        sys.stderr.write(message + "\n")


def make_window(job: ExportJob, settings_dir: str):
    """The real MainWindow (and its worker), offscreen, at job.size, with settings in `settings_dir`."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings, qInstallMessageHandler

    qInstallMessageHandler(quiet_qt_messages)

    from kvviz.ui import app, i18n
    from kvviz.ui.export_actions import install_export_actions

    app.ensure_app()
    settings = QSettings(str(Path(settings_dir) / "kvviz.ini"), QSettings.Format.IniFormat)
    settings.setValue(i18n.SETTINGS_KEY, job.lang)  # so a window that applies the saved language gets --lang
    i18n.set_language(job.lang)
    window = app.create_window(settings)
    if i18n.current_language() != job.lang:
        i18n.set_language(job.lang)
    install_export_actions(window)  # (returns the window's own if the app installed them already)
    window.resize(*job.size)
    window.show()
    return window


def wait_for(signal, timeout_s: float | None = None) -> bool:
    """Run the event loop until `signal` fires (True) or the timeout passes (False)."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    fired = []
    signal.connect(lambda *a: (fired.append(a), loop.quit()))
    if timeout_s is not None:
        QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    if not fired:
        loop.exec()
    return bool(fired)


def fill_form(window, job: ExportJob) -> None:
    """Set the window's form from the job; ValueError (a usage error) for what the form refuses."""
    unknown = [e for e in job.engines if e not in window.form.engine_checks]
    if unknown:
        raise ValueError(f"unknown engine {unknown[0]!r}; choose from {', '.join(window.form.engine_checks)}")
    window.form.prompt_edit.setPlainText(job.prompt)
    window.form.set_model(job.model or window.env.default_model)
    form = window.form
    for combo, value, what in ((form.device_combo, job.device, "device"), (form.dtype_combo, job.dtype, "dtype")):
        index = combo.findData(value)
        if index < 0:
            choices = ", ".join(combo.itemData(i) for i in range(combo.count()))
            raise ValueError(f"{what} {value!r} is not available here; choose from {choices}")
        combo.setCurrentIndex(index)
    window.form.set_engines(job.engines)
    for option, spin, value in (("--tokens", window.form.tokens_spin, job.tokens),
                                ("--block-size", window.form.block_spin, job.block_size),
                                ("--window", window.form.window_spin, job.window),
                                ("--sinks", window.form.sinks_spin, job.sinks),
                                ("--residual", window.form.residual_spin, job.residual or 0)):
        spin.setValue(value)
        if spin.value() != value:  # a spin box clamps silently: say so instead
            raise ValueError(f"{option} {value} is outside {spin.minimum()}..{spin.maximum()}")
    greedy = job.temperature <= 0
    window.form.greedy_check.setChecked(greedy)
    if not greedy:
        window.form.temperature_spin.setValue(job.temperature)
        window.form.top_k_spin.setValue(job.top_k or 0)
        window.form.top_p_spin.setValue(1.0 if job.top_p is None else job.top_p)
    window.form.seed_spin.setValue(job.seed)
    window.toolbar.speed_spin.setValue(0)  # as fast as possible
    window.torch_threads = job.threads
    reason = window.validation_text()
    if reason:
        raise ValueError(reason)


def run_to_end(window, progress: ProgressLine) -> None:
    failures: list[str] = []
    window.run_failed.connect(lambda _run_id, message: failures.append(message))
    window.step_traced.connect(lambda t: progress.update(
        "run, step", window.history.n_steps(), window.history.info.max_new_tokens)
        if t.engine == window.history.engines[-1] else None)
    if not window.start_run():
        raise ValueError(window.validation_text() or "the run was refused")
    wait_for(window.run_finished)
    if failures:
        raise RunError(failures[0])
    if not window.history.n_steps():
        raise RunError("the run produced no steps")


def write_outputs(window, job: ExportJob, progress: ProgressLine) -> None:
    """Data, then the window's images, then each panel's (given the whole grid), then the animation."""
    from kvviz.ui.export_actions import settle

    out = job.out
    n = window.history.n_steps()
    step = n - 1 if job.step is None else job.step
    if not 0 <= step < n:
        raise ValueError(f"--step {step} is outside the run's steps 0..{n - 1}")

    def note(path: Path, text: str = "") -> None:
        job.written.append((path, text))
        progress.say(f"wrote {path} ({path.stat().st_size:,} bytes{', ' + text if text else ''})")

    for kind in job.data:
        key, name = DATA_FILES[kind]
        note(export_data(window, key, out / name))
    panels = [k for k in job.panels if k != WINDOW]
    if WINDOW in job.panels:
        for fmt in job.images:
            t0 = time.perf_counter()
            path = export_image(window, WINDOW, fmt, out / f"window.{fmt}", job.scale, step)
            note(path, f"{time.perf_counter() - t0:.2f} s")
    if panels and WINDOW not in job.panels:
        for key, act in window.grid.panel_actions.items():  # only the chosen panels share the grid
            act.setChecked(key in panels)
        settle()
    for key in panels if job.images else []:
        window.grid.toggle_focus(key)  # the panel alone gets the whole grid: larger and easier to read
        settle()
        for fmt in job.images:
            t0 = time.perf_counter()
            path = export_image(window, key, fmt, out / f"{key}.{fmt}", job.scale, step)
            note(path, f"{time.perf_counter() - t0:.2f} s")
        window.grid.toggle_focus(key)
        settle()
    targets = [WINDOW] if WINDOW in job.panels else panels
    stem = "decode" if targets == [WINDOW] or len(targets) > 1 else f"decode-{targets[0]}"
    for fmt in job.animations:
        t0 = time.perf_counter()
        path = out / f"{stem}.{fmt}"
        frames = export_animation(window, targets, path, job.fps, job.first, job.last, job.scale, fmt,
                                  lambda done, total, f=fmt: progress.update(f"{f} frame", done, total))
        note(path, f"{frames} frames, {time.perf_counter() - t0:.1f} s")
    draw_step(window, step, [WINDOW])


def run_export(job: ExportJob) -> int:
    """Build, run, write; ValueError for bad input (exit 2), RunError for a failed run (exit 1)."""
    progress = ProgressLine()
    with tempfile.TemporaryDirectory(prefix="kvviz-export-") as settings_dir:
        progress.say("starting (loading PyTorch and the model list)")
        window = make_window(job, settings_dir)
        try:
            if not wait_for(window.environment_ready, timeout_s=300):
                raise RunError("the worker did not list the environment within 5 minutes")
            fill_form(window, job)
            got = (window.width(), window.height())
            if got != job.size:
                progress.say(f"the window cannot be {job.size[0]}x{job.size[1]} (its smallest size is "
                             f"{window.minimumSizeHint().width()}x{window.minimumSizeHint().height()}); "
                             f"using {got[0]}x{got[1]}")
            t0 = time.perf_counter()
            run_to_end(window, progress)
            progress.say(f"ran {window.history.n_steps()} steps of {', '.join(window.history.engines)} "
                         f"in {time.perf_counter() - t0:.1f} s")
            write_outputs(window, job, progress)
        finally:
            window.close()
            window.deleteLater()
    return 0
