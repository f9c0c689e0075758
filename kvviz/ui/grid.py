"""The compare window's grid: the shell's grid (kvviz.ui.shell.grid.ShellGrid) over the compare panels, built after
the window's first paint, each panel's readable size measured from its plots, Ctrl+1..9 for one panel alone, the
sizes the user dragged each arrangement to kept (and saved), and the drawing of the shown panels at one step of a
RunHistory. It knows panels, frames and splitters; not the run form, the transport or the worker."""
from __future__ import annotations

import time
import traceback

from PySide6.QtCore import QCoreApplication, QEvent, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QLabel, QSplitter, QWidget

from kvviz import catalog
from kvviz.ui.history import RunHistory
from kvviz.ui.panels import PANELS
from kvviz.ui.qtutil import blocked
from kvviz.ui.shell.giveway import HANDLE_PX, bands, share
from kvviz.ui.shell.grid import GridSpec, ShellGrid, place_frames

PANEL_MIN_SIZE = (140, 110)  # a frame's least size: a panel whose content grows is clipped, not the window widened

# Hidden until wanted: the quality panel shows nothing but zeros for exact caches, and a ninth panel
# made the grid five columns wide (too narrow at 1280x720). A run with an approximate cache shows it.
DEFAULT_HIDDEN = ("quality", "speculation")

# The rows, priorities and readable sizes come from the panels themselves (PanelGrid.plan, readable_size).
COMPARE_GRID = GridSpec("compare", PANELS, (), {}, deferred=True, scrolls=False)


def has_speculation(history: RunHistory) -> bool:
    """Whether the run has a speculative engine (its records say how many tokens it drafts)."""
    return any(traces and traces[0].spec_k is not None for traces in history.traces.values())


def has_quality(history: RunHistory) -> bool:
    """Whether the run has something for the quality panel: an approximate engine, or a step with a
    quality figure (a saved trace's)."""
    for engine, traces in history.traces.items():
        measured = traces and (traces[0].kl_to_exact is not None or traces[-1].kl_to_exact is not None)
        if not catalog.is_exact(engine) or measured:
            return True
    return False


