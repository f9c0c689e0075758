"""Lesson > Edit scenes...: a lesson file's scenes listed, moved up and down, retitled in English and Chinese and
removed, then saved in one write (kvviz.lessons.lesson.edit_scenes: checked first, a temporary name renamed over
the file). Knows the lesson format's editing functions; nothing of runs or panels.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from kvviz.lessons import BUILTIN_DIR, LessonError, load_lesson
from kvviz.lessons.lesson import edit_scenes
from kvviz.ui.qtutil import translator

_tr = translator("ScenesDialog")


def _lang() -> str:
    from kvviz.ui import i18n

    return "zh" if i18n.current_language() == "zh_CN" else "en"


def check_editable(path: str | Path) -> Path:
    """`path` if it is a lesson kvviz may rewrite: ValueError (one line) for a built-in lesson (shipped with
    kvviz, shared by every user of this installation), which is copied first and the copy edited."""
    path = Path(path)
    if path.resolve().parent == BUILTIN_DIR.resolve():
        raise ValueError(_tr("{0} is a built-in lesson: save a copy of it elsewhere and edit the copy")
                         .format(path.name))
    return path


class TitleDialog(QDialog):
    """A scene's title in English (required) and Chinese (optional)."""

    def __init__(self, parent: QWidget, title: dict[str, str]) -> None:
        super().__init__(parent)
        self.setObjectName("scene_title_dialog")
        self.setWindowTitle(_tr("Rename scene"))
        self.english = QLineEdit(title.get("en", ""))
        self.english.setObjectName("title_en")
        self.english.setToolTip(_tr("The title shown in English (required)"))
        self.chinese = QLineEdit(title.get("zh", ""))
        self.chinese.setObjectName("title_zh")
        self.chinese.setToolTip(_tr("The title shown in Chinese (empty: the English one is shown)"))
        fields = QFormLayout()
        fields.addRow(_tr("English:"), self.english)
        fields.addRow(_tr("Chinese:"), self.chinese)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(fields)
        layout.addWidget(buttons)
        self.resize(520, self.sizeHint().height())

    def title(self) -> dict[str, str]:
        return {"en": self.english.text().strip(), "zh": self.chinese.text().strip()}


