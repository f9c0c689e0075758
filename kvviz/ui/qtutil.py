"""Small Qt helpers the window's parts share: silencing a widget's signals for a programmatic change,
telling a field that takes typed keys from one that leaves them to the transport's shortcuts, and the tab
strip under a grid that gave way (the main window's and the Serve view's)."""
from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QObject
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QComboBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSplitter,
    QTabBar,
    QTextEdit,
    QWidget,
)


class blocked:  # noqa: N801 (used as a statement: `with blocked(widget):`)
    """`with blocked(widget):` silences its signals for a programmatic change."""

    def __init__(self, obj: QObject) -> None:
        self.obj = obj

    def __enter__(self) -> QObject:
        self._old = self.obj.blockSignals(True)
        return self.obj

    def __exit__(self, *exc) -> None:
        self.obj.blockSignals(self._old)


def edits_text(widget: QWidget | None) -> bool:
    """Whether the widget (or the field it is part of) takes typed keys: a text box, a spin box, a combo.
    Such a field keeps Space, arrows and letters; anything else leaves them to the transport."""
    while widget is not None:
        if isinstance(widget, (QLineEdit, QAbstractSpinBox, QComboBox)):
            return True
        if isinstance(widget, (QTextEdit, QPlainTextEdit)):
            return not widget.isReadOnly()
        widget = widget.parentWidget()
    return False


def show_moved_tabs(tabs: QTabBar, note: QLabel, strip: QWidget, grid_name: str, moved: list[tuple[str, str]],
                    current: str) -> None:
    """The tabs under a grid that gave way (kvviz.ui.giveway): the grid's own (`grid_name`), then one per panel
    moved behind a tab (`moved`: (key, title) pairs, each tab's data its key), the one showing `current` ("" for
    the grid) selected without a signal; the note saying why they are there; the strip shown only with some."""
    names = [grid_name] + [title for _key, title in moved]
    keys = [""] + [key for key, _title in moved]
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
    if moved:  # the strings of the main window's grid (context PanelGrid), the Serve view's too
        note.setText(QCoreApplication.translate(
            "PanelGrid", "{n} panels behind tabs (no room to show them readable):").format(n=len(moved)))
        note.setToolTip(QCoreApplication.translate(
            "PanelGrid", "The window has no room to show these panels readable at this size and zoom, so they wait "
            "behind their tabs instead of being squeezed. A larger window, a smaller zoom (View > Zoom) or fewer "
            "panels (View) brings them back into the grid."))
    if strip.isHidden() == bool(moved):  # only a change: a setVisible that changes nothing still lays out again
        strip.setVisible(bool(moved))


def place_frames(rows: list[QSplitter], layout: list[list[str]], frames: dict[str, QWidget], parking: QWidget) -> None:
    """A grid's frames into its rows as give_way laid them out (`layout`: keys, row by row; `rows` at least as
    many); a frame not laid out waits, hidden, on `parking`, so a row holds exactly its laid-out panels; a row
    with none is hidden. The main window's grid and the Serve view's."""
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
