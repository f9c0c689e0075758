"""The presenter: a lesson full screen, the scene's caption large over its panels (kvviz.ui.lessons.stage).
PageDown / PageUp and the arrow keys (what a clicker sends) walk each scene's steps (its step, then its
bookmarks) and then the scenes; Home / End the first and last scene; B (or .) blanks the screen; P shows or hides
the pointer (the mouse drawn as a large high-contrast spot); L switches English / Chinese; Escape closes.
The runs are the lesson's, loaded before it opens (kvviz.lessons.runs): no torch, no worker here.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPen
from PySide6.QtWidgets import QApplication, QLabel, QVBoxLayout, QWidget

from kvviz.lessons.facts import fill
from kvviz.lessons.lesson import Lesson
from kvviz.lessons.runs import LessonRuns
from kvviz.page.lesson import where_text
from kvviz.ui.lessons.stage import SceneStage

NEXT_KEYS = (Qt.Key.Key_PageDown, Qt.Key.Key_Right, Qt.Key.Key_Down, Qt.Key.Key_Space)
PREV_KEYS = (Qt.Key.Key_PageUp, Qt.Key.Key_Left, Qt.Key.Key_Up, Qt.Key.Key_Backspace)
WARM_AFTER_MS = 60  # the next scene is built once this one is painted
POINTER_PX = 46  # the spot's diameter: seen from the back of a lecture hall


class AppState:
    """The process-wide settings a presenter changes (the panels' zoom, the application's font, the language),
    taken when the first presenter opens and given back when the last one closes, in whatever order they close:
    a presenter opened while another shows a scene would otherwise take that scene's zoom and language as the
    app's own."""

    open_presenters: list[QWidget] = []
    saved: AppState | None = None

    def __init__(self) -> None:
        from kvviz.ui import i18n, style

        self.zoom = round(style.ZOOM * 100)
        self.font = QFont(QApplication.font())
        self.language = i18n.current_language()

    @classmethod
    def opened(cls, presenter: QWidget) -> None:
        if not cls.open_presenters:
            cls.saved = cls()
        cls.open_presenters.append(presenter)

    @classmethod
    def closed(cls, presenter: QWidget) -> None:
        if presenter not in cls.open_presenters:
            return
        cls.open_presenters.remove(presenter)
        if not cls.open_presenters and cls.saved is not None:
            cls.saved.give_back()
            cls.saved = None

    def give_back(self) -> None:
        from kvviz.ui import i18n, style

        if round(style.ZOOM * 100) != self.zoom:
            style.set_zoom(self.zoom)
        if QApplication.font() != self.font:
            QApplication.setFont(self.font)
        if i18n.current_language() != self.language:
            i18n.set_language(self.language)