class ScenesDialog(QDialog):
    """The scenes of one lesson file: `move_selected(±1)`, `rename_selected(en, zh)`, `remove_selected()` change
    the list; `save()` writes the file (False, and the reason in one line under the list, when it is refused)."""

    def __init__(self, parent: QWidget | None, path: str | Path) -> None:
        super().__init__(parent)
        self.setObjectName("scenes_dialog")
        self.path = check_editable(path)
        self.lesson = load_lesson(self.path)  # LessonError, one line, for a file that is no lesson
        self.plan: list[tuple[int, dict[str, str]]] = [(s.index, dict(s.title)) for s in self.lesson.scenes]
        self.setWindowTitle(_tr("Edit scenes: {0}").format(self.path.name))
        self.heading = QLabel()
        self.heading.setObjectName("scenes_heading")
        self.heading.setWordWrap(True)
        self.list = QListWidget()
        self.list.setObjectName("scenes_list")
        self.list.setToolTip(_tr("The lesson's scenes in the order PageDown presents them"))
        self.list.currentRowChanged.connect(self._update_buttons)
        self.list.itemDoubleClicked.connect(lambda _item: self.ask_title())
        self.list.installEventFilter(self)  # the keys where the list has them first (it moves on Ctrl+arrows)
        self.up = self._button(_tr("Up"), _tr("Present the selected scene one earlier"), "Ctrl+Up",
                               lambda: self.move_selected(-1))
        self.down = self._button(_tr("Down"), _tr("Present the selected scene one later"), "Ctrl+Down",
                                 lambda: self.move_selected(+1))
        self.rename = self._button(_tr("Rename..."), _tr("The selected scene's title in English and Chinese"),
                                   "F2", self.ask_title)
        self.remove = self._button(_tr("Remove"), _tr("Take the selected scene out of the lesson"),
                                   QKeySequence.StandardKey.Delete, self.remove_selected)
        self.save_button = self._button(_tr("Save"), _tr("Write the lesson file with these scenes"),
                                        QKeySequence.StandardKey.Save, self.save)
        self.close_button = self._button(_tr("Close"), _tr("Close; unsaved changes are asked about"), "Escape",
                                         self.reject)
        self.error = QLabel()
        self.error.setObjectName("scenes_error")
        self.error.setStyleSheet("QLabel { color: #b00020; }")
        self.error.hide()
        side = QVBoxLayout()
        for button in (self.up, self.down, self.rename, self.remove):
            side.addWidget(button)
        side.addStretch(1)
        middle = QHBoxLayout()
        middle.addWidget(self.list, 1)
        middle.addLayout(side)
        bottom = QHBoxLayout()
        bottom.addStretch(1)
        bottom.addWidget(self.save_button)
        bottom.addWidget(self.close_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.heading)
        layout.addLayout(middle, 1)
        layout.addWidget(self.error)
        layout.addLayout(bottom)
        self.saved_plan = list(self.plan)
        self._fill(0)
        self.resize(780, 440)

    def _button(self, text: str, tip: str, key, slot) -> QPushButton:
        button = QPushButton(text)
        button.setAutoDefault(False)
        if key:
            button.setShortcut(QKeySequence(key))
            shown = button.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
            tip = f"{tip} ({shown})"
        button.setToolTip(tip)
        button.clicked.connect(slot)
        return button

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 (Qt override)
        """The buttons' keys pressed in the list (Ctrl+Up / Ctrl+Down, F2, Delete) are the list's to act on, once:
        their shortcuts are held back (the override taken) and the key press clicks the button."""
        kind = event.type()
        if obj is self.list and kind in (QEvent.Type.ShortcutOverride, QEvent.Type.KeyPress):
            for button in (self.up, self.down, self.rename, self.remove):
                if QKeySequence(event.keyCombination()) == button.shortcut():
                    event.accept()
                    if kind == QEvent.Type.KeyPress and button.isEnabled():
                        button.click()
                    return kind == QEvent.Type.KeyPress
        return super().eventFilter(obj, event)

    # -- the list ------------------------------------------------------------------------------------
    @property
    def changed(self) -> bool:
        return self.plan != self.saved_plan

    def titles(self) -> list[str]:
        """The scenes' English titles, in the list's order."""
        return [title["en"] for _, title in self.plan]

    def _fill(self, row: int) -> None:
        self.list.clear()
        for i, (number, title) in enumerate(self.plan, start=1):
            text = f"{i}.  {title['en']}" + (f"   ·   {title['zh']}" if title.get("zh") else "")
            if number != i:
                text += "   " + _tr("(was {0})").format(number)
            self.list.addItem(text)
        self.list.setCurrentRow(max(0, min(row, len(self.plan) - 1)))
        heading = _tr("{0}: {1} scene in {2}{3}") if len(self.plan) == 1 else _tr("{0}: {1} scenes in {2}{3}")
        self.heading.setText(heading.format(
            self.lesson.text(_lang()), len(self.plan), self.path, _tr(" (not saved)") if self.changed else ""))
        self._update_buttons()

    def _update_buttons(self, *_args) -> None:
        row = self.list.currentRow()
        self.up.setEnabled(row > 0)
        self.down.setEnabled(0 <= row < len(self.plan) - 1)
        self.rename.setEnabled(row >= 0)
        self.remove.setEnabled(row >= 0 and len(self.plan) > 1)  # a lesson keeps at least one scene
        self.save_button.setEnabled(self.changed)

    def move_selected(self, delta: int) -> None:
        row = self.list.currentRow()
        to = row + delta
        if row < 0 or not 0 <= to < len(self.plan):
            return
        self.plan[row], self.plan[to] = self.plan[to], self.plan[row]
        self._fill(to)

    def rename_selected(self, english: str, chinese: str = "") -> bool:
        """The selected scene retitled; False (and the reason shown) for an empty English title."""
        row = self.list.currentRow()
        if row < 0:
            return False
        if not english.strip():
            self.show_error(_tr("a scene's title needs English text"))
            return False
        title = {"en": english.strip(), **({"zh": chinese.strip()} if chinese.strip() else {})}
        self.plan[row] = (self.plan[row][0], title)
        self.show_error("")
        self._fill(row)
        return True

    def ask_title(self) -> None:
        row = self.list.currentRow()
        if row < 0:
            return
        dialog = TitleDialog(self, self.plan[row][1])
        if dialog.exec() == QDialog.DialogCode.Accepted:
            title = dialog.title()
            self.rename_selected(title["en"], title["zh"])
        dialog.deleteLater()
        self.activateWindow()  # the keys are the list's again (with no window manager nothing gives focus back)
        self.list.setFocus()

    def remove_selected(self) -> None:
        row = self.list.currentRow()
        if row < 0 or len(self.plan) < 2:
            return
        del self.plan[row]
        self._fill(row)

    # -- saving --------------------------------------------------------------------------------------
    def show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.setVisible(bool(text))

    def save(self) -> bool:
        """The lesson file written with the list's scenes, order and titles; False, with the one-line reason under
        the list, where the lesson would refuse them or the file cannot be written (it is then as it was)."""
        originals = {s.index: s.title for s in self.lesson.scenes}
        plan = [(number, None if title == originals[number] else title) for number, title in self.plan]
        try:
            self.lesson = edit_scenes(self.path, plan)
        except (LessonError, ValueError, OSError) as exc:
            self.show_error(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            return False
        self.plan = [(s.index, dict(s.title)) for s in self.lesson.scenes]
        self.saved_plan = list(self.plan)
        self.show_error("")
        self._fill(self.list.currentRow())
        return True

    def reject(self) -> None:
        """Close, Escape and the window's close button: unsaved changes asked about (Save, Discard, Cancel)."""
        if self.changed:
            answer = QMessageBox.question(
                self, self.windowTitle(), _tr("Save the changed scenes to {0}?").format(self.path.name),
                QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard
                | QMessageBox.StandardButton.Cancel, QMessageBox.StandardButton.Save)
            if answer == QMessageBox.StandardButton.Cancel or (
                    answer == QMessageBox.StandardButton.Save and not self.save()):
                return
        super().reject()


def edit_scenes_dialog(parent: QWidget, path: str | Path | None = None) -> ScenesDialog | None:
    """The dialog on the lesson at `path` (asked for when None), shown window-modal; None when cancelled, or with a
    one-line message box for a file it cannot edit."""
    if path is None:
        from PySide6.QtWidgets import QFileDialog

        path, _ = QFileDialog.getOpenFileName(parent, _tr("Edit scenes"), "", _tr("Lessons (*.toml *.json)"))
        if not path:
            return None
    try:
        dialog = ScenesDialog(parent, path)
    except (LessonError, ValueError) as exc:
        QMessageBox.warning(parent, _tr("Edit scenes"), str(exc))
        return None
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.open()
    return dialog