class PanelGrid(ShellGrid):
    """The shell's grid with the compare panels. `install()` builds them (once, after the window's first paint);
    `draw()` brings the shown ones to a step. The settings hold the panels hidden in View and the sizes dragged
    (`save`, read by `install`)."""

    step_picked = Signal(int)  # a click in a panel picked a step (the timeline's job to show it)
    installed = Signal()

    def __init__(self, settings: QSettings, parent: QWidget | None = None) -> None:
        super().__init__(COMPARE_GRID, parent)
        self.settings = settings
        self.alone_actions: dict[str, QAction] = {}  # Ctrl+1..9: one panel alone
        # all again (Ctrl+0 is the zoom's 100%, as in browsers)
        self.act_all_panels = QAction(self)
        self.act_all_panels.setShortcut(QKeySequence("Ctrl+Shift+A"))
        self.act_all_panels.triggered.connect(lambda: self.show_checked_panels())
        self.no_panels_label = QLabel()
        self.no_panels_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.body.insertWidget(0, self.no_panels_label)  # first: a saved grid state keeps the rows' places
        self._overhead: dict[tuple, tuple[int, int]] = {}  # (panel, zoom) -> what its frame holds besides plots
        self._drawn_shape: dict[str, tuple] = {}  # panel -> (plot grid, legend height, own size) when last drawn
        self._checks = 0  # layout checks since the last resize (see _check_layout)
        self._check_timer = QTimer(self)
        self._check_timer.setSingleShot(True)
        self._check_timer.setInterval(0)
        self._check_timer.timeout.connect(self._check_layout)
        self.chosen: set[str] = set(settings.value("view/chosen_panels", "", type=str).split(",")) - {""}
        self._arrangement: str | None = None  # the shown panels, "+"-joined, that the grid is laid out for
        self._layouts: dict[str, tuple] = {}  # arrangement -> (grid state, row states) the user left it at
        # Drawing: (history version, step) each panel last drew, panels still showing the previous run
        # (cleared when next drawn), each frame's pyqtgraph scenes, panels whose warm-up may have work left.
        self.painted: dict[str, tuple[int, int]] = {}
        self._last_draw: tuple[RunHistory, int] | None = None  # the history and step last drawn
        self._run: RunHistory | None = None  # the history the panels show (kept across forget_run)
        self.zoom = 100  # percent: the panels' plot text, lines and readable sizes (set_zoom)
        self._zoomed_items: dict[str, int] = {}  # panel -> items in its scenes when last zoomed
        self._stale: set[str] = set()
        self._scenes: dict[str, list] = {}
        self.warming: list[str] = []

    # ------------------------------------------------------------------ building
    def install(self) -> bool:
        """Build every registered panel, its View toggle and its 'alone' action, and lay the shown ones
        out (once; False if already done). The panels hidden and the sizes dragged come from settings."""
        if self.is_installed:
            return False
        self.is_installed = True
        from kvviz.ui import style  # pyqtgraph: imported with the panels

        self.zoom = round(style.ZOOM * 100)  # the panels are built at the zoom in effect
        self.build_panels()
        for i, (key, frame) in enumerate(self.frames.items()):
            frame.setMinimumSize(*PANEL_MIN_SIZE)
            frame.panel.step_picked.connect(self.step_picked)  # a click in a plot, as the timeline would
            self.panel_actions[key].triggered.connect(lambda _checked=False, k=key: self.chosen.add(k))
            alone = QAction(self)
            if i < 9:
                alone.setShortcut(QKeySequence(f"Ctrl+{i + 1}"))
            alone.triggered.connect(lambda _checked=False, k=key: self.show_alone(k))
            self.alone_actions[key] = alone
        s = self.settings
        hidden = set(s.value("view/hidden_panels", ",".join(DEFAULT_HIDDEN), type=str).split(","))
        for key, act in self.panel_actions.items():
            with blocked(act):
                act.setChecked(key not in hidden)
        if s.contains("window/grid"):  # the sizes the user dragged the saved arrangement to
            rows = [s.value(f"window/row{i}") for i in range(2) if s.contains(f"window/row{i}")]
            # Settings from before arrangements were kept had the sizes of every panel shown.
            saved_for = s.value("window/grid_panels", "+".join(self.frames), type=str)
            self._layouts[saved_for] = (s.value("window/grid"), rows)
        self.retranslate()
        self.arrange()
        self.painted.clear()
        self.warming = list(self.panels)
        self.installed.emit()
        return True

    def panel_toggled(self) -> None:
        """A panel shown or hidden in View: no panel alone any more."""
        self.show_checked_panels()

    def retranslate(self) -> None:
        super().retranslate()
        self._update_no_panels_text()
        for key, frame in self.frames.items():
            self.alone_actions[key].setText(frame.panel.title())
            # Help > Keyboard shortcuts names what the key does, not only the menu item's text.
            self.alone_actions[key].setProperty("shortcut_help", self.tr("{panel} alone in the grid").format(
                panel=frame.panel.title()))
        if self.is_installed:  # the legends and titles of another language take other room
            self._checks = 0
            self._check_timer.start()
        self.act_all_panels.setText(self.tr("All panels"))
        self.act_all_panels.setProperty("shortcut_help", self.tr("All panels in the grid again"))

    # ------------------------------------------------------------------ arrangement
    def shown_panels(self) -> list[str]:
        """The panels the grid shows, in registry order: those checked in View, or the focused one alone."""
        return [k for k, act in self.panel_actions.items() if act.isChecked() and self._focused in ("", k)]

    def arrange(self) -> None:
        """Lay the shown panels out as a grid: up to three in one row, more in two rows (the first the
        longer), so panels hidden in View give the others their room. Where the grid cannot give
        every shown panel its readable size, the most important keep it and the rest wait behind
        tabs under the grid (give_way), which says so. Each arrangement keeps the sizes the user
        dragged it to where they stay readable; a new one starts with the readable sizes and the
        room left shared out equally."""
        if not self.is_installed:
            return  # nothing to lay out before the panels are built
        shown = self.shown_panels()
        rows, self.moved = self.plan()
        if self._tab and self._tab not in self.moved:
            self._tab = ""
        if self._tab:
            rows = [[self._tab]]
        laid = [k for row in rows for k in row]
        key = "+".join(laid) + "/" + ",".join(str(len(row)) for row in rows)
        self._update_strip()
        if key == self._arrangement:
            self._fit_sizes(rows)
            return
        if self._arrangement is not None:
            self._layouts[self._arrangement] = self.grid_state()
        self._arrangement = key
        while len(self.rows) < len(rows):
            self.add_row()
        place_frames(self.rows, rows, self.frames, self._parking)
        self.no_panels_label.setVisible(not shown)
        grid, states = self._layouts.get(self._saved_key(key), (None, []))
        if grid is not None:
            self.body.restoreState(grid)
            for r, row in enumerate(self.rows[:len(rows)]):
                if r < len(states) and states[r] is not None:
                    row.restoreState(states[r])
            self.strip.setVisible(bool(self.moved))
            self._fit_sizes(rows)
        else:
            self._fit_sizes(rows, fresh=True)
        self._update_no_panels_text()
        self._checks = 0
        self._check_timer.start()

    def _saved_key(self, key: str) -> str:
        """Settings from before give-way keyed an arrangement by its panels alone."""
        if key in self._layouts:
            return key
        return key.split("/")[0] if key.split("/")[0] in self._layouts else key

    def add_row(self) -> QSplitter:
        row = super().add_row()
        row.splitterMoved.connect(lambda *_a: self._check_timer.start())  # a drag may leave a panel short
        return row

    # -- giving way (ShellGrid.plan: the usual rows where they read, else give_way by the panels' priority) --
    def readable_size(self, key: str) -> tuple[int, int]:
        """The smallest frame in which the panel reads at the present zoom: its declared size, or its
        plots' readable areas plus what its frame holds around them (measured when it was last laid
        out, else estimated from the type sizes)."""
        from kvviz.ui import style

        panel, frame = self.panels[key], self.frames[key]
        margins = frame.layout().contentsMargins()
        header = frame.header.sizeHint().height() + frame.layout().spacing() + margins.top() + margins.bottom()
        fixed = panel.readable_size()
        if fixed is not None:
            return fixed[0] + margins.left() + margins.right(), fixed[1] + header
        across, down = panel.plot_grid()
        width, height = panel.readable_plot()
        over = self._overhead.get((key, self.zoom))
        if over is None:  # an axis with its numbers and name; titles and a step axis
            over = (style.px(74) + style.px(10) * (across - 1), header + style.px(24) * down + style.px(30))
        need_w = over[0] + across * width
        return need_w, over[1] + self._legend_height(key, need_w) + down * height

    def _legends(self, key: str) -> list:
        from kvviz.ui.panels._plots import LegendLabel

        return [label for label in self.frames[key].findChildren(LegendLabel) if not label.isHidden()]

    def _legend_height(self, key: str, width: int) -> int:
        """The height the panel's legends take at this frame width (they wrap as it narrows)."""
        return sum(max(0, label.heightForWidth(max(40, width - 12))) for label in self._legends(key)
                   if label.text())

    def plot_boxes(self, key: str) -> list:
        """The data areas (QRect, in the frame's pixels) of the panel's plots shown now."""
        import pyqtgraph as pg

        frame = self.frames[key]
        boxes = []
        for item in self.panels[key].readable_items():
            if not isinstance(item, pg.PlotItem) or not item.isVisible() or item.opacity() == 0:
                continue
            box = item.getViewBox()
            views = [v for v in box.scene().views() if v.isVisible()]
            if views and box.width() > 1:
                rect = views[0].mapFromScene(box.sceneBoundingRect()).boundingRect()
                rect.moveTopLeft(views[0].viewport().mapTo(frame, rect.topLeft()))
                boxes.append(rect)
        return boxes

    def _measure(self, key: str) -> bool:
        """Keep what the panel's frame holds around its plots (the frame less its plots' readable
        share); True if the panel is now below its readable size."""
        panel, frame = self.panels[key], self.frames[key]
        if panel.readable_size() is not None:
            fixed = self.readable_size(key)
            return frame.width() < fixed[0] - 1 or frame.height() < fixed[1] - 1
        boxes = self.plot_boxes(key)
        if not boxes or not frame.isVisible():
            return False
        # What the frame holds besides its plots, with the plots as they are laid out now (a grid of
        # views takes the shape its cell suits) and each counted as small as the smallest (a grid of
        # plots shares its height unevenly: the titled top row's views are the shorter).
        w, h = min(b.width() for b in boxes), min(b.height() for b in boxes)
        across = bands([b.left() for b in boxes], w)  # columns: lefts more than half a plot apart
        down = bands([b.top() for b in boxes], h)
        legends = sum(label.height() for label in self._legends(key) if label.text())
        self._overhead[(key, self.zoom)] = (frame.width() - across * w, frame.height() - down * h - legends)
        need = panel.readable_plot()
        return min(b.width() for b in boxes) < need[0] - 1 or min(b.height() for b in boxes) < need[1] - 1

    def _check_layout(self) -> None:
        """After a layout: measure the laid-out panels, and give way again where one is below its
        readable size (a legend that wrapped to more lines than estimated). A few rounds at most."""
        if not self.is_installed or not self.isVisible():
            return
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        from kvviz.ui.panels._plots import settle

        settle([scene for k in self.laid_out() for scene in self._scenes_of(k)])
        short = [k for k in self.laid_out() if self._measure(k)]  # measured: what each frame holds around its plots
        self._checks += 1
        rows, _moved = self.plan()
        if self._checks <= 3 and (short or (rows != self.laid_rows() and not self._tab)):
            checks = self._checks
            self.arrange()  # with the sizes measured now
            self._checks = checks
            self._check_timer.start()

    def _check_if_grown(self, key: str) -> None:
        """A draw that changed what a panel needs (a run's engines gave the work matrix four views, its
        legends took more lines): check the layout again once the frame is painted."""
        panel = self.panels[key]
        shape = (panel.plot_grid(), sum(label.height() for label in self._legends(key) if label.text()),
                 panel.readable_size())
        if self._drawn_shape.get(key) != shape:
            self._drawn_shape[key] = shape
            self._checks = 0
            self._check_timer.start()

    def _scenes_of(self, key: str) -> list:
        from kvviz.ui.panels._plots import scenes_in

        if key not in self._scenes:
            self._scenes[key] = scenes_in(self.frames[key])
        return self._scenes[key]

    def _fit_sizes(self, rows: list[list[str]], fresh: bool = False) -> None:
        """Row heights and column widths that give every laid-out panel its readable size: the sizes
        kept (dragged, restored) where they do, else each its need and the rest shared out."""
        shown = bool(rows)
        self.strip.setVisible(bool(self.moved))
        if not fresh and (not self.isVisible() or self.width() < 50):
            return  # restored sizes stay until the grid has a size of its own to check them against
        if not shown:
            self.body.setSizes([1000] + [0] * len(self.rows))
            return
        needs = {k: self.readable_size(k) for row in rows for k in row}
        width, height = self.room(strip=bool(self.moved))
        heights = [max(needs[k][1] for k in row) for row in rows]
        current = self.body.sizes()[1:1 + len(rows)]
        if fresh or any(c < h for c, h in zip(current, heights)) or sum(current) <= 0:
            if fresh:  # equal rows while they read, as the grid always began
                equal = (height - HANDLE_PX * (len(rows) - 1)) // len(rows)
                sized = [equal] * len(rows) if all(equal >= h for h in heights) else share(height, heights)
            else:
                sized = share(height, heights)
            self.body.setSizes([0, *sized, *[0] * (len(self.rows) - len(rows))])
        for r, members in enumerate(rows):
            row = self.rows[r]
            widths = [needs[k][0] for k in members]
            current = row.sizes()[:len(members)]
            if fresh or any(c < w for c, w in zip(current, widths)) or sum(current) <= 0:
                room = width - HANDLE_PX * (len(members) - 1)
                equal = room // len(members)
                row.setSizes([equal] * len(members) if fresh and all(equal >= w for w in widths)
                             else share(width, widths))

    def _on_tab_changed(self, index: int) -> None:
        super()._on_tab_changed(index)
        self.redraw()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        QWidget.resizeEvent(self, event)  # laid out now, not on the shell's next turn: the checks follow it
        if self.is_installed:
            self._checks = 0
            self.arrange()
            self._check_timer.start()

    def grid_state(self) -> tuple:
        return self.body.saveState(), [row.saveState() for row in self.rows]

    def _update_no_panels_text(self) -> None:
        if not self.is_installed:
            text = self.tr("Loading the panels...")
        elif not self.frames:
            text = self.tr("No panels registered yet")
        else:
            text = self.tr("Every panel is hidden: show some in the View menu")
        self.no_panels_label.setText(text)

    def show_alone(self, key: str) -> None:
        """This panel alone in the grid (shown first if View had hidden it); Ctrl+Shift+A shows all again."""
        self.panel_actions[key].setChecked(True)
        if self._focused != key:
            self.toggle_focus(key)

    def show_checked_panels(self) -> None:
        """No panel alone any more: the grid shows the panels checked in View."""
        self._focused = ""
        self.arrange()

    def show_unless_chosen(self, key: str) -> bool:
        """Show a panel hidden by default (DEFAULT_HIDDEN), unless the user chose in View to hide it;
        True if it was shown now."""
        act = self.panel_actions.get(key)
        if act is None or act.isChecked() or key in self.chosen:
            return False
        act.setChecked(True)
        return True

    def start_panels(self, history: RunHistory | None = None) -> list[str]:
        """The panels a run starts with: all but DEFAULT_HIDDEN, the quality panel too where the run shown
        (history; by default the one last drawn) has an approximate engine or quality figures, and the
        speculation panel where it has a speculative engine."""
        history = self._run if history is None else history
        keys = [k for k in self.panel_actions if k not in DEFAULT_HIDDEN]
        if history is not None and "quality" in self.panel_actions and has_quality(history):
            keys.append("quality")
        if history is not None and "speculation" in self.panel_actions and has_speculation(history):
            keys.append("speculation")
        return [k for k in self.panel_actions if k in keys]

    def reset(self, history: RunHistory | None = None) -> None:
        """The start layout for the run shown (start_panels), none alone, the grid tab, equal rows
        and columns where they read; the sizes dragged forgotten."""
        self._layouts.clear()
        self._focused = ""
        self._tab = ""
        self.chosen.clear()
        start = self.start_panels(history)
        for key, act in self.panel_actions.items():
            with blocked(act):
                act.setChecked(key in start)
        self._arrangement = None  # forgotten: laid out afresh, in equal rows and columns
        self.arrange()
        self.redraw()

    def save(self, settings: QSettings) -> None:
        """The panels hidden in View and the sizes of the checked panels' arrangement (not of a panel
        alone by a double-click)."""
        checked = "+".join(k for k, a in self.panel_actions.items() if a.isChecked())
        laid = (self._arrangement or "").split("/")[0]
        if laid == checked and not self.moved:
            grid, rows = self.grid_state()
        else:
            found = [k for k in self._layouts if k.split("/")[0] == checked]
            grid, rows = self._layouts[found[-1]] if found else (None, [])
        for i in range(2):
            settings.remove(f"window/row{i}")
        if grid is not None:
            settings.setValue("window/grid", grid)
            settings.setValue("window/grid_panels", checked)
            for i, row in enumerate(rows):
                settings.setValue(f"window/row{i}", row)
        settings.setValue("view/chosen_panels", ",".join(sorted(self.chosen)))
        settings.setValue("view/hidden_panels",
                          ",".join(k for k, a in self.panel_actions.items() if not a.isChecked()))

    # ------------------------------------------------------------------ drawing
    def forget_run(self) -> None:
        """A new run starts: each panel forgets the last one when it is next drawn, not all at once
        here (eight panels cleared together repainted in one ~60 ms frame as a run's steps began)."""
        self._stale = set(self.panels)
        self.painted.clear()
        self._last_draw = None
        for frame in self.frames.values():
            if frame.error:
                frame.error = ""
                frame.retranslate()

    def clear_stale(self) -> None:
        """A run that ended before its first step: the panels forget the last one now."""
        for key in sorted(self._stale):
            self.panels[key].clear()
        self._stale.clear()

    # ------------------------------------------------------------------ zoom
    def set_zoom(self, percent: int) -> None:
        """Rescale every panel's plot text (ticks, axis names, titles, legends' swatches), line widths
        and markers to percent (View > Zoom, Ctrl+plus / minus), live: the run and the step shown stay,
        and the shown panels are drawn again at once."""
        from kvviz.ui import style  # pyqtgraph: imported with the panels

        percent = int(percent)
        if percent == self.zoom and style.ZOOM == percent / 100:
            return
        self.zoom = percent
        style.set_zoom(percent)
        if not self.is_installed:
            return  # the panels are built at this zoom
        for key, panel in self.panels.items():
            panel.apply_zoom()
            self._zoom_panel(key, force=True)
            self.frames[key].retranslate()
        self._update_strip()  # the tabs' type follows the app font; the sizes needed follow the zoom
        self._checks = 0
        self.arrange()
        self._check_timer.start()
        self.redraw()

    def redraw(self) -> None:
        """Draw the shown panels again at the step last drawn (after a zoom, a layout change)."""
        self.painted.clear()
        if self._last_draw is not None:
            history, step = self._last_draw
            self.draw(history, step, (history.version, step))

    def _zoom_panel(self, key: str, force: bool = False) -> None:
        """The panel's plot items at the zoom: all of them when asked, else only when items were added
        since (a run's new curves and labels); nothing to do at 100% for items never zoomed."""
        from kvviz.ui import style
        from kvviz.ui.panels._plots import zoom_items

        count = sum(len(scene.items()) for scene in self._scenes_of(key))
        if force or (style.ZOOM != 1.0 and count != self._zoomed_items.get(key)):
            zoom_items(self._scenes_of(key))
            self._zoomed_items[key] = count

    def draw(self, history: RunHistory, step: int, target: tuple[int, int]) -> dict[str, float]:
        """Draw every shown panel not already at `target` ((history version, step)) at `step`.
        Returns {panel: seconds its show_step took}."""
        drawn: dict[str, float] = {}
        for key in self.panels:
            if self.painted.get(key) == target or self.frames[key].isHidden():
                continue
            t = time.perf_counter()
            self.draw_panel(key, history, step)
            drawn[key] = time.perf_counter() - t
            self.painted[key] = target
        return drawn

    def draw_panel(self, key: str, history: RunHistory, step: int) -> None:
        self._last_draw = (history, step)
        self._run = history
        try:
            if key in self._stale:
                self._stale.discard(key)
                self.panels[key].clear()
            self.panels[key].show_step(history, step)
            from kvviz.ui.panels._plots import settle  # pyqtgraph: imported with the panels

            self._zoom_panel(key)
            settle(self._scenes_of(key))  # painted once per draw (see settle)
            self._check_if_grown(key)
        except Exception as exc:  # one broken panel must not take the window down
            frame = self.frames[key]
            if not frame.error:
                traceback.print_exc()
                frame.show_error(f"{type(exc).__name__}: {exc}")

    def warm_up_one(self, engines: tuple[str, ...], positions: int) -> bool:
        """One piece of a panel's warm-up for these engines, on an idle tick; False once all are done."""
        while self.warming:
            key = self.warming[0]
            if self.panels[key].warm_up(engines, positions):
                return True
            self.warming.pop(0)
        return False