class Pointer(QWidget):
    """The mouse as a large spot, yellow ringed in black, over everything the presenter shows."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setAttribute(Qt.WidgetAttribute.WA_NoSystemBackground)
        self.at: QPoint | None = None

    def move_to(self, pos: QPoint) -> None:
        self.at = pos
        self.update()

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt override)
        if self.at is None:
            return
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(QColor("#000000"), 4))
        painter.setBrush(QColor(255, 214, 0, 210))
        r = POINTER_PX // 2
        painter.drawEllipse(self.at, r, r)
        painter.end()


class _MouseWatch(QObject):
    """Every mouse move over the presenter's widgets, in the presenter's coordinates; their tooltips kept away."""

    def __init__(self, presenter: PresenterWindow) -> None:
        super().__init__(presenter)
        self.presenter = presenter

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt override)
        ours = isinstance(obj, QWidget) and obj.window() is self.presenter
        if not ours:
            return False
        kind = event.type()
        if kind == QEvent.Type.MouseMove:
            self.presenter.pointer.move_to(self.presenter.mapFromGlobal(event.globalPosition().toPoint()))
        elif kind == QEvent.Type.KeyPress:  # the clicker's keys, whichever panel has the focus (a text view
            return self.presenter.handle_key(event.key())  # would take PageDown to scroll itself)
        return kind == QEvent.Type.ToolTip  # no panel's help pops up over the lecture


class PresenterWindow(QWidget):
    """A lesson presented: `move(+1/-1)` walks stops and scenes; `scene_drawn` fires after each draw."""

    scene_drawn = Signal(int, int)  # scene index (from 0), stop

    def __init__(self, lesson: Lesson, runs: LessonRuns, lang: str = "en", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.lesson, self.runs, self.lang = lesson, runs, lang
        self.scene_index, self.stop = 0, 0
        self.setObjectName("lesson_presenter")
        self.setWindowTitle(f"kvviz: {lesson.text(lang)}")
        self.setStyleSheet("#lesson_presenter { background: #efefef; }")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        self.where = QLabel()
        self.where.setObjectName("lesson_where")
        self.where.setStyleSheet("QLabel { background: #f6f6f6; color: #505050; padding: 3px 12px; }")
        self.title = QLabel()
        self.title.setObjectName("lesson_title")
        self.caption = QLabel()
        self.caption.setObjectName("lesson_caption")
        self.caption.setWordWrap(True)
        for label in (self.title, self.caption):
            label.setStyleSheet("QLabel { background: #fffdf3; color: #202020; padding: 4px 16px; }")
            label.setTextInteractionFlags(Qt.TextInteractionFlag.NoTextInteraction)
        self.stage = SceneStage(self)
        layout.addWidget(self.where)
        layout.addWidget(self.title)
        layout.addWidget(self.caption)
        layout.addWidget(self.stage, 1)
        self.blank = QWidget(self)
        self.blank.setObjectName("lesson_blank")
        self.blank.setStyleSheet("background: black;")
        self.blank.hide()
        self.pointer = Pointer(self)
        self.setMouseTracking(True)
        self._watch = _MouseWatch(self)
        QApplication.instance().installEventFilter(self._watch)
        AppState.opened(self)  # before the presenter sets its language and zoom
        self._fit_fonts()
        self.set_language(lang)

    # -- moving -----------------------------------------------------------------------------------
    @property
    def scene(self):
        return self.lesson.scenes[self.scene_index]

    def stops(self) -> list[tuple[int, int]]:
        """Every (scene, stop) PageDown visits, in order."""
        return [(i, k) for i, s in enumerate(self.lesson.scenes) for k in range(len(s.stops))]

    def move(self, delta: int) -> bool:
        """One stop on (+1) or back (-1); False at either end."""
        order = self.stops()
        i = order.index((self.scene_index, self.stop)) + delta
        if not 0 <= i < len(order):
            return False
        self.scene_index, self.stop = order[i]
        self.draw()
        return True

    def go_to(self, scene: int, stop: int = 0) -> None:
        self.scene_index, self.stop = scene, stop
        self.draw()

    def step(self) -> int:
        return self.runs.step(self.scene, self.stop)

    def set_language(self, lang: str) -> None:
        """The captions and the panels' own words (the app's translations, kvviz.ui.i18n) in `lang`."""
        from kvviz.ui import i18n

        self.lang = lang
        i18n.set_language("zh_CN" if lang == "zh" else "en")
        self.setWindowTitle(f"kvviz: {self.lesson.text(lang)}")
        self.stage.retranslate()
        self.draw()

    # -- drawing ----------------------------------------------------------------------------------
    def _fit_fonts(self) -> None:
        """The caption's type from the window's height: about 2.6% of it (28 px at 1080), the title larger."""
        h = max(self.height(), 480)
        font = QFont(self.font())
        font.setPixelSize(max(14, round(h * 0.026)))
        self.caption.setFont(font)
        bold = QFont(font)
        bold.setPixelSize(round(font.pixelSize() * 1.3))
        bold.setBold(True)
        self.title.setFont(bold)

    def draw(self) -> None:
        scene, run = self.scene, self.runs.of(self.scene)
        step = self.step()
        self.title.setText(scene.text("title", self.lang))
        self.caption.setText(fill(scene.text("caption", self.lang), run.facts()))
        self.where.setText(where_text(self.scene_index, len(self.lesson.scenes), step, self.stop, len(scene.stops),
                                      run.kind == "memory", self.lang, self.lesson.text(self.lang)))
        self.stage.draw(scene, run, step, self.lang)
        self.scene_drawn.emit(self.scene_index, self.stop)
        QTimer.singleShot(WARM_AFTER_MS, self.warm_next)  # after this scene is on the screen

    def warm_next(self) -> None:
        """The next scene's page built and drawn while this one is presented, so PageDown only shows it."""
        i = self.scene_index + 1
        if i < len(self.lesson.scenes) and self in AppState.open_presenters:  # not once closed: it sets the zoom
            scene = self.lesson.scenes[i]
            self.stage.warm_up(scene, self.runs.of(scene), self.runs.step(scene, 0), self.lang)

    # -- keys, blank, pointer ---------------------------------------------------------------------
    def keyPressEvent(self, event) -> None:  # noqa: N802 (Qt override)
        if not self.handle_key(event.key()):
            super().keyPressEvent(event)

    def handle_key(self, key) -> bool:
        """Act on a presenter's key; False for any other key."""
        if key in NEXT_KEYS:
            self.move(1)
        elif key in PREV_KEYS:
            self.move(-1)
        elif key == Qt.Key.Key_Home:
            self.go_to(0)
        elif key == Qt.Key.Key_End:
            self.go_to(len(self.lesson.scenes) - 1)
        elif key in (Qt.Key.Key_B, Qt.Key.Key_Period):
            self.set_blank(not self.blank.isVisible())
        elif key == Qt.Key.Key_P:
            self.set_pointer(not self.pointer.isVisible())
        elif key == Qt.Key.Key_L:
            self.set_language("zh" if self.lang == "en" else "en")
        elif key == Qt.Key.Key_Escape:
            self.close()
        else:
            return False
        return True

    def set_blank(self, on: bool) -> None:
        self.blank.setGeometry(self.rect())
        self.blank.setVisible(on)
        if on:
            self.blank.raise_()

    def set_pointer(self, on: bool) -> None:
        self.pointer.setVisible(on)
        self.setCursor(Qt.CursorShape.BlankCursor if on else Qt.CursorShape.ArrowCursor)
        if on:
            self.pointer.raise_()

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self.blank.setGeometry(self.rect())
        self.pointer.setGeometry(self.rect())
        self.pointer.raise_()
        self._fit_fonts()

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        QApplication.instance().removeEventFilter(self._watch)
        AppState.closed(self)  # the app's zoom, font and language as before the first presenter opened
        super().closeEvent(event)


def present(lesson: Lesson, runs: LessonRuns, lang: str = "en") -> int:
    """`kvviz lesson FILE`: the presenter full screen until it is closed."""
    from kvviz.ui import qtapp as app

    if not app.has_display():
        raise ValueError("no display to present on (set DISPLAY, or export with --export/--pdf)")
    qapp = app.ensure_app()
    window = PresenterWindow(lesson, runs, lang)
    window.set_pointer(True)
    window.setGeometry(qapp.primaryScreen().geometry())  # the whole screen even where no window manager sizes it
    window.showFullScreen()
    return qapp.exec()
