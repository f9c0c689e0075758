"""The app on a projector: presentation mode (F11: full screen for the panels, the Inputs dock and the
status bar hidden, Esc leaves it) and View > Zoom (Ctrl+plus / Ctrl+minus / Ctrl+0: the app's font
and the grid's plot text, lines and markers, live, saved for the next start). It changes the
window's docks, state and fonts; it knows nothing of runs."""
from __future__ import annotations

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QAction, QFont, QKeySequence
from PySide6.QtWidgets import QApplication, QLayout, QMainWindow, QWidget

from kvviz.ui.qtutil import blocked
from kvviz.ui.shell.keys import set_action_tip
from kvviz.ui.zoom import ZOOM_KEY, check_zoom, next_zoom


class Presentation(QObject):
    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self.window = window
        self.zoom = 100  # percent: View > Zoom's choice in effect
        self._base_font = QFont(QApplication.font())  # the app's font at 100%
        self._dock_width: int | None = None  # the Inputs dock's width at the zoom asked, until it is set
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

    # ------------------------------------------------------------------ zoom
    def set_zoom(self, percent: int, *, save: bool = True) -> None:
        """View > Zoom, Ctrl+plus / Ctrl+minus / Ctrl+0: the app's font and the panels' plot text, lines
        and markers at percent, now. The run, the step and the layout stay; nothing restarts and no
        environment variable is set (a restart had inherited QT_SCALE_FACTOR and come back at the old
        zoom). Saved for the next start unless `save` is False (`kvviz --zoom` is for one launch)."""
        w = self.window
        percent = check_zoom(int(percent))
        before, self.zoom = self.zoom, percent
        QApplication.setFont(zoomed_font(self._base_font, percent))
        repolish_styled()
        w.grid.set_zoom(percent)
        if save:
            w.settings.setValue(ZOOM_KEY, percent)
        self._show_zoom_choice(percent)
        # The widths measured from the font (the progress text, the Inputs dock's minimum) once the
        # widgets have taken it, after this turn of the event loop (measured now, they lagged a zoom).
        if w.isVisible():  # at launch the saved dock width is already the saved zoom's
            width = self._dock_width if self._dock_width is not None else w.form_dock.width()
            self._dock_width = round(width * percent / before)  # two keys in one turn: scaled twice
        QTimer.singleShot(0, self._fit_to_font)
        w.frames.redraw_all()

    def _fit_to_font(self) -> None:
        w = self.window
        for layout in w.findChildren(QLayout):  # their cached sizes are the old font's until invalidated
            layout.invalidate()
        w.retranslate_ui()
        if self._dock_width is not None:
            # The Inputs dock grows and shrinks with its text: its minimum follows the font, its width not.
            w.resizeDocks([w.form_dock], [self._dock_width], Qt.Orientation.Horizontal)
            self._dock_width = None

    def zoom_step(self, direction: int) -> None:
        """One of View > Zoom's choices larger (+1) or smaller (-1)."""
        self.set_zoom(next_zoom(self.zoom, direction))

    def _show_zoom_choice(self, percent: int) -> None:
        w = self.window
        acts = {int(act.data()): act for act in w.zoom_group.actions()}
        if percent not in acts:  # `kvviz --zoom 140`: a choice of its own, in order
            act = QAction(f"{percent}%", w, checkable=True)
            act.setData(percent)
            w.zoom_group.addAction(act)
            after = [a for p, a in sorted(acts.items()) if p > percent]
            w.zoom_menu.insertAction(after[0] if after else None, act)
            acts[percent] = act
        acts[percent].setChecked(True)  # the group unchecks the others (a setChecked is no trigger)


def repolish_styled() -> None:
    """A widget with a style sheet keeps the font it was polished with (the panels' bold titles, the
    badge, the progress bar, the error strip stayed at 100%): each is polished again at the app's font."""
    for top in QApplication.topLevelWidgets():
        for widget in (top, *top.findChildren(QWidget)):
            sheet = widget.styleSheet()
            if sheet:
                widget.setStyleSheet(sheet)


def zoomed_font(base: QFont, percent: int) -> QFont:
    """The app's font at percent of its size at 100%."""
    font = QFont(base)
    if base.pointSizeF() > 0:
        font.setPointSizeF(base.pointSizeF() * percent / 100)
    elif base.pixelSize() > 0:
        font.setPixelSize(max(1, round(base.pixelSize() * percent / 100)))
    return font
