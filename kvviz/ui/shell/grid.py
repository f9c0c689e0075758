"""What every view's panel grid shares: its panels built from a registry of "module:Class" entries (a
broken one reported, not fatal), the rows of splitters the give-way plan fills (place_frames), and the
strip of tabs under the grid that holds the panels with no readable room (MovedStrip). The layout policy
(which rows, which sizes) is each grid's; kvviz.ui.shell.giveway is its arithmetic."""
from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable

from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QSplitter, QTabBar, QWidget

from kvviz.ui.qtutil import blocked
from kvviz.ui.shell.panel import Panel


def load_panels(registry, on_error: Callable[[str], None]) -> dict[str, Panel]:
    """Every registered panel that imports and builds, by key ((key, "module:Class") pairs); a panel
    without a key of its own takes its entry's. A broken one is printed and told to `on_error`."""
    panels: dict[str, Panel] = {}
    for key, spec in registry:
        module_name, _, class_name = spec.partition(":")
        try:
            panel = getattr(importlib.import_module(module_name), class_name)()
        except Exception as exc:
            traceback.print_exc()
            on_error(f"{key}: {type(exc).__name__}: {exc}")
            continue
        panel.key = panel.key or key
        panels[key] = panel
    return panels


class MovedStrip(QWidget):
    """The tabs under a grid that gave way: the grid's own, then one per panel moved behind a tab (each
    tab's data its key), and the note saying why they are there (its whole story the tooltip)."""

    def __init__(self, tabs_name: str, note_name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(2, 0, 2, 0)
        self.tabs = QTabBar()
        self.tabs.setObjectName(tabs_name)
        self.tabs.setDrawBase(False)
        self.tabs.setExpanding(False)
        self.note = QLabel()
        self.note.setObjectName(note_name)
        self.note.setWordWrap(False)
        self.note.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Preferred)  # never widens the window
        layout.addWidget(self.note)  # first: many tabs scroll, the note stays in sight
        layout.addWidget(self.tabs, 1)

    def show_moved(self, grid_name: str, moved: list[tuple[str, str]], current: str) -> None:
        """The grid's tab (`grid_name`), one per moved panel ((key, title) pairs), the one showing `current`
        ("" for the grid) selected without a signal; the strip shown only with some."""
        names = [grid_name] + [title for _key, title in moved]
        keys = [""] + [key for key, _title in moved]
        tabs = self.tabs
        with blocked(tabs):
            while tabs.count() > len(names):
                tabs.removeTab(tabs.count() - 1)
            for i, name in enumerate(names):
                if i < tabs.count():
                    tabs.setTabText(i, name)
                else:
                    tabs.addTab(name)
                tabs.setTabData(i, keys[i])
            tabs.setCurrentIndex(keys.index(current) if current in keys else 0)
        if moved:  # the strings of the main window's grid (context PanelGrid), every view's
            self.note.setText(QCoreApplication.translate(
                "PanelGrid", "{n} panels behind tabs (no room to show them readable):").format(n=len(moved)))
            self.note.setToolTip(QCoreApplication.translate(
                "PanelGrid", "The window has no room to show these panels readable at this size and zoom, so they "
                "wait behind their tabs instead of being squeezed. A larger window, a smaller zoom (View > Zoom) or "
                "fewer panels (View) brings them back into the grid."))
        if self.isHidden() == bool(moved):  # only a change: a setVisible that changes nothing still lays out again
            self.setVisible(bool(moved))


def place_frames(rows: list[QSplitter], layout: list[list[str]], frames: dict[str, QWidget], parking: QWidget) -> None:
    """A grid's frames into its rows as give_way laid them out (`layout`: keys, row by row; `rows` at least as
    many); a frame not laid out waits, hidden, on `parking`, so a row holds exactly its laid-out panels; a row
    with none is hidden."""
    laid = {k for row in layout for k in row}
    for k, frame in frames.items():
        if k not in laid:
            frame.setParent(parking)
            frame.hide()
    for r, row in enumerate(rows):
        members = layout[r] if r < len(layout) else []
        for i, k in enumerate(members):
            row.insertWidget(i, frames[k])
            frames[k].show()
        row.setVisible(bool(members))
