"""The compare view's actions as data (KEYS: name, keys, the window method called; the transport's rows are
the shell's key map) and its menus, with each action's text and tip in the current language. The window
keeps the actions as attributes (`w.act_run`, ...); these functions fill its menus and texts."""
from __future__ import annotations

from PySide6.QtCore import QCoreApplication
from PySide6.QtGui import QAction, QActionGroup, QKeySequence

from kvviz.ui.shell import keys
from kvviz.ui.shell.keys import ActionSpec, set_action_tip
from kvviz.ui.zoom import ZOOMS


def _tr(text: str) -> str:
    return QCoreApplication.translate("MainWindow", text)


# The compare view's actions, in the order made (Help > Keyboard shortcuts lists them so): the shell's
# transport and Quit, then the view's own.
KEYS: tuple[ActionSpec, ...] = (
    *keys.TRANSPORT,
    ActionSpec("open", (QKeySequence.StandardKey.Open,), "open_checkpoint"),
    ActionSpec("download", (), "show_download"),
    ActionSpec("focus_prompt", ("Ctrl+L",), "form.prompt_edit.setFocus"),
    keys.QUIT,
    ActionSpec("about", (), "_show_about"),
    ActionSpec("shortcuts", (QKeySequence.StandardKey.HelpContents, "Ctrl+/"), "show_shortcuts"),
    ActionSpec("memory", ("Ctrl+M",), "show_memory_calculator"),
    ActionSpec("serve", ("Ctrl+Shift+V",), "open_serve_view"),
    ActionSpec("continue", (), "continue_in_serve_view"),
    ActionSpec("watch", ("Ctrl+Shift+W",), "open_watch_view"),
    ActionSpec("watch_open", (), "open_watch_recording"),
    ActionSpec("lesson_open", (), "open_lesson"),
    ActionSpec("lesson_add", (), "add_view_as_scene"),
    ActionSpec("lesson_edit", (), "edit_lesson_scenes"),
    ActionSpec("session_open", (), "open_session_file"),
    ActionSpec("session_save", ("Ctrl+Shift+S",), "save_session_file"),
    # Ctrl+0 is the zoom's 100%, as in browsers; the start layout has a key of its own.
    ActionSpec("reset_layout", ("Ctrl+Shift+L",), "reset_layout"),
    ActionSpec("zoom_in", (QKeySequence.StandardKey.ZoomIn, "Ctrl++", "Ctrl+="), "presentation.zoom_step", (+1,)),
    ActionSpec("zoom_out", (QKeySequence.StandardKey.ZoomOut, "Ctrl+-"), "presentation.zoom_step", (-1,)),
    ActionSpec("zoom_reset", ("Ctrl+0",), "presentation.set_zoom", (100,)),
    ActionSpec("present", ("F11",), "presentation.set", checkable=True),
    ActionSpec("narration", (), "transport.show_narration", checkable=True),
)
MODEL_MENU = ("open", "download", "memory")


def build_menus(w) -> None:
    """File, Model, Run, Lesson, View (panels, zoom, language) and Help; the panels' toggles are put in
    above w._panel_actions_end when the grid is installed."""
    bar = w.menuBar()
    w.file_menu = bar.addMenu("")
    keys.fill_menu(w.file_menu, w.actions_by_name, ("watch", "watch_open", None))
    w.export_menu = w.file_menu.addMenu("")
    w.add_export_actions(w.export_menu)
    w.export_menu.menuAction().setEnabled(not w.export_menu.isEmpty())
    w.file_menu.addSeparator()
    keys.fill_menu(w.file_menu, w.actions_by_name, ("session_open", "session_save", None))
    w.file_menu.addAction(w.act_quit)

    w.model_menu = bar.addMenu("")
    keys.fill_menu(w.model_menu, w.actions_by_name, MODEL_MENU)

    w.run_menu = bar.addMenu("")
    keys.fill_menu(w.run_menu, w.actions_by_name, (*keys.RUN_MENU, None, "continue"))

    w.lesson_menu = bar.addMenu("")
    keys.fill_menu(w.lesson_menu, w.actions_by_name, ("lesson_open", "lesson_add", "lesson_edit"))

    w.view_menu = bar.addMenu("")
    w.view_menu.addAction(w.act_present)
    w.view_menu.addAction(w.act_serve)
    w.view_menu.addSeparator()
    w.view_menu.addAction(w.act_narration)
    w.view_menu.addAction(w.form_dock.toggleViewAction())
    w.view_menu.addAction(w.toolbar.toggleViewAction())
    w.view_menu.addSeparator()
    w._panel_actions_end = w.view_menu.addSeparator()  # panel toggles go above this
    # Ctrl+1..9: one panel alone in the grid (as a double-click on its title); Ctrl+Shift+A: all again
    w.alone_menu = w.view_menu.addMenu("")
    w.addAction(w.grid.act_all_panels)
    w.alone_menu.addAction(w.grid.act_all_panels)
    w.alone_menu.addSeparator()
    w.view_menu.addAction(w.act_reset_layout)
    w.zoom_menu = w.view_menu.addMenu("")
    w.zoom_group = QActionGroup(w)
    w.zoom_group.setExclusive(True)
    for act in (w.act_zoom_in, w.act_zoom_out, w.act_zoom_reset):
        w.zoom_menu.addAction(act)
    w.zoom_menu.addSeparator()
    for percent in ZOOMS:
        act = QAction(f"{percent}%", w, checkable=True, checked=percent == 100)
        act.setData(percent)
        w.zoom_group.addAction(act)
        w.zoom_menu.addAction(act)
    w.zoom_group.triggered.connect(lambda act: w.presentation.set_zoom(int(act.data())))
    w.language_menu = w.view_menu.addMenu("")
    w.language_group = QActionGroup(w)
    w.language_group.setExclusive(True)
    w.act_english = QAction("English", w, checkable=True, checked=True)
    w.act_english.setData("en")
    w.language_group.addAction(w.act_english)
    w.language_menu.addAction(w.act_english)

    w.help_menu = bar.addMenu("")
    w.help_menu.addAction(w.act_shortcuts)
    w.help_menu.addAction(w.act_about)


