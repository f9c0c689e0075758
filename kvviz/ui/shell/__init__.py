"""The shell: the one step window every view is (kvviz.ui.shell.window.ShellWindow), with its parts: the
key map as data (keys), the run state and timing constants (state), the worker's thread (worker_host), the
toolbar and narration (transport), the panel grid and its give-way (grid: ShellGrid from a GridSpec; giveway),
File > Export (exports), the frame painter and zoom of a view drawn frame by frame (framed: FramedView), the
Panel protocol (panel). It knows no records, engines or torch.

A view is three things on the shell, nothing else:
- a form: the widget that builds the view's request (kvviz.ui.form.RunForm, kvviz.ui.serve.form.ServeForm);
- panels: widgets keeping the Panel protocol, listed in a registry of (key, "module:Class") entries
  (kvviz.ui.panels.PANELS, kvviz.ui.serve.panels.SERVE_PANELS), built by grid.load_panels; a view's grid is
  grid.ShellGrid(GridSpec(name, registry, rows, priority)) (the compare window's kvviz.ui.grid.PanelGrid is one,
  GridSpec(deferred=True, scrolls=False)) and its File > Export exports.ShellExports with its kinds
  (tests/test_shell_grid_exports.py builds such a view of two panels);
- a source: a QObject worker with the slots start_run(request), set_paused(bool), request_step(),
  set_speed(float), request_stop() (any thread) and shut_down(), and the signals run_failed(run_id,
  message) and run_finished(run_id) plus its own records' signals.
The view subclasses ShellWindow, calls build_shell(transport, grid, ...) and host_worker(source), connects
its records in connect_worker, and implements start_run and the selection hooks select_step, follow_live and
shown_steps (the shell keeps the selected step and following: selected_step, following, set_following,
scrub). The transport's keys, their verbs
(pause, one step, stop, next), the toolbar, the error strip, the worker's thread and the focus rules are
the shell's: tests/test_shell.py builds such a view in one file.
"""
