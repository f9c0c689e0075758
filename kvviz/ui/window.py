"""The compare view: the shell (kvviz.ui.shell) with the run form (Inputs dock), the compare transport
(timeline, progress, badge, narration), the panel grid, the menus, the dialogs and the status bar, wired to
the run worker (its source).

No torch, no engines, no models: the window talks to a run worker (handed in by the app) through
signals, learns the presets, devices and engines from the Environment the worker lists, and
draws the history in frames (frames.py) when something changed, never from the worker's signals.
"""
from __future__ import annotations

import gc
import uuid

from PySide6.QtCore import QCoreApplication, QEvent, QObject, QSettings, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QFileDialog, QInputDialog, QStyle, QWidget

from kvviz import catalog
from kvviz.checkpoint_files import check_model_folder
from kvviz.errors import one_line
from kvviz.format import fmt_ms
from kvviz.records.trace import RunInfo
from kvviz.runtime.messages import Environment, ModelChoice, RunRequest
from kvviz.ui import actions, dialogs
from kvviz.ui.actions import build_menus, retranslate_actions
from kvviz.ui.estimates import RunEstimates
from kvviz.ui.form import RunForm, inputs_dock
from kvviz.ui.frames import FramePainter
from kvviz.ui.grid import PanelGrid
from kvviz.ui.history import RunHistory
from kvviz.ui.placement import restore_geometry
from kvviz.ui.presentation import Presentation
from kvviz.ui.settings_file import SettingsReader, show_problems
from kvviz.ui.shell.state import RunState
from kvviz.ui.shell.window import ShellWindow
from kvviz.ui.status import StatusFields, WindowCost
from kvviz.ui.transport import TransportBar
from kvviz.ui.zoom import ZOOM_KEY

SLOW_RUN_S = 10.0  # a run estimated to take longer is announced before it starts


