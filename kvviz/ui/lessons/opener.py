"""Lesson > Open from a window: pick a lesson file (or a built-in one), make the runs it lacks in a child
`kvviz lesson FILE --check` (the engines stay out of the window's process), then present it full screen.
Knows the lesson files, the command line and the presenter; no torch.
"""
from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QProcess
from PySide6.QtWidgets import QFileDialog, QMessageBox, QProgressDialog, QWidget

from kvviz.lessons import BUILTIN_DIR, LessonError, LessonRuns, load_lesson, runs_dir
from kvviz.lessons.runs import missing_runs

# The lessons' own words in both languages, as the lesson files give theirs (no entry in the app's .ts).
WORDS = {
    "Open lesson": "打开课程",
    "Lessons (*.toml *.json)": "课程 (*.toml *.json)",
    "Making the lesson's runs (once: they are kept beside it)...":
        "正在生成课程所需的运行（只需一次，结果保存在课程旁）……",
    "Cancel": "取消",
    "cancelled": "已取消",
}


def _word(text: str) -> str:
    from kvviz.ui import i18n

    return WORDS.get(text, text) if i18n.current_language() == "zh_CN" else text


def choose_lesson(parent: QWidget | None) -> Path | None:
    """A lesson file from a file dialog that opens on the built-in lessons; None when cancelled."""
    name, _ = QFileDialog.getOpenFileName(parent, _word("Open lesson"), str(BUILTIN_DIR),
                                          _word("Lessons (*.toml *.json)"))
    return Path(name) if name else None


def make_runs(path: Path, parent: QWidget | None = None) -> str:
    """Run `kvviz lesson PATH --check` in a child process (it makes the missing runs) behind a progress dialog;
    "" when it succeeded, else its one-line error."""
    proc = QProcess(parent)
    proc.setProgram(sys.executable)
    proc.setArguments(["-m", "kvviz", "lesson", str(path), "--check"])
    proc.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
    dialog = QProgressDialog(_word("Making the lesson's runs (once: they are kept beside it)..."), _word("Cancel"),
                             0, 0, parent)
    dialog.setWindowTitle(_word("Open lesson"))
    dialog.canceled.connect(proc.kill)
    proc.finished.connect(dialog.reset)
    proc.start()
    dialog.exec()
    proc.waitForFinished(-1)
    lines = bytes(proc.readAll()).decode("utf-8", "replace").strip().splitlines()
    if proc.exitStatus() != QProcess.ExitStatus.NormalExit:
        return _word("cancelled")
    return "" if proc.exitCode() == 0 else (lines[-1] if lines else f"exit code {proc.exitCode()}")


def open_lesson(parent: QWidget | None = None, path: str | Path | None = None, lang: str = "en"):
    """Lesson > Open: the presenter full screen on the chosen lesson, or None (cancelled, or a message shown)."""
    from kvviz.ui.lessons.presenter import PresenterWindow

    path = Path(path) if path is not None else choose_lesson(parent)
    if path is None:
        return None
    try:
        lesson = load_lesson(path)
        folder = runs_dir(lesson)
        if missing_runs(lesson, folder):
            problem = make_runs(path, parent)
            if problem:
                raise LessonError(problem)
        runs = LessonRuns(lesson, folder)
        runs.load_all()
    except LessonError as exc:
        QMessageBox.warning(parent, _word("Open lesson"), str(exc))
        return None
    window = PresenterWindow(lesson, runs, lang)
    window.set_pointer(True)
    screen = (parent.screen() if parent is not None else None) or window.screen()
    window.setGeometry(screen.geometry())
    window.showFullScreen()
    return window
