"""The window's actions and menus: what each action does, its keys, its text and tip in the current
language. Functions of the window (`w`), which keeps the actions as attributes (`w.act_run`, ...)."""
from __future__ import annotations

from PySide6.QtCore import QCoreApplication
from PySide6.QtGui import QAction, QActionGroup, QKeySequence

from kvviz.ui.app import quit_app
from kvviz.ui.dialogs.download import show_download_dialog
from kvviz.ui.zoom import ZOOMS


def _tr(text: str) -> str:
    return QCoreApplication.translate("MainWindow", text)


def build_actions(w) -> None:
    """The window's actions, each with its keys and what it does, added to the window so their
    shortcuts work with the menu bar hidden."""
    def action(slot, *keys: str | QKeySequence.StandardKey, checkable: bool = False) -> QAction:
        act = QAction(w)
        sequences = {QKeySequence(k).toString(): QKeySequence(k) for k in keys}  # a key given twice: once
        act.setShortcuts(list(sequences.values()))
        act.setCheckable(checkable)
        act.triggered.connect(slot)
        w.addAction(act)  # shortcuts work even with the menu bar hidden
        return act

    w.act_run = action(lambda: w.start_run(), "Ctrl+R", "F5")
    w.act_pause = action(lambda: w.toggle_pause(), "Space")
    w.act_step = action(lambda: w.step_once(), "N")
    w.act_stop = action(lambda: w.stop_run(), "Esc")
    w.act_prev = action(lambda: w.scrub(-1), "Left")
    w.act_next = action(lambda: w.next_step(), "Right")
    w.act_back10 = action(lambda: w.scrub(-10), "PgUp")
    w.act_fwd10 = action(lambda: w.scrub(10), "PgDown")
    w.act_first = action(lambda: w.select_step(0), "Home")
    w.act_last = action(lambda: w.follow_live(), "End")
    w.act_faster = action(lambda: w.toolbar.change_speed(+1), "]")
    w.act_slower = action(lambda: w.toolbar.change_speed(-1), "[")
    w.act_open = action(lambda: w.open_checkpoint(), QKeySequence.StandardKey.Open)
    w.act_download = action(lambda: show_download_dialog(w))
    w.act_focus_prompt = action(lambda: w.form.prompt_edit.setFocus(), "Ctrl+L")
    # Ctrl+Q as well: the platform's Quit key is not Ctrl+Q everywhere (offscreen: none). The app quits: every
    # window closes (the Serve view, the calculator), workers and engine processes end, the process exits.
    w.act_quit = action(lambda: quit_app(), QKeySequence.StandardKey.Quit, "Ctrl+Q")
    w.act_about = action(lambda: w._show_about())
    w.act_shortcuts = action(lambda: w.show_shortcuts(), QKeySequence.StandardKey.HelpContents, "Ctrl+/")
    w.act_memory = action(lambda: w.show_memory_calculator(), "Ctrl+M")

    def serve_view(continued: bool = False) -> None:  # imported when asked: it brings pyqtgraph
        from kvviz.ui.serve.hook import continue_in_serve_view, open_serve_view

        if continued:
            continue_in_serve_view(w)
        else:
            open_serve_view(w)

    w.act_serve = action(lambda: serve_view(), "Ctrl+Shift+V")
    w.act_continue = action(lambda: serve_view(continued=True))
    # Ctrl+0 is the zoom's 100%, as in browsers; the start layout has a key of its own.
    w.act_reset_layout = action(lambda: w.reset_layout(), "Ctrl+Shift+L")
    w.act_zoom_in = action(lambda: w.presentation.zoom_step(+1), QKeySequence.StandardKey.ZoomIn, "Ctrl++", "Ctrl+=")
    w.act_zoom_out = action(lambda: w.presentation.zoom_step(-1), QKeySequence.StandardKey.ZoomOut, "Ctrl+-")
    w.act_zoom_reset = action(lambda: w.presentation.set_zoom(100), "Ctrl+0")
    w.act_present = action(lambda checked=False: w.presentation.set(checked), "F11", checkable=True)
    w.act_narration = action(lambda checked=False: w.transport.show_narration(checked), checkable=True)
    w.act_narration.setChecked(True)


def build_menus(w) -> None:
    """File, Model, Run, View (panels, zoom, language) and Help; the panels' toggles are put in
    above w._panel_actions_end when the grid is installed."""
    bar = w.menuBar()
    w.file_menu = bar.addMenu("")
    w.export_menu = w.file_menu.addMenu("")
    w.add_export_actions(w.export_menu)
    w.export_menu.menuAction().setEnabled(not w.export_menu.isEmpty())
    w.file_menu.addSeparator()
    w.file_menu.addAction(w.act_quit)

    w.model_menu = bar.addMenu("")
    w.model_menu.addAction(w.act_open)
    w.model_menu.addAction(w.act_download)
    w.model_menu.addAction(w.act_memory)

    w.run_menu = bar.addMenu("")
    for act in (w.act_run, w.act_pause, w.act_step, w.act_stop, None, w.act_faster,
                w.act_slower, None, w.act_prev, w.act_next, w.act_back10, w.act_fwd10,
                w.act_first, w.act_last):
        if act is None:
            w.run_menu.addSeparator()
        else:
            w.run_menu.addAction(act)
    w.run_menu.addSeparator()
    w.run_menu.addAction(w.act_continue)

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
        w.act_run: (_tr("&Run"), _tr("Start a compare run of the checked engines")),
        w.act_pause: (_tr("&Pause"), _tr("Pause or resume the run")),
        w.act_step: (_tr("&Step"), _tr("Run one step of every engine, then pause")),
        w.act_stop: (_tr("S&top"), _tr("Stop the run; its steps stay viewable")),
        w.act_prev: (_tr("Previous step"), _tr("Show the step before")),
        w.act_next: (_tr("Next step"),
                        _tr("Show the step after; at the newest step of a paused run, compute one more")),
        w.act_back10: (_tr("Back 10 steps"), ""),
        w.act_fwd10: (_tr("Forward 10 steps"), ""),
        w.act_first: (_tr("First step"), ""),
        w.act_last: (_tr("Newest step (follow the run)"), ""),
        w.act_faster: (_tr("Faster"), ""),
        w.act_slower: (_tr("Slower"), ""),
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
    w.view_menu.setTitle(_tr("&View"))
    w.language_menu.setTitle(_tr("&Language"))
    w.zoom_menu.setTitle(_tr("&Zoom"))
    w.zoom_menu.setToolTip(_tr("Text, plots, lines and markers larger or smaller, at once"))
    w.help_menu.setTitle(_tr("&Help"))


def set_action_tip(act: QAction) -> None:
    """The action's tooltip (the "tip" property retranslate_actions set) with its keys, as they are now."""
    keys = ", ".join(k.toString(QKeySequence.SequenceFormat.NativeText) for k in act.shortcuts())
    tip = act.property("tip") or act.text()
    act.setToolTip(f"{tip} ({keys})" if keys else tip)
