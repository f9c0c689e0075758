"""The window without a screen, for `kvviz export`: build it offscreen with throwaway settings, fill its
form, run a compare run to the end, then write the asked-for files with export_actions' functions; and
Ctrl+C for the commands that do so (Interrupts). Importing this module imports no Qt.

Drives only the window's public surface; the run itself goes through the window's own worker, so the
files show exactly what the app shows. Progress goes to stderr.
"""
from __future__ import annotations

import os
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from kvviz.ui.job import DATA_FILES, ExportJob, fill_form


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


class Interrupts:
    """Ctrl+C (SIGINT) for a command that imports Qt and runs its event loop: noted at once, acted on at safe
    points.

    A KeyboardInterrupt raised where Python happens to be is unsafe here: inside a Qt slot it is printed and
    swallowed (the export ran on), and inside PySide's own import it aborts the interpreter. So, while this is
    entered, the handler only notes the signal and quits the loop `wait` runs (the signal wakes that loop
    through set_wakeup_fd and a QSocketNotifier), and `check()`, called between pieces of work, raises
    KeyboardInterrupt in plain Python. An error after an interrupt (a child that got the same Ctrl+C and
    failed) leaves as KeyboardInterrupt too, and one noted after the last check is raised on leaving: the
    command then says "interrupted" once and exits 130 (kvviz.cli). Qt is imported only once a loop runs."""

    def __init__(self) -> None:
        self.seen = False
        self._loops: list = []  # the QEventLoops `wait` runs now
        self._restore: tuple | None = None  # (the previous handler, the previous wakeup fd)
        self._sockets: tuple[socket.socket, socket.socket] | None = None
        self._notifier = None

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is not threading.main_thread():
            return self  # only the main thread receives signals: nothing to watch from here
        reader, writer = self._sockets = socket.socketpair()
        reader.setblocking(False)
        writer.setblocking(False)
        wakeup = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        self._restore = (signal.signal(signal.SIGINT, self._on_signal), wakeup)
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if self._restore is not None:
            handler, wakeup = self._restore
            signal.signal(signal.SIGINT, signal.default_int_handler if handler is None else handler)
            signal.set_wakeup_fd(wakeup)
            self._restore = None
        if self._notifier is not None:
            self._notifier.setEnabled(False)
            self._notifier.deleteLater()
            self._notifier = None
        if self._sockets is not None:
            for sock in self._sockets:
                sock.close()
            self._sockets = None
        if self.seen and (kind is None or issubclass(kind, Exception)):
            raise KeyboardInterrupt from None

    def check(self) -> None:
        """Raise KeyboardInterrupt if Ctrl+C came."""
        if self.seen:
            raise KeyboardInterrupt

    def keep(self, path: Path) -> Path:
        """`path`, a file just written; if Ctrl+C came while it was, the file is removed (a device or other
        node written in place is left as it is) and KeyboardInterrupt raised: what the reader stopped is
        not left behind as if it had been asked for."""
        if self.seen:
            if path.is_file():
                path.unlink(missing_ok=True)
            raise KeyboardInterrupt
        return path

    def wait(self, loop) -> None:
        """Run `loop` (a QEventLoop) until it quits or Ctrl+C comes (then KeyboardInterrupt)."""
        self.check()
        if self._notifier is None and self._sockets is not None:
            from PySide6.QtCore import QSocketNotifier

            self._notifier = QSocketNotifier(self._sockets[0].fileno(), QSocketNotifier.Type.Read)
            self._notifier.activated.connect(self._drain)  # Python in the main thread: the handler runs
        self._loops.append(loop)
        try:
            loop.exec()
        finally:
            self._loops.remove(loop)
        self.check()

    def _on_signal(self, _signum, _frame) -> None:
        self.seen = True
        for loop in self._loops:
            loop.quit()

    def _drain(self) -> None:
        try:
            while self._sockets is not None and self._sockets[0].recv(512):
                pass
        except OSError:  # nothing more to read (EAGAIN)
            pass


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


