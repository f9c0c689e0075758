"""A view that draws a whole frame at once from what it shows (the Serve and Watch views): the frame painter's
bookkeeping (a frame drawn only where its key changed, its cost timed, the rest records streaming in wait after
it), the language and the app's zoom (set by the main window's View > Zoom) followed, and its menus (File with
Export, Run, View with its panels). The compare window draws panel by panel (kvviz.ui.frames) and is a plain
ShellWindow. No records, no panels here.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable

from PySide6.QtCore import QCoreApplication, QEvent, QSettings, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QWidget

from kvviz.ui.shell import keys
from kvviz.ui.shell.exports import ShellExports
from kvviz.ui.shell.state import PAINT_REST
from kvviz.ui.shell.window import ShellWindow

FRAMES_KEPT = 10_000  # frame times kept for the benchmarks (the oldest go)


class FramedView(ShellWindow):
    """A view implements `draw_frame()` (bring everything to the selection, through `paint_frame`) and
    `retranslate_ui()` (calling `retranslate_shell()`), and sets `transport`, `grid` (a ShellGrid) and, through
    `build_menus`, `exports`; `redraw_all()` forgets the frame drawn and draws again. `frame_ms` and
    `frame_cpu_ms` hold each frame's wall-clock and GUI-thread CPU time (the benchmarks read them)."""

    frame_drawn = Signal()

    def __init__(self, settings: QSettings | None = None, parent: QWidget | None = None) -> None:
        super().__init__(settings, parent)
        self._drawn: Hashable | None = None  # the key of the frame drawn last
        self.frame_ms: deque[float] = deque(maxlen=FRAMES_KEPT)
        self.frame_cpu_ms: deque[float] = deque(maxlen=FRAMES_KEPT)
        self._frame_cost_s = 0.0  # the last frame's drawing and painting, wall clock

    def paint_frame(self, key: Hashable, draw: Callable[[], None], started: float | None = None) -> bool:
        """Draw (`draw()`) a frame showing `key`, unless the frame drawn last showed it; timed from `started`
        (a perf_counter reading taken before the frame's own preparation) or from now. True if drawn."""
        if key == self._drawn:
            return False
        started = time.perf_counter() if started is None else started
        cpu = time.thread_time()
        self._drawn = key
        draw()
        self.frame_ms.append((time.perf_counter() - started) * 1000)
        self.frame_cpu_ms.append((time.thread_time() - cpu) * 1000)
        # Fires once the event loop has painted what this frame changed: the frame's whole cost.
        QTimer.singleShot(0, lambda: setattr(self, "_frame_cost_s", time.perf_counter() - started))
        self.frame_drawn.emit()
        return True

    def frame_rest_s(self) -> float:
        """How long records streaming in wait before the next frame: PAINT_REST times the last frame's cost, so
        the painting sets the frame rate and never takes the machine from a source."""
        return PAINT_REST * self._frame_cost_s

    def draw_frame(self) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ menus
    def build_menus(self, exports: ShellExports, file_actions: tuple[QAction, ...]) -> None:
        """File (the view's `file_actions`, Export, Close, Quit), Run (the transport's) and an empty View."""
        self.exports = exports
        bar = self.menuBar()
        self.file_menu = bar.addMenu("")
        for act in file_actions:
            self.file_menu.addAction(act)
        self.export_menu = self.file_menu.addMenu("")
        exports.fill_menu(self.export_menu)
        self.file_menu.addSeparator()
        self.file_menu.addAction(self.act_close)
        self.file_menu.addAction(self.act_quit)
        self.run_menu = bar.addMenu("")
        keys.fill_menu(self.run_menu, self.actions_by_name, keys.RUN_MENU)
        self.view_menu = bar.addMenu("")

    def fill_view_menu(self, leading: tuple[QAction, ...] = ()) -> None:
        """View: the `leading` toggles and the toolbar's, then a toggle per panel (its frame drawn when shown)."""
        for act in (*leading, self.toolbar.toggleViewAction()):
            self.view_menu.addAction(act)
        self.view_menu.addSeparator()
        for act in self.grid.panel_actions.values():
            act.toggled.connect(lambda _on: self.draw_frame())
            self.view_menu.addAction(act)

    def retranslate_shell(self) -> None:
        """The shell's parts' texts: the menus' titles (the main window's strings), the toolbar, the run's state,
        the transport, the grid, the exports, Pause's text."""
        for menu, text in ((self.file_menu, "&File"), (self.export_menu, "&Export"), (self.run_menu, "&Run"),
                           (self.view_menu, "&View")):
            menu.setTitle(QCoreApplication.translate("MainWindow", text))
        self.toolbar.retranslate()
        self.toolbar.show_state(self.state)
        self.transport.retranslate()
        self.grid.retranslate()
        self.exports.retranslate()
        self._update_pause_text()

    def redraw_all(self) -> None:
        """Every part drawn again (a new language, a new zoom), even where the selection did not change."""
        self._drawn = None
        self.draw_frame()

    def follow_zoom(self) -> None:
        """The app's zoom changed: the texts (and the plots' axis names, sized at the zoom's type size when
        set) again, and every part drawn at the new sizes (the grid gives way again by itself)."""
        self.retranslate_ui()
        self.redraw_all()

    def retranslate_ui(self) -> None:
        raise NotImplementedError

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.LanguageChange:
            self.retranslate_ui()
            self.redraw_all()
        elif event.type() == QEvent.Type.FontChange:
            # After the app's font: the main window's View > Zoom sets the plots' type size once it has set it.
            QTimer.singleShot(0, self.follow_zoom)
        super().changeEvent(event)
