"""Lessons: files of scenes a teacher presents (kvviz.lessons.lesson), the runs they draw from, made once and
kept beside the lesson (kvviz.lessons.runs), and the figures their captions quote (kvviz.lessons.facts). No Qt:
the presenter is kvviz.ui.lessons, the deck kvviz.page.lesson, the command kvviz.commands.lesson.
"""
from __future__ import annotations

from pathlib import Path

from kvviz.lessons.lesson import Lesson, LessonError, Scene, Source, load_lesson
from kvviz.lessons.runs import BUILTIN_DIR, LessonRuns, SceneRun, make_missing, runs_dir


def builtin_lessons() -> list[Path]:
    """The lessons shipped with kvviz, in the order the course teaches them."""
    return sorted(BUILTIN_DIR.glob("*.toml"))


def find_lesson(name: str) -> Path:
    """A lesson file's path, or a built-in lesson's name (its file's stem)."""
    path = Path(name)
    if path.suffix.lower() in (".toml", ".json") or path.exists():
        return path
    for found in builtin_lessons():
        if found.stem == name:
            return found
    names = ", ".join(p.stem for p in builtin_lessons())
    raise LessonError(f"no lesson file {name!r}, and no built-in lesson of that name ({names})")


__all__ = ["Lesson", "LessonError", "LessonRuns", "Scene", "SceneRun", "Source", "builtin_lessons", "find_lesson",
           "load_lesson", "make_missing", "runs_dir"]