def wait_for(fired_signal, timeout_s: float | None = None, interrupts: Interrupts | None = None) -> bool:
    """Run the event loop until `fired_signal` fires (True) or the timeout passes (False); with `interrupts`,
    Ctrl+C ends the wait with KeyboardInterrupt."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    fired = []
    fired_signal.connect(lambda *a: (fired.append(a), loop.quit()))
    if timeout_s is not None:
        QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    if not fired:
        (interrupts or Interrupts()).wait(loop)
    return bool(fired)


def dispose(window) -> None:
    """Close the window (its worker's thread stopped, its engine process ended) and delete it now, with
    everything it holds, in Qt's order. Left to the interpreter's exit, a window kept alive by an
    exception's traceback had its plot items destroyed after their scene, a segfault at exit."""
    from PySide6.QtCore import QCoreApplication, QEvent

    window.close()
    window.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def run_to_end(window, progress: ProgressLine, interrupts: Interrupts | None = None) -> None:
    failures: list[str] = []
    window.run_failed.connect(lambda _run_id, message: failures.append(message))
    window.step_traced.connect(lambda t: progress.update(
        "run, step", window.history.n_steps(), window.history.info.max_new_tokens)
        if t.engine == window.history.engines[-1] else None)
    if not window.start_run():
        raise ValueError(window.validation_text() or "the run was refused")
    wait_for(window.run_finished, None, interrupts)
    if failures:
        raise RunError(failures[0])
    if not window.history.n_steps():
        raise RunError("the run produced no steps")


def write_outputs(window, job: ExportJob, progress: ProgressLine, interrupts: Interrupts | None = None) -> None:
    """Data, then the window's images, then each panel's (given the whole grid), then the animation. With
    `interrupts`, Ctrl+C stops between files and between an animation's frames; the file being written when
    it came is not left (a partial one is removed by the writer, one completed after it here)."""
    from kvviz.ui.export_actions import WINDOW, draw_step, export_animation, export_data, export_image, settle

    interrupts = interrupts or Interrupts()
    out = job.out
    n = window.history.n_steps()
    step = n - 1 if job.step is None else job.step
    if not 0 <= step < n:
        raise ValueError(f"--step {step} is outside the run's steps 0..{n - 1}")

    def note(path: Path, text: str = "") -> None:
        job.written.append((interrupts.keep(path), text))
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
                                  lambda done, total, f=fmt: interrupts.check() or
                                  progress.update(f"{f} frame", done, total))
        note(path, f"{frames} frames, {time.perf_counter() - t0:.1f} s")
    draw_step(window, step, [WINDOW])


def run_export(job: ExportJob, interrupts: Interrupts | None = None) -> int:
    """Build, run, write; ValueError for bad input (exit 2), RunError for a failed run (exit 1), and with
    `interrupts` (entered by the caller) KeyboardInterrupt for Ctrl+C."""
    progress = ProgressLine()
    interrupts = interrupts or Interrupts()
    with tempfile.TemporaryDirectory(prefix="kvviz-export-") as settings_dir:
        progress.say("starting (loading PyTorch and the model list)")
        window = make_window(job, settings_dir)
        try:
            if not wait_for(window.environment_ready, 300, interrupts):
                raise RunError("the worker did not list the environment within 5 minutes")
            fill_form(window, job)
            window.toolbar.speed_spin.setValue(0)  # an export runs as fast as possible
            got = (window.width(), window.height())
            if got != job.size:
                progress.say(f"the window cannot be {job.size[0]}x{job.size[1]} (its smallest size is "
                             f"{window.minimumSizeHint().width()}x{window.minimumSizeHint().height()}); "
                             f"using {got[0]}x{got[1]}")
            t0 = time.perf_counter()
            run_to_end(window, progress, interrupts)
            progress.say(f"ran {window.history.n_steps()} steps of {', '.join(window.history.engines)} "
                         f"in {time.perf_counter() - t0:.1f} s")
            write_outputs(window, job, progress, interrupts)
        finally:
            dispose(window)
    return 0
