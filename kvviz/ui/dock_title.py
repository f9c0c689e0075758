"""A dock's title bar that follows the app's zoom: the title in the dock's font and the float and close buttons as
tall as its line (Qt's own title bar draws the title in the font the dock was made with and its buttons at a fixed
size, whatever the zoom). Knows nothing of what the dock holds."""
from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import (
    QAbstractButton,
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QStyle,
    QStyleOptionToolButton,
    QWidget,
)


class DockTitleButton(QAbstractButton):
    """A title-bar button drawn as Qt draws its own (an icon, on a panel while under the mouse or pressed), at the
    icon size it is given."""

    def __init__(self, icon: QStyle.StandardPixmap, parent: QWidget) -> None:
        super().__init__(parent)
        self.setIcon(self.style().standardIcon(icon, None, self))
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        margin = self.style().pixelMetric(QStyle.PixelMetric.PM_DockWidgetTitleBarButtonMargin, None, self)
        return self.iconSize() + QSize(2 * margin, 2 * margin)

    def enterEvent(self, event) -> None:  # noqa: N802 (Qt override)
        self.update()
        super().enterEvent(event)

    def leaveEvent(self, event) -> None:  # noqa: N802 (Qt override)
        self.update()
        super().leaveEvent(event)

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt override)
        painter = QPainter(self)
        opt = QStyleOptionToolButton()
        opt.initFrom(self)
        opt.state |= QStyle.StateFlag.State_AutoRaise
        hovered = self.isEnabled() and self.underMouse()
        if (hovered or self.isDown()) and self.style().styleHint(QStyle.StyleHint.SH_DockWidget_ButtonsHaveFrame,
                                                                 None, self):
            # a panel only under the mouse or pressed (Fusion draws one for any enabled tool button otherwise)
            opt.state |= QStyle.StateFlag.State_Sunken if self.isDown() else QStyle.StateFlag.State_Raised
            self.style().drawPrimitive(QStyle.PrimitiveElement.PE_PanelButtonTool, opt, painter, self)
        opt.icon = self.icon()
        opt.iconSize = self.iconSize()
        opt.subControls = QStyle.SubControl.SC_None
        opt.activeSubControls = QStyle.SubControl.SC_None
        opt.features = QStyleOptionToolButton.ToolButtonFeature.None_
        opt.arrowType = Qt.ArrowType.NoArrow
        self.style().drawComplexControl(QStyle.ComplexControl.CC_ToolButton, opt, painter, self)
        painter.end()


class DockTitleBar(QWidget):
    """The title (the dock's window title) and the buttons its features allow. Each button is as tall as the title's
    line, its icon that less the style's button margins (10 px at the default 9 pt font, as Qt's own); the bar is
    the line and the style's title margins. A drag or a double-click on it moves or floats the dock as Qt's does."""

    def __init__(self, dock: QDockWidget) -> None:
        super().__init__(dock)
        self.dock = dock
        self.title = QLabel(dock.windowTitle())
        self.float_button = DockTitleButton(QStyle.StandardPixmap.SP_TitleBarNormalButton, self)
        self.float_button.clicked.connect(lambda: dock.setFloating(not dock.isFloating()))
        self.close_button = DockTitleButton(QStyle.StandardPixmap.SP_TitleBarCloseButton, self)
        self.close_button.clicked.connect(dock.close)
        margin = self.style().pixelMetric(QStyle.PixelMetric.PM_DockWidgetTitleMargin, None, dock)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(margin + 2, margin, margin, margin)
        layout.setSpacing(1)
        layout.addWidget(self.title, 1)
        layout.addWidget(self.float_button)
        layout.addWidget(self.close_button)
        dock.windowTitleChanged.connect(self.title.setText)
        dock.featuresChanged.connect(self._show_features)
        self._show_features(dock.features())
        self._fit_to_font()
        self.retranslate()

    def retranslate(self) -> None:
        self.float_button.setAccessibleName(self.tr("Float"))
        self.close_button.setAccessibleName(self.tr("Close"))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
        if event.type() == QEvent.Type.FontChange:
            self._fit_to_font()
        elif event.type() == QEvent.Type.LanguageChange:
            self.retranslate()
        super().changeEvent(event)

    def _fit_to_font(self) -> None:
        margin = self.style().pixelMetric(QStyle.PixelMetric.PM_DockWidgetTitleBarButtonMargin, None, self)
        side = max(1, self.fontMetrics().height() - 2 * margin)
        for button in (self.float_button, self.close_button):
            button.setIconSize(QSize(side, side))
            button.updateGeometry()

    def _show_features(self, features: QDockWidget.DockWidgetFeature) -> None:
        feature = QDockWidget.DockWidgetFeature
        self.float_button.setVisible(bool(features & feature.DockWidgetFloatable))
        self.close_button.setVisible(bool(features & feature.DockWidgetClosable))


def zooming_title_bar(dock: QDockWidget) -> DockTitleBar:
    """Give `dock` a title bar that follows the app's font (View > Zoom)."""
    bar = DockTitleBar(dock)
    dock.setTitleBarWidget(bar)
    return bar