def retranslate_actions(w) -> None:
    """Every action's text and tip (its keys added) and the menus' titles, in the current language."""
    texts = {
        **{getattr(w, f"act_{name}"): (text, "") for name, text in keys.transport_texts().items()},
        w.act_run: (keys.transport_texts()["run"], _tr("Start a compare run of the checked engines")),
        w.act_pause: (keys.pause_text(False), _tr("Pause or resume the run")),
        w.act_step: (keys.transport_texts()["step"], _tr("Run one step of every engine, then pause")),
        w.act_stop: (keys.transport_texts()["stop"], _tr("Stop the run; its steps stay viewable")),
        w.act_prev: (keys.transport_texts()["prev"], _tr("Show the step before")),
        w.act_next: (keys.transport_texts()["next"],
                     _tr("Show the step after; at the newest step of a paused run, compute one more")),
        w.act_open: (_tr("Open checkpoint..."),
                        _tr("Add a model folder (config.json and weights) to the model picker")),
        w.act_download: (_tr("Download model..."),
                         _tr("Fetch a checkpoint from the Hugging Face Hub (or HF_ENDPOINT's mirror) by its id")),
        w.act_focus_prompt: (_tr("Edit prompt"), ""),
        w.act_quit: (_tr("&Quit"), ""),
        w.act_about: (_tr("&About kvviz"), ""),
        w.act_shortcuts: (_tr("&Keyboard shortcuts"), ""),
        w.act_serve: (_tr("&Serve view"), _tr("Many requests, one model: the schedulers side by side")),
        w.act_continue: (_tr("Continue in the Serve view..."),
                         _tr("The text so far and your next message as a chat, served by prefix and paged")),
        w.act_watch: (_tr("Watch a server..."),
                      _tr("Running vLLM servers' state and feeds, live, in a window of their own")),
        w.act_watch_open: (_tr("Open a watch recording..."), _tr("A recording of watched servers, replayed")),
        w.act_lesson_open: (_tr("Open lesson..."), _tr("A lesson presented full screen, its runs made once")),
        w.act_lesson_add: (_tr("Add this view as a scene..."),
                           _tr("The form's run, the step, the panels and the zoom as a scene of a .toml lesson")),
        w.act_lesson_edit: (_tr("Edit scenes..."),
                            _tr("A lesson's scenes reordered, retitled in English and Chinese, or removed")),
        w.act_session_open: (_tr("Open session..."),
                             _tr("A saved session: the form, panels, zoom and step set again, its run replayed")),
        w.act_session_save: (_tr("Save session..."),
                             _tr("The form, panels, zoom and step in a session file, the run as a trace beside it")),
        w.act_memory: (_tr("Memory calculator..."),
                          _tr("What a model's KV cache costs at scale, computed from its config")),
        w.act_reset_layout: (_tr("Reset layout"), _tr("The panels, sizes and docks a run of this kind starts with")),
        w.act_zoom_in: (_tr("Zoom in"), _tr("Text, plots, lines and markers larger, now")),
        w.act_zoom_out: (_tr("Zoom out"), _tr("Text, plots, lines and markers smaller, now")),
        w.act_zoom_reset: (_tr("Zoom 100%"), _tr("Text and plots at their normal size")),
        w.act_narration: (_tr("Step &narration"),
                             _tr("The selected step in words, under the timeline: what each engine "
                                     "computed, read from its cache and moved")),
        w.act_present: (_tr("&Presentation mode"),
                           _tr("Full screen for the panels: the inputs and the status bar hidden")),
    }
    for act, (text, tip) in texts.items():
        act.setText(text)
        act.setProperty("tip", tip or text)
        set_action_tip(act)
    w.alone_menu.setTitle(_tr("Panel &alone"))
    w.file_menu.setTitle(_tr("&File"))
    w.export_menu.setTitle(_tr("&Export"))
    w.model_menu.setTitle(_tr("&Model"))
    w.run_menu.setTitle(_tr("&Run"))
    w.lesson_menu.setTitle(_tr("&Lesson"))
    w.view_menu.setTitle(_tr("&View"))
    w.language_menu.setTitle(_tr("&Language"))
    w.zoom_menu.setTitle(_tr("&Zoom"))
    w.zoom_menu.setToolTip(_tr("Text, plots, lines and markers larger or smaller, at once"))
    w.help_menu.setTitle(_tr("&Help"))
