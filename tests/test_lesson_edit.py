"""Scenes of a lesson file reordered, retitled and removed through the library (kvviz.lessons.lesson): the file
read back gives the scenes in the new order with the new titles, a TOML file keeps its comments, a JSON file
stays JSON, and an edit the lesson would refuse is refused in one line with the file untouched."""
from __future__ import annotations

import json
import shutil

import pytest

from kvviz.lessons import LessonError, find_lesson, load_lesson
from kvviz.lessons.lesson import edit_scenes, move_scene, remove_scene, retitle_scene


@pytest.fixture
def lesson_file(tmp_path):
    path = tmp_path / "chapter.toml"
    shutil.copy(find_lesson("07-kv-cache"), path)
    return path


def titles(path) -> list[str]:
    return [s.title["en"] for s in load_lesson(path).scenes]


def test_a_scene_moved_reads_back_in_its_new_place(lesson_file):
    before = titles(lesson_file)
    move_scene(lesson_file, 3, 1)
    assert titles(lesson_file) == [before[2], before[0], before[1], *before[3:]]
    move_scene(lesson_file, 1, len(before))
    assert titles(lesson_file) == [before[0], before[1], *before[3:], before[2]]


def test_a_scene_retitled_in_both_languages_keeps_its_caption_and_the_files_comments(lesson_file):
    old = load_lesson(lesson_file).scenes[1]
    retitle_scene(lesson_file, 2, {"en": "Same tokens", "zh": "同样的输出"})
    new = load_lesson(lesson_file).scenes[1]
    assert new.title == {"en": "Same tokens", "zh": "同样的输出"}
    assert (new.caption, new.source, new.panels) == (old.caption, old.source, old.panels)
    assert "# Chapter 07" in lesson_file.read_text(encoding="utf-8")


def test_a_scene_removed_is_gone_and_the_others_keep_their_order(lesson_file):
    before = titles(lesson_file)
    remove_scene(lesson_file, 2)
    assert titles(lesson_file) == [before[0], *before[2:]]


def test_one_plan_reorders_retitles_and_removes_at_once(lesson_file):
    before = titles(lesson_file)
    edit_scenes(lesson_file, [(4, None), (1, "First"), (2, None)])
    assert titles(lesson_file) == [before[3], "First", before[1]]


def test_a_json_lesson_is_edited_as_json(lesson_file, tmp_path):
    import tomllib

    path = tmp_path / "chapter.json"
    path.write_text(json.dumps(tomllib.loads(lesson_file.read_text(encoding="utf-8"))), encoding="utf-8")
    before = titles(path)
    move_scene(path, 2, 1)
    assert json.loads(path.read_text(encoding="utf-8"))["scene"][0]["title"]["en"] == before[1]


def test_a_toml_lesson_whose_scenes_are_not_plain_blocks_is_written_whole_and_reads_back(tmp_path):
    path = tmp_path / "odd.toml"
    path.write_text('title = "Odd"\n[[scene]]\ncaption = "c1"\nsource = { kind = "memory" }\n'
                    'panels = ["kv_per_token"]\n[scene.title]\nen = "One"\n'
                    '[[scene]]\ntitle = "Two"\ncaption = "c2"\nsource = { kind = "memory" }\n'
                    'panels = ["copies"]\n', encoding="utf-8")
    retitle_scene(path, 1, {"en": "Uno", "zh": "一"})
    move_scene(path, 2, 1)
    lesson = load_lesson(path)
    assert [s.title for s in lesson.scenes] == [{"en": "Two"}, {"en": "Uno", "zh": "一"}]
    assert [s.panels for s in lesson.scenes] == [("copies",), ("kv_per_token",)]


@pytest.mark.parametrize(("edit", "says"), [
    (lambda p: move_scene(p, 99, 1), r"chapter\.toml: no scene 99 \(it has 8, counted from 1\)"),
    (lambda p: move_scene(p, 1, 0), r"chapter\.toml: no place 0 to move a scene to"),
    (lambda p: remove_scene(p, 0), r"chapter\.toml: no scene 0"),
    (lambda p: retitle_scene(p, 1, {"en": " "}), r"scene 1: the title needs English text"),
    (lambda p: retitle_scene(p, 1, {"en": "x", "fr": "y"}), r"unknown language 'fr'"),
    (lambda p: edit_scenes(p, []), r"a lesson keeps at least one scene"),
    (lambda p: edit_scenes(p, [(1, None), (1, None)]), r"names a scene twice"),
])
def test_an_edit_the_lesson_would_refuse_is_said_in_one_line_and_the_file_is_untouched(lesson_file, edit, says):
    text = lesson_file.read_bytes()
    with pytest.raises(LessonError, match=says) as info:
        edit(lesson_file)
    assert "\n" not in str(info.value)
    assert lesson_file.read_bytes() == text
    assert sorted(p.name for p in lesson_file.parent.iterdir()) == ["chapter.toml"]  # no temporary file left