class MainWindow(ShellWindow):
    """Drive with `form`, the transport actions and `select_step`; read `history`, `grid`,
    `transport`, `error_text()`."""

    # Re-emitted in the GUI thread, after the history took the record: tests and tools wait on these.
    environment_ready = Signal()
    panels_ready = Signal()
    run_started = Signal(object)  # RunInfo
    step_traced = Signal(object)  # StepTrace
    # run_failed, run_finished and the requests to the worker (run_requested: a RunRequest) are the shell's.
    environment_requested = Signal()

    KEYS = actions.KEYS

    def __init__(self, worker: QObject, settings: QSettings | None = None, parent: QWidget | None = None,
                 *, defer_panels: bool = False) -> None:
        super().__init__(settings, parent)
        self.setObjectName("MainWindow")
        self.history = RunHistory()
        self._start_paused = False
        self._panel_frames: set[QObject] = set()
        self.estimates = RunEstimates()  # how long a run takes: measured per model, or from the config
        self._status_run: RunInfo | None = None  # the run the status bar describes
        self._own_info: RunInfo | None = None  # the RunInfo of the last run this window ran
        self.torch_threads: int | None = None  # None: the worker's default (every core but one)
        self.shortcuts_dialog = None  # Help > Keyboard shortcuts, made when first asked for
        self._folder_refusal = ""  # the last folder Model > Open checkpoint refused, as the error strip says it

        self.presentation = Presentation(self)  # F11 and View > Zoom: the app on a projector
        self.act_narration.setChecked(True)
        self.form = RunForm(self.settings)
        self.form.set_open_action(self.act_open)
        self.form.changed.connect(self._on_form_changed)
        self.form.run_clicked.connect(lambda: self.start_run())
        self.form_dock = inputs_dock(self.form, self)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.form_dock)
        self.grid = PanelGrid(self.settings)
        self.grid.step_picked.connect(self.select_step)
        self.grid.installed.connect(self._on_panels_installed)
        self.transport = TransportBar(self.history)
        # One step everywhere, drawn only when something changed (see frames.py).
        self.frames = FramePainter(self.history, self.grid, self.transport, running=lambda: self.state is not
                                   RunState.IDLE, shown=self._on_frame_shown, idle_work=self._warm_up_one,
                                   parent=self)
        self.transport.step_chosen.connect(self.frames.timeline_moved)
        self.build_shell(self.transport, self.grid, area="panel_area", error="error")
        build_menus(self)
        self.status_fields = StatusFields(self.statusBar())
        self.window_cost = WindowCost()  # this process's CPU while a run steps, shown after it
        self.retranslate_ui()
        self._restore_settings()
        self._validate_form()

        if defer_panels:
            self.installEventFilter(self)
        else:
            self.grid.install()

        self.host_worker(worker)
        # Asked once the event loop runs, so torch's import in the worker does not delay the first paint.
        QTimer.singleShot(0, self.environment_requested.emit)

    # ------------------------------------------------------------------ construction
    def install_panels(self) -> None:
        """Build the panels (once). Deferred past the first paint when the app starts, since
        pyqtgraph's import is most of a launch's time."""
        self.grid.install()

    def _on_panels_installed(self) -> None:
        for key, act in self.grid.panel_actions.items():
            self.view_menu.insertAction(self._panel_actions_end, act)
            alone = self.grid.alone_actions[key]
            self.addAction(alone)  # shortcuts work with the menu bar hidden
            self.alone_menu.addAction(alone)
        self._panel_frames = set(self.grid.frames.values())  # a Show of one wakes the frames (eventFilter)
        self.transport.narrating = True
        self.retranslate_ui()
        self.frames.wake()  # the panels' warm-up, on idle ticks
        self.panels_ready.emit()

    def add_export_actions(self, menu) -> None:
        """Hook for File > Export (screenshots, data, animations): add actions to `menu`."""

    def retranslate_ui(self) -> None:
        """Every visible string, so a language switch (View > Language) can re-run it."""
        self.setWindowTitle(self.tr("kvviz: the KV cache, step by step"))
        retranslate_actions(self)
        self._update_pause_text()
        self.form.retranslate()
        self.form_dock.setWindowTitle(self.tr("Inputs"))
        self.transport.retranslate()
        self.toolbar.retranslate()
        self.grid.retranslate()
        self.form_dock.toggleViewAction().setText(self.tr("Inputs"))
        self.toolbar.show_state(self.state)
        if hasattr(self, "status_fields"):
            self._update_status()
            self.status_fields.show_cost(self.window_cost)  # "window 0.16 core" in the new language
        if self.shortcuts_dialog is not None:
            self.shortcuts_dialog.fill()
        scrollbar = self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        self.form_dock.setMinimumWidth(self.form.minimumSizeHint().width() + scrollbar + 8)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.LanguageChange:
            self.retranslate_ui()
            self._validate_form()
        super().changeEvent(event)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self.transport.update_narration()  # its lines follow the window's height

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.Show and obj in self._panel_frames:
            self.frames.wake()  # a panel on screen again (a View toggle, a tab of the grid): drawn if stale
            return False
        if obj is self and event.type() == QEvent.Type.Paint:
            self.removeEventFilter(self)  # the window is on screen: now build the panels
            QTimer.singleShot(0, self.install_panels)
            return False
        return super().eventFilter(obj, event)

    # ------------------------------------------------------------------ the worker
    def connect_worker(self, worker: QObject) -> None:
        self.environment_requested.connect(worker.list_environment)
        worker.environment_listed.connect(self._on_environment_listed)
        worker.model_loaded.connect(self._on_model_loaded)
        worker.run_started.connect(self._on_run_started)
        worker.run_noted.connect(self._on_run_noted)
        worker.step_traced.connect(self._on_step_traced)

    @property
    def env(self) -> Environment | None:
        return self.form.env

    @Slot(object)
    def _on_environment_listed(self, env: Environment) -> None:
        self.form.set_environment(env)
        self.retranslate_ui()
        self.frames.wake()  # the panels' warm-up can start
        self.environment_ready.emit()

    @Slot(object)
    def _on_model_loaded(self, choice: ModelChoice) -> None:
        self.form.model_loaded(choice)

    @Slot(object)
    def _on_run_started(self, info: RunInfo) -> None:
        if info.run_id != self.run_id:
            return
        self.history.reset(info)
        self._own_info = info  # a history holding another RunInfo is a replayed trace
        self.grid.forget_run()
        self.frames.restart()
        self._set_state(RunState.PAUSED if self._start_paused else RunState.RUNNING)
        self.run_started.emit(info)

    @Slot(str, str)
    def _on_run_noted(self, run_id: str, note: str) -> None:
        if run_id == self.run_id:
            self.statusBar().showMessage(note, 15_000)

    @Slot(object)
    def _on_step_traced(self, trace) -> None:
        if not self.history.add(trace):
            return  # a late record of an earlier run
        self.frames.step_arrived()
        self.step_traced.emit(trace)

    @Slot(str)
    def _on_run_finished(self, run_id: str) -> None:
        if run_id != self.run_id:
            return
        self._set_state(RunState.IDLE)
        n = self.history.n_steps() if self.history.info.run_id == run_id else 0
        if n:
            total = self.history.info.max_new_tokens
            self.statusBar().showMessage(
                self.tr("finished: {0} steps").format(n) if n >= total else
                self.tr("stopped after {0} of {1} steps").format(n, total), 10_000)
        info = self.history.info
        if info.run_id == run_id:
            # What this run measured, per engine: the next run's estimate on this model starts from it.
            self.estimates.record(self.history)
            self.status_fields.show_cost(self.window_cost)
            dialogs.refresh_memory_calculator(self, getattr(self, "_memory_dialog", None))  # its measured tokens/s
        self._update_estimate()
        # The final step, one whole frame, before anyone waiting on run_finished looks.
        self.frames.finish(then=lambda: self.run_finished.emit(run_id))

    # ------------------------------------------------------------------ transport
    def start_run(self, *, paused: bool = False) -> bool:
        """Ask the worker for a run of the form's settings; False (with the reason shown) if refused."""
        reason = self._validate_form()
        if reason:
            self.statusBar().showMessage(reason, 10_000)
            return False
        self.grid.install()
        request = self.build_request(paused=paused)
        if self.state is not RunState.IDLE:
            self.stop_requested.emit()
        self.clear_error()
        self.form.set_read_only(False)  # a replay's settings, run: the fields are the user's again
        self.run_id = request.run_id
        self.window_cost.reset()
        self.status_fields.show_cost(self.window_cost)  # the last run's figure is not this one's
        self._start_paused = paused
        if catalog.any_approximate(request.run.engines) and self.grid.show_unless_chosen("quality"):
            self.statusBar().showMessage(self.tr("The quality panel is shown: this run has an approximate cache "
                                                 "(View hides it again)."), 10_000)
        found = self.form_estimate_ms()
        if found is not None and found[0] >= SLOW_RUN_S * 1000:
            self.statusBar().showMessage(self.tr("This run will take about {0}; the bar beside the timeline "
                                                 "shows the time left.").format(fmt_ms(found[0])), 15_000)
        self._set_state(RunState.LOADING)
        self._save_form()
        self.run_requested.emit(request)
        self.give_keys_to_transport()  # Ctrl+R from the prompt, then Space pauses: no other click
        return True

    def build_request(self, *, paused: bool = False) -> RunRequest:
        return RunRequest(run_id=uuid.uuid4().hex[:8], model=self.form.current_model(), run=self.form.build_run(),
                          device=self.form.device_combo.currentData() or "auto",
                          dtype=self.form.dtype_combo.currentData() or "auto",
                          steps_per_s=float(self.toolbar.speed_spin.value()), start_paused=paused,
                          threads=self.torch_threads, repeat=self.form.repeat_count())

    def step_from_idle(self) -> None:
        """Step from idle starts a paused run, unless a run is shown: that one stays (a shown run is never
        thrown away without asking); Run starts a new one."""
        if self.history.n_steps():
            self.statusBar().showMessage(self.tr("This run has ended: Run (Ctrl+R) starts a new one."), 8_000)
        else:
            self.start_run(paused=True)

    @Slot(int)
    def _on_speed_changed(self, value: int) -> None:
        super()._on_speed_changed(value)
        self._update_estimate()

    # ------------------------------------------------------------------ timeline
    @property
    def selected_step(self) -> int:
        return self.frames.selected

    def select_step(self, step: int) -> None:
        self.frames.select(step)

    def scrub(self, delta: int) -> None:
        self.frames.scrub(delta)

    def shown_steps(self) -> int:
        return self.history.n_steps()

    def following(self) -> bool:
        return self.frames.follow

    def set_following(self, on: bool) -> None:
        self.frames.follow = on

    def follow_live(self) -> None:
        self.frames.follow_live()

    def refresh(self) -> None:
        """Draw every visible panel at the selected step now (tests, screenshots, the end of a run)."""
        self.frames.refresh()

    # ------------------------------------------------------------------ painting
    def _warm_up_one(self) -> bool:
        """One piece of a panel's warm-up for the engines this app offers, on an idle tick; True while
        some is left (the frames' timer ticks on for it, then stops)."""
        if not self.grid.warming:
            return False
        if self.env is None:
            return False  # the engines are not known yet: the environment's arrival wakes the frames
        keys = tuple(k for k, _ in self.env.engines)
        choice = self.form.model_choice()
        positions = choice.config.max_seq_len if choice is not None and choice.config is not None else 0
        if self.grid.warm_up_one(keys, positions):
            return True
        # Warmed up: the ~200,000 objects Qt, pyqtgraph and the panels made so far live as long as
        # the app. Out of the collector's way, a full collection during a run scans only the run's
        # own objects (measured: 50-130 ms stalls mid-run before, 3-4 ms after).
        gc.collect()
        gc.freeze()
        return False

    def _on_frame_shown(self) -> None:
        """The window's part of each frame: the memory, the progress and the status of what is shown."""
        self.status_fields.show_memory(self.history)
        self._update_progress()
        if self.history.info is not self._status_run:  # a new run shown (or a trace replayed)
            self._update_status()
        dialogs.follow_memory_calculator(self, getattr(self, "_memory_dialog", None))  # a run it has not shown

    # ------------------------------------------------------------------ state, errors, status
    def state_changed(self) -> None:
        if self.state is RunState.RUNNING:  # the window's own CPU while a run steps (status bar, after the run)
            self.window_cost.resume()
        else:
            self.window_cost.pause()
        self.transport.state = self.state
        self._update_progress()
        self._update_status()
        self.transport.update_narration()  # paused or done: told at once again
        self.frames.wake()

    def _update_status(self) -> None:
        """Device, model, parameter count, KV bytes per token of what the panels show: the run drawn
        (a replayed trace's model too), else the form's selection, from the model's config. A run the
        form no longer describes is marked beside the timeline."""
        info = self.history.info
        self._status_run = info
        if info.run_id and info.model_name:
            self.status_fields.show_run(info)
            replay = info is not self._own_info
            differs = self.state is RunState.IDLE and self.env is not None and not (
                info.model_name == self.form.current_model() and self._form_matches(info))
            self.transport.mark_shown_run(info if replay or differs else None, replay=replay)
            return
        self.transport.mark_shown_run(None)
        choice = self.form.model_choice()
        self.status_fields.show_choice(self.form.current_model(), self.form.current_device(), self.form.dtype(),
                                       choice.config if choice is not None else None)

    def _form_matches(self, info: RunInfo) -> bool:
        """Whether the form still describes the run drawn (its kernel too, where the trace names one)."""
        return (info.device == self.form.current_device() and info.dtype == self.form.dtype()
                and info.kernel in (None, self.form.current_kernel()))

    def _update_progress(self) -> None:
        self.transport.update_progress(self.form.current_model(),
                                       self.estimates.left_ms(self.history, float(self.toolbar.speed_spin.value()))
                                       if self.state is RunState.RUNNING else None)

    def form_estimate_ms(self) -> tuple[float, bool] | None:
        return self.estimates.form_ms(self.form, float(self.toolbar.speed_spin.value()))

    def _update_estimate(self) -> None:
        """Under the Run button, before a run that will take more than SLOW_RUN_S: about how long."""
        label = self.form.estimate_label
        note = self.estimates.note(self.form, self.toolbar.speed_spin.value(), SLOW_RUN_S) if (
            self.state is RunState.IDLE and not self.form.problem()) else ""
        label.setText(note)
        label.setVisible(bool(note))

    # ------------------------------------------------------------------ dialogs
    def show_memory_calculator(self) -> None:
        """Model > Memory calculator (Ctrl+M): one non-modal instance, showing the run shown (its model, its
        measured decode tokens/s) and told again when a run finishes or a trace is opened."""
        self._memory_dialog = dialogs.show_memory_calculator(self, getattr(self, "_memory_dialog", None))

    def shortcut_rows(self) -> list[tuple[str, str]]:
        return dialogs.shortcut_rows(self)

    def show_shortcuts(self) -> None:
        """Help > Keyboard shortcuts (F1): a table to keep open beside the window, not modal."""
        self.shortcuts_dialog = dialogs.show_shortcuts(self, self.shortcuts_dialog)

    def _show_about(self) -> None:
        dialogs.show_about(self, self.env)

    def show_download(self) -> None:
        """Model > Download model: a checkpoint from the Hugging Face Hub by its id."""
        from kvviz.ui.dialogs.download import show_download_dialog

        show_download_dialog(self)

    def open_serve_view(self) -> None:
        """View > Serve view (Ctrl+Shift+V); imported when asked, since it brings pyqtgraph."""
        from kvviz.ui.serve.hook import open_serve_view

        open_serve_view(self)

    def continue_in_serve_view(self) -> None:
        """Run > Continue in the Serve view: the text so far and a message typed now, served as a chat."""
        from kvviz.ui.serve.hook import continue_in_serve_view

        continue_in_serve_view(self)

    def open_watch_view(self) -> None:
        """File > Watch a server... (Ctrl+Shift+W): the Watch window and its URL dialog; imported when asked."""
        from kvviz.ui.watch.hook import open_watch_view

        open_watch_view(self)

    def open_watch_recording(self) -> None:
        """File > Open a watch recording...: a recording replayed in the Watch window."""
        from kvviz.ui.watch.hook import open_watch_recording

        open_watch_recording(self)

    def open_lesson(self) -> None:
        """Lesson > Open lesson...: a lesson file chosen, its runs made once, presented full screen."""
        from kvviz.ui.lessons.opener import open_lesson

        presenter = open_lesson(self)
        if presenter is not None:
            self.lesson_window = presenter  # kept while shown; closed with this window

    def add_view_as_scene(self) -> None:
        """Lesson > Add this view as a scene...: a title and a caption asked for, then the .toml lesson the scene
        (the form's run, the step, the panels, the zoom) is appended to; a lesson that would refuse it is left
        untouched and the reason said in one line."""
        from kvviz.ui.lessons.capture import add_scene, capture_view

        heading = self.tr("Add this view as a scene")
        title, ok = QInputDialog.getText(self, heading, self.tr("Title:"))
        if not ok or not title.strip():
            return
        caption, ok = QInputDialog.getText(self, heading, self.tr("Caption (the title if empty):"))
        if not ok:
            return
        path, _ = QFileDialog.getSaveFileName(self, heading, "", self.tr("Lessons (*.toml)"),
                                              options=QFileDialog.Option.DontConfirmOverwrite)
        if not path:
            return
        try:
            saved = add_scene(path, capture_view(self, title.strip(), caption.strip()))
        except (ValueError, OSError) as exc:
            self.show_error(str(exc))
            return
        self.statusBar().showMessage(self.tr("Scene added to {0}").format(saved), 10_000)

    def edit_lesson_scenes(self) -> None:
        """Lesson > Edit scenes...: a lesson file's scenes reordered, retitled and removed (kvviz.ui.dialogs.scenes)."""
        from kvviz.ui.dialogs.scenes import edit_scenes_dialog

        self.scenes_dialog = edit_scenes_dialog(self)

    def save_session_file(self) -> None:
        """File > Save session...: the whole view and its run in a session file (kvviz.ui.session_file)."""
        from kvviz.ui.session_file import save_session_dialog

        save_session_dialog(self)

    def open_session_file(self) -> None:
        """File > Open session...: a session file's view set again and its run replayed."""
        from kvviz.ui.session_file import open_session_dialog

        open_session_dialog(self)

    # ------------------------------------------------------------------ the form
    def validation_text(self) -> str:
        return self.form.validation_text()

    def _validate_form(self) -> str:
        """The first reason the form cannot run, shown under the form ("" when it can)."""
        reason = self.form.problem()
        self.form.show_problem(reason)
        self.act_run.setEnabled(not reason)
        self.act_step.setEnabled(not reason or self.state is not RunState.IDLE)
        return reason

    @Slot()
    def _on_form_changed(self) -> None:
        self._validate_form()
        self._update_status()
        self._update_estimate()

    def open_checkpoint(self) -> None:
        path = QFileDialog.getExistingDirectory(self, self.tr("Open checkpoint folder"))
        if path:
            self.open_checkpoint_folder(path)

    def open_checkpoint_folder(self, path: str) -> bool:
        """A model folder into the picker, chosen; one that is not a checkpoint is refused at once, in the
        error strip with the line a run would give, and the picker keeps what it had."""
        try:
            check_model_folder(path)
        except ValueError as exc:
            self._folder_refusal = one_line(str(exc))
            self.show_error(self._folder_refusal)
            return False
        if self._folder_refusal and self.error_text() == self._folder_refusal:
            self.clear_error()  # the folder opened answers the last one refused
        self.form.set_model(path)
        return True

    # ------------------------------------------------------------------ settings
    def _save_form(self) -> None:
        self.form.save(self.settings)
        self.settings.setValue("transport/speed", self.toolbar.speed_spin.value())

    def save_settings(self) -> None:
        self._save_form()
        s = self.settings
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        self.grid.save(s)
        s.setValue("view/narration", self.act_narration.isChecked())
        s.sync()

    def _restore_settings(self) -> None:
        """Every saved value through one reader: a bad one is said in one line (the error strip and stderr)
        naming the file and the key, and the window starts with that value's default."""
        reader = SettingsReader(self.settings)
        self.form.restore(reader)
        reader.spin("transport/speed", self.toolbar.speed_spin)
        self.act_narration.setChecked(reader.flag("view/narration", True))
        self.transport.narration.setVisible(self.act_narration.isChecked())
        self._default_state = self.saveState()
        restore_geometry(self, reader)
        state = reader.blob("window/state")
        if state is not None:
            self.restoreState(state)
        zoom = int(reader.bounded(ZOOM_KEY, 100, "zoom"))
        if zoom != 100:
            self.presentation.set_zoom(zoom)
        show_problems(self, reader.problems)

    # ------------------------------------------------------------------ presentation, zoom, layout
    def reset_layout(self) -> None:
        """View > Reset layout (Ctrl+Shift+L): the docks, toolbar and panels a run like the one shown
        starts with (the quality panel where it has quality figures), the dragged sizes forgotten."""
        self.presentation.set(False)
        self.restoreState(self._default_state)
        self.form_dock.show()
        self.toolbar.show()
        self.grid.reset(self.history)
        self.frames.redraw_all()

    # ------------------------------------------------------------------ closing
    def close_own_windows(self) -> None:
        """The Serve and Watch views and the dialogs this window opened close with it (each ends its own worker), so
        the app, left without windows, quits (one left open would keep the process running)."""
        for name in ("serve_window", "watch_window", "lesson_window"):
            window = getattr(self, name, None)
            if window is not None:
                window.close()
        for child in self.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly):
            if child.isWindow() and child.isVisible():
                child.close()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        app = QCoreApplication.instance()
        if app is not None:
            app.removeEventFilter(self)
        self.presentation.set(False)  # what is saved is the window as it was before presenting
        self.close_own_windows()
        self.save_settings()
        self.frames.stop()
        self.shutdown_worker()
        gc.unfreeze()  # what the window held may be collected again (see _warm_up_one)
        super().closeEvent(event)
