"""The Watch view: running vLLM servers (or a recording of them) on the shell (kvviz.ui.shell): the servers'
state and feeds, a time slider and the narration above the watch panels' grid. A live source is a WatchSession
(its threads and pump, kvviz.peers.watch); a recording is replayed sample by sample on this thread at the
transport's speed (samples per second). A timer takes a snapshot under the source's lock when records came
and draws it; nothing else runs while nothing changes.

No torch, no sockets here: the source owns them.
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QSettings, Qt, QTimer
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QFileDialog, QWidget

from kvviz.ui.placement import first_size
from kvviz.ui.shell import keys
from kvviz.ui.shell.framed import FramedView
from kvviz.ui.shell.grid import ShellGrid
from kvviz.ui.shell.keys import ActionSpec
from kvviz.ui.shell.state import FRAME_MS, PAINT_REST, RunState
from kvviz.ui.watch.dialog import WatchDialog, WatchRequest
from kvviz.ui.watch.panels import WATCH_GRID
from kvviz.ui.watch.source import LiveSource, ReplaySource, WatchFrame
from kvviz.ui.watch.transport import WatchTransport

REPLAY_BUDGET_S = 0.02  # "as fast as possible": records applied per tick for at most this long


class WatchWindow(FramedView):
    """Drive with `watch(request)`, `replay(path)`, the transport's actions; read `frame`, `grid`,
    `step` (the sample shown)."""

    KEYS = (*keys.TRANSPORT, ActionSpec("watch", ("Ctrl+Shift+W",), "open_watch_dialog"),
            ActionSpec("open", ("Ctrl+O",), "open_recording_dialog"), ActionSpec("close", ("Ctrl+W",), "close"),
            keys.QUIT)
    WORKER_THREAD = "kvviz-watch-worker"
    KEYS_ON_SHOW = True

    def __init__(self, settings: QSettings | None = None, parent: QWidget | None = None) -> None:
        super().__init__(settings, parent)
        self.setObjectName("WatchWindow")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, False)
        self.source: LiveSource | ReplaySource | None = None
        self.request: WatchRequest | None = None  # the live watch Run starts again
        self.replay_path: Path | None = None  # the recording Run replays again
        self.text_of = None
        self.frame: WatchFrame | None = None
        self._due = 0.0  # replay: samples owed to the speed
        self._last_tick = time.perf_counter()
        self._next_frame = 0.0  # perf_counter before which records streaming in wait (see tick)
        self._timer = QTimer(self)
        self._timer.setInterval(FRAME_MS)
        self._timer.timeout.connect(self.tick)
        self.statusBar()
        from kvviz.ui.watch.exports import WatchExports

        self.build_menus(WatchExports(self), (self.act_watch, self.act_open))
        self.transport = WatchTransport()
        self.transport.sample_chosen.connect(self.select_step)
        self.grid = ShellGrid(WATCH_GRID)
        self.grid.layout_changed.connect(self.redraw)
        self.build_shell(self.transport, self.grid, area="watch_panel_area", error="watch_error",
                         toolbar="watch_transport", speed_name="watch_speed", speed=20)
        self.speed_spin = self.toolbar.speed_spin
        self.fill_view_menu()
        self.retranslate_ui()
        first_size(self)
        self.host_worker(None)
        self._set_state(RunState.IDLE)

    # ------------------------------------------------------------------ construction
    def retranslate_ui(self) -> None:
        self.setWindowTitle(self.tr("kvviz: watching vLLM"))
        for act, text in ((self.act_run, self.tr("&Watch again")), (self.act_step, self.tr("&Step one sample")),
                          (self.act_stop, self.tr("S&top")), (self.act_prev, self.tr("Previous sample")),
                          (self.act_next, self.tr("Next sample")), (self.act_back10, self.tr("Back 10 samples")),
                          (self.act_fwd10, self.tr("Forward 10 samples")), (self.act_first, self.tr("First sample")),
                          (self.act_last, self.tr("Newest sample (follow)")),
                          (self.act_faster, QCoreApplication.translate("MainWindow", "Faster")),
                          (self.act_slower, QCoreApplication.translate("MainWindow", "Slower")),
                          (self.act_watch, self.tr("Watch a server...")),
                          (self.act_open, self.tr("Open a recording...")), (self.act_close, self.tr("&Close")),
                          (self.act_quit, self.tr("&Quit kvviz"))):
            act.setText(text)
        self.act_run.setToolTip(self.tr("Watch the same servers again, or replay the recording from its start "
                                        "(Ctrl+R)"))
        self.retranslate_shell()
        self.toolbar.speed_spin.setSuffix(self.tr(" samples/s"))
        self.toolbar.speed_spin.setToolTip(self.tr("A recording replayed at this many metric samples per second "
                                                   "([ slower, ] faster); a live server comes at its own pace"))

    # ------------------------------------------------------------------ sources
    def watch(self, request: WatchRequest, text_of=None) -> bool:
        """Watch the request's servers live (a WatchSession), drawn as records come."""
        from kvviz.peers.watch.session import WatchSession

        if text_of is None and request.model:
            try:
                from kvviz.peers.watch.tokens import text_of_tokens

                text_of = text_of_tokens(request.model)
            except (ValueError, OSError) as exc:
                self.show_error(f"the tokenizer {request.model!r}: {exc}")
                return False
        self.end_source()
        try:
            session = WatchSession(list(request.addresses), request.options, record=request.record,
                                   model=request.model)
        except ValueError as exc:
            self.show_error(str(exc))
            return False
        self.request, self.replay_path, self.text_of = request, None, text_of
        self.clear_error()
        self._show_source(LiveSource(session, text_of).start())
        self._set_state(RunState.RUNNING)
        self.statusBar().showMessage(self.tr("watching {0}").format(", ".join(a.url for a in request.addresses)
                                                                    ), 10_000)
        return True

    def replay(self, path: str | Path, text_of=None, *, paused: bool = False) -> bool:
        """Replay a recording at the transport's speed (paused: at its first sample, Step or Space to go on)."""
        self.end_source()
        try:
            source = ReplaySource(path, text_of=text_of)
        except ValueError as exc:
            self.show_error(str(exc))
            return False
        self.request, self.replay_path, self.text_of = None, source.path, text_of
        self.clear_error()
        self._show_source(source)
        source.advance(1)
        self._set_state(RunState.PAUSED if paused else RunState.RUNNING)
        self.statusBar().showMessage(self.tr("replaying {0} ({1} samples)").format(source.path, source.total),
                                     10_000)
        self.redraw()
        return True

    def _show_source(self, source) -> None:
        self.source = source
        self.frame, self._drawn, self.step, self._follow, self._due = None, None, 0, True, 0.0
        self.grid.clear()
        self.transport.clear()
        self._last_tick = time.perf_counter()
        self._timer.start()

    def end_source(self) -> Path | None:
        """Stop the source (a live one's threads end, its recording is closed); what it showed stays."""
        source, recorded = self.source, None
        if source is not None and not source.done:
            recorded = source.stop()
            if recorded is not None and source.live:
                self.statusBar().showMessage(self.tr("recorded to {0}").format(recorded), 10_000)
        if self.state is not RunState.IDLE:
            self._set_state(RunState.IDLE)
        return recorded

    # ------------------------------------------------------------------ the transport's verbs
    def start_run(self, *, paused: bool = False) -> bool:
        if self.request is not None:
            return self.watch(self.request, self.text_of)
        if self.replay_path is not None:
            return self.replay(self.replay_path, self.text_of, paused=paused)
        self.open_watch_dialog()
        return False

    def stop_run(self) -> None:
        self.end_source()
        self.redraw()

    def toggle_pause(self) -> None:
        if self.state is RunState.RUNNING:
            self._set_state(RunState.PAUSED)
        elif self.state is RunState.PAUSED:
            self._set_state(RunState.RUNNING)
            self._follow = True
            self._last_tick = time.perf_counter()
        self.redraw()

    def step_once(self) -> None:
        """Replay: one sample more, paused. Live: follow the newest sample."""
        source = self.source
        if self.state is RunState.IDLE or source is None:
            self.start_run(paused=True)
            return
        if self.state is RunState.RUNNING:
            self._set_state(RunState.PAUSED)
        if not source.live:
            source.advance(1)
        self._follow = True
        self.redraw(snapshot=True)

    def state_changed(self) -> None:
        self._update_pause_text()

    # ------------------------------------------------------------------ selection
    def _times(self):
        if self.frame is None or not self.frame.servers:
            return []
        return max((v.series["t"] for v in self.frame.servers), key=len)

    def shown_steps(self) -> int:
        return len(self._times())

    def select_step(self, step: int) -> None:
        n = self.shown_steps()
        self.step = max(0, min(int(step), n - 1)) if n else 0
        self._follow = n > 0 and self.step == n - 1 and self.state is not RunState.IDLE
        self.redraw()

    def follow_live(self) -> None:
        self._follow = True
        self.select_step(self.shown_steps() - 1)
        self._follow = True

    def _on_run_finished(self, run_id: str) -> None:
        """No worker: a replay's end comes from tick."""

    # ------------------------------------------------------------------ drawing
    def tick(self) -> None:
        """The frame timer: a replay moves on by the speed; records that came are snapshotted and drawn."""
        now = time.perf_counter()
        dt, self._last_tick = now - self._last_tick, now
        source = self.source
        if source is None:
            return
        if not source.live and self.state is RunState.RUNNING and not source.done:
            speed = self.speed_spin.value()
            if speed == 0:
                source.advance(1 << 30, budget_s=REPLAY_BUDGET_S)
            else:
                self._due = min(self._due + dt * speed, speed)  # a stall never makes it race to catch up
                whole = math.floor(self._due)
                if whole:
                    self._due -= source.advance(whole)
            if source.done:
                self._set_state(RunState.IDLE)
                if source.truncated:
                    self.statusBar().showMessage(self.tr("{0} ends inside a record (a session cut short): "
                                                         "replayed up to there").format(source.path), 10_000)
        if self.state is RunState.PAUSED and source.live:
            return  # paused: the picture stays while the session goes on recording
        if (self.frame is None or source.history.version != self.frame.version) and now >= self._next_frame:
            self.redraw(snapshot=True)
            done = time.perf_counter()
            # The snapshot and the drawing (the paint aside, unlike the Serve view's frame_rest_s): a burst of
            # records replayed as fast as possible is drawn at a steady rate and never takes the whole thread.
            self._next_frame = done + PAINT_REST * (done - now)
        if source.done and (self.frame is None or source.history.version == self.frame.version):
            self._timer.stop()

    def redraw(self, snapshot: bool = False) -> None:
        """Draw the selection; with `snapshot`, a fresh snapshot of the source first."""
        started = time.perf_counter()
        if self.source is not None and (snapshot or self.frame is None):
            self.frame = self.source.frame()
        frame = self.frame
        if frame is None:
            return
        times = self._times()
        n = len(times)
        if self._follow and n:
            self.step = n - 1
        self.step = min(self.step, max(0, n - 1))
        t = float(times[self.step]) if n else 0.0
        kind = self.tr("live") if self.source is not None and self.source.live else self.tr("replay")
        self.paint_frame((frame.started, frame.version, self.step, self.grid.shown_key()),
                         lambda: self._draw_selection(frame, n, t, kind), started)

    def _draw_selection(self, frame: WatchFrame, n: int, t: float, kind: str) -> None:
        self.transport.show_frame(frame, self.step, n, t, kind)
        self.grid.draw(frame, t, None)

    def draw_frame(self) -> None:
        self.redraw()

    # ------------------------------------------------------------------ files
    def open_watch_dialog(self) -> None:
        dialog = WatchDialog(self.settings, self)
        if dialog.exec() and dialog.accepted_request() is not None:
            self.watch(dialog.accepted_request())

    def open_recording_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, self.tr("Open a watch recording"), self.exports.folder(),
                                              self.tr("Watch recordings (*.kvwatch);;All files (*)"))
        if path:
            self.replay(path)

    # ------------------------------------------------------------------ closing
    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        self._timer.stop()
        self.end_source()
        self.settings.sync()
        super().closeEvent(event)

    def shutdown_worker(self) -> None:
        """The app quitting with the window open: the live session's threads end too."""
        self._timer.stop()
        self.end_source()
        super().shutdown_worker()


def run_window(settings_path: str | None = None, *, request: WatchRequest | None = None,
               replay: str | Path | None = None, text_of=None) -> int:
    """`kvviz watch URL --gui` / `kvviz watch --replay FILE --gui`: the Watch window alone, until it closes."""
    import signal

    from kvviz.ui.qtapp import APPLICATION, ORGANIZATION, ensure_app
    from kvviz.ui.settings_file import open_settings

    settings = open_settings(settings_path, ORGANIZATION, APPLICATION)
    app = ensure_app()
    window = WatchWindow(settings)
    from kvviz.ui.i18n import install_language_menu

    install_language_menu(window)  # the saved language (View > Language), as the main window has it
    window.show()
    if replay is not None and not window.replay(replay, text_of):
        print(f"kvviz watch: {window.error_text()}", file=sys.stderr)
        return 2
    if request is not None:
        window.watch(request, text_of)
    signal.signal(signal.SIGINT, lambda *_: window.close())  # Ctrl+C in the terminal closes the window
    tick = QTimer()
    tick.timeout.connect(lambda: None)
    tick.start(250)
    app.setQuitOnLastWindowClosed(True)
    return int(app.exec())
