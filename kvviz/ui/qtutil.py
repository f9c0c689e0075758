"""Small Qt helpers the window's parts share: a module's translator, silencing a widget's signals for a
programmatic change, telling a field that takes typed keys from one that leaves them to the transport's shortcuts,
and raising a companion window (the Serve or the Watch window of a main window)."""
from __future__ import annotations

from collections.abc import Callable
from functools import partial

from PySide6.QtCore import QCoreApplication, QObject, Qt
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QComboBox,
    QLineEdit,
    QPlainTextEdit,
    QSlider,
    QTextEdit,
    QWidget,
)


def translator(context: str) -> Callable[[str], str]:
    """A module's `_tr = translator("Context")`: text in the app's language, translated in `context` when called
    (scripts/update_translations.py reads the context from that line)."""
    return partial(QCoreApplication.translate, context)


class blocked:  # noqa: N801 (used as a statement: `with blocked(widget):`)
    """`with blocked(widget):` silences its signals for a programmatic change."""

    def __init__(self, obj: QObject) -> None:
        self.obj = obj

    def __enter__(self) -> QObject:
        self._old = self.obj.blockSignals(True)
        return self.obj

    def __exit__(self, *exc) -> None:
        self.obj.blockSignals(self._old)


def timeline_slider(name: str, chosen) -> QSlider:
    """A view's step slider, named `name`, calling `chosen(value)` as the user moves it; it takes no focus:
    Left/Right belong to the window's keys."""
    slider = QSlider(Qt.Orientation.Horizontal)
    slider.setObjectName(name)
    slider.setRange(0, 0)
    slider.setPageStep(10)
    slider.setFocusPolicy(Qt.FocusPolicy.NoFocus)
    slider.valueChanged.connect(chosen)
    return slider


def set_timeline(slider: QSlider, n: int, value: int) -> None:
    """The slider over n steps (0..n-1) at `value`, silently (the window chose them)."""
    with blocked(slider):
        slider.setMaximum(max(0, n - 1))
        slider.setValue(value)


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


def companion_window(main, attr: str, make) -> QWidget:
    """The window `main.<attr>` (one per main window), made by `make()` on first use; shown and raised."""
    window = getattr(main, attr, None)
    if window is None:
        window = make()
        setattr(main, attr, window)
    window.show()
    window.raise_()
    window.activateWindow()
    return window
