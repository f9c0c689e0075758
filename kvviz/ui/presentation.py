"""The app on a projector: presentation mode (F11: full screen for the panels, the Inputs dock and the
status bar hidden, Esc leaves it) and View > Zoom (saved, applied from the next start, with an offer
to restart now). It changes the window's docks and state; it knows nothing of runs or panels."""
from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QObject, QProcess, Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QMainWindow, QMessageBox

from kvviz.ui.actions import set_action_tip
from kvviz.ui.qtutil import blocked
from kvviz.ui.zoom import ZOOM_KEY, zoom_in_effect


def _tr(text: str) -> str:
    return QCoreApplication.translate("MainWindow", text)


class Presentation(QObject):
    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self.window = window
        self.zoom_note: QMessageBox | None = None  # View > Zoom's note that a new zoom applies next start
        self._presenting: tuple | None = None  # in presentation mode: (dock state, window state) before it

    def _give_escape(self, presenting: bool) -> None:
        """In presentation mode Esc leaves it, as it leaves full screen everywhere else (a teacher's
        Esc had stopped the run instead); Stop keeps its button and menu item. Esc is Stop's again after."""
        w = self.window
        escape = QKeySequence(Qt.Key.Key_Escape)
        stop = [k for k in w.act_stop.shortcuts() if k != escape]
        present = [k for k in w.act_present.shortcuts() if k != escape]
        w.act_stop.setShortcuts(stop if presenting else [escape, *stop])
        w.act_present.setShortcuts([*present, escape] if presenting else present)
        for act in (w.act_stop, w.act_present):
            set_action_tip(act)

    def set(self, on: bool, *, full_screen: bool = True) -> None:
        """Presentation mode (F11): the panels get the screen. Full screen, the Inputs dock and the
        status bar hidden; the menus, the transport and the timeline stay, so a run can be started,
        paused and scrubbed. Leaving it puts back what was shown before and the window's own state."""
        w = self.window
        with blocked(w.act_present):
            w.act_present.setChecked(on)
        if on == (self._presenting is not None):
            return
        if on:
            self._presenting = (w.saveState(), w.windowState(), full_screen)
            w.form_dock.hide()
            w.statusBar().hide()
            w.setFocus()  # not a box of the form's neighbours: Space, arrows and F11 reach the window
            if full_screen:
                w.setWindowState(w.windowState() | Qt.WindowState.WindowFullScreen)
        else:
            state, window_state, was_full = self._presenting
            self._presenting = None
            if was_full:
                w.setWindowState(window_state)
            w.restoreState(state)
            w.statusBar().show()
        self._give_escape(on)

    def active(self) -> bool:
        return self._presenting is not None

    def choose_zoom(self, percent: int) -> None:
        """View > Zoom: saved, and applied from the next start (Qt's scale factor is fixed at launch)."""
        w = self.window
        w.settings.setValue(ZOOM_KEY, percent)
        for act in w.zoom_group.actions():
            with blocked(act):
                act.setChecked(act.data() == percent)
        now = zoom_in_effect()
        if percent == now:
            return
        self.zoom_note = note = QMessageBox(QMessageBox.Icon.Information, _tr("Zoom"), _tr(
            "kvviz opens at {percent}% from its next start (now {now}%): text, plots and controls all "
            "scale, as on a projector.").format(percent=percent, now=now), QMessageBox.StandardButton.NoButton,
            w)
        if w.restart_argv:
            restart = note.addButton(_tr("Restart now"), QMessageBox.ButtonRole.AcceptRole)
            restart.setToolTip(_tr("Close kvviz and open it again at the new zoom (the steps shown are not kept)"))
            restart.clicked.connect(self.restart)
        note.addButton(_tr("Later") if w.restart_argv else _tr("OK"), QMessageBox.ButtonRole.RejectRole)
        note.open()  # not modal to the app: the run goes on

    def restart(self) -> bool:
        """Open kvviz again with the command line that started it, then close this window (its
        settings saved, its worker stopped). False, and nothing closed, if it cannot be started."""
        w = self.window
        if not w.restart_argv:
            return False
        program, *args = w.restart_argv
        w.save_settings()  # the new process reads them
        if not QProcess.startDetached(program, args):
            w.show_error(_tr("Could not start kvviz again: {command}").format(
                command=" ".join(w.restart_argv)))
            return False
        w.close()
        return True
