"""Lesson files: every built-in lesson loads and its runs are made and read back; a lesson with a broken scene is
refused in one line naming the scene and the field, by the loader and by `kvviz lesson`; captions quote figures
of the run, never a typed one; the deck holds every scene and each run's page once."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvviz.lessons import LessonError, LessonRuns, builtin_lessons, find_lesson, load_lesson, make_missing
from kvviz.lessons.facts import fill
from kvviz.lessons.lesson import caption_fields
from kvviz.lessons.runs import missing_runs, run_file

ROOT = Path(__file__).resolve().parent.parent


def lesson_runs(tmp_path_factory, name: str) -> LessonRuns:
    """A built-in lesson with its runs made once per test session (the tests' own folder, not the user's)."""
    lesson = load_lesson(find_lesson(name))
    folder = tmp_path_factory.getbasetemp() / "lesson-runs" / lesson.name
    make_missing(lesson, folder, say=lambda _text: None)
    runs = LessonRuns(lesson, folder)
    runs.load_all()
    return runs


def test_the_built_in_lessons_are_the_chapter_and_the_next_ones():
    names = [p.stem for p in builtin_lessons()]
    assert names == ["07-kv-cache", "08-serving"]


@pytest.mark.parametrize("name", ["07-kv-cache", "08-serving"])
def test_every_built_in_lesson_loads_and_every_scene_has_both_languages(name):
    lesson = load_lesson(find_lesson(name))
    assert len(lesson.scenes) >= 6
    for scene in lesson.scenes:
        assert scene.title["en"].strip() and scene.title["zh"].strip()
        assert scene.caption["en"].strip() and scene.caption["zh"].strip()
        assert scene.large in scene.panels
        # The same figures in both languages: a caption says in Chinese what it says in English.
        assert sorted(caption_fields(scene.caption["en"])) == sorted(caption_fields(scene.caption["zh"]))


def test_the_chapter_lesson_follows_its_argument():
    lesson = load_lesson(find_lesson("07-kv-cache"))
    kinds = [(s.source.kind, s.large) for s in lesson.scenes]
    assert kinds[0] == ("compare", "work_matrix")  # naive recomputation first
    assert ("compare", "bytes") in kinds and ("compare", "cache_memory") in kinds  # cat's copies, then caches
    assert kinds[-2:] == [("memory", "kv_per_token"), ("memory", "roofline")]  # a token's cost, the wall


@pytest.mark.parametrize("name", ["07-kv-cache", "08-serving"])
def test_every_caption_is_filled_from_its_run(tmp_path_factory, name):
    runs = lesson_runs(tmp_path_factory, name)
    assert missing_runs(runs.lesson, runs.folder) == []
    for scene in runs.lesson.scenes:
        facts = runs.of(scene).facts()
        for lang in ("en", "zh"):
            text = fill(scene.caption[lang], facts)
            assert "{" not in text and "}" not in text
        for i in range(len(scene.stops)):
            assert 0 <= runs.step(scene, i) < runs.of(scene).n_steps


def test_the_serving_lesson_quotes_the_courses_waste(tmp_path_factory):
    """Static batching of the course's four requests: padding 55 of 120 prefill slots, idle 23 of 80 decode slots,
    counted by the serve run the scene draws (the course's own figures, 46% and 29%)."""
    runs = lesson_runs(tmp_path_factory, "08-serving")
    scene = runs.lesson.scenes[0]
    text = fill(scene.caption["en"], runs.of(scene).facts())
    assert "55 of 120" in text and "(46%)" in text and "23 of 80" in text and "(29%)" in text


def test_the_chapter_lesson_corrects_the_qwen3_figure(tmp_path_factory):
    runs = lesson_runs(tmp_path_factory, "07-kv-cache")
    scene = next(s for s in runs.lesson.scenes if s.large == "kv_per_token")
    text = fill(scene.caption["en"], runs.of(scene).facts())
    assert "114,688 B" in text and "56.0 KiB" in text and "head_dim 64" in text


def test_equal_sources_share_one_run_file(tmp_path_factory):
    runs = lesson_runs(tmp_path_factory, "07-kv-cache")
    files = {run_file(runs.folder, s.source) for s in runs.lesson.scenes if s.source.kind == "compare"}
    assert len(files) == 1 and all(f.is_file() for f in files)


GOOD = """
title = "A lesson"
[[scene]]
title = "First"
caption = "The run's {{run.new_tokens}} tokens"
source = {{ kind = "compare", prompt = "abc", engines = ["naive", "concat"], tokens = 4 }}
panels = ["work_matrix"]

[[scene]]
title = "Second"
caption.en = "Again"
caption.zh = "再来"
{second}
"""
SECOND = ('source = { kind = "compare", prompt = "abc", engines = ["naive", "concat"], tokens = 4 }\n'
          'panels = ["work_matrix", "latency"]\nlarge = "latency"\nzoom = 150\nstep = 1\nbookmarks = [2]\n')


def write_lesson(tmp_path: Path, second: str) -> Path:
    path = tmp_path / "lesson.toml"
    path.write_text(GOOD.format(second=second), encoding="utf-8")
    return path


def test_a_well_formed_lesson_loads(tmp_path):
    lesson = load_lesson(write_lesson(tmp_path, SECOND))
    s = lesson.scenes[1]
    assert (s.panels, s.large, s.zoom, s.stops) == (("work_matrix", "latency"), "latency", 150, (1, 2))
    assert s.text("caption", "zh") == "再来" and lesson.scenes[0].text("caption", "zh").startswith("The run's")


BROKEN = [
    (SECOND.replace("tokens = 4", "tokens = 0"), "field 'source.tokens'"),
    (SECOND.replace('"concat"]', '"concatenate"]'), "field 'source.engines'"),
    (SECOND.replace("zoom = 150", "zoom = 900"), "field 'zoom'"),
    (SECOND.replace('large = "latency"', 'large = "bytes"'), "field 'large'"),
    (SECOND.replace('"latency"]', '"latncy"]'), "field 'panels'"),
    (SECOND.replace("bookmarks = [2]", "bookmarks = [1]"), "field 'bookmarks'"),
    (SECOND + 'highlight = { request = 2 }\n', "field 'highlight.request'"),
    (SECOND + 'highlight = { queries = [3, 1], keys = [0, 2] }\n', "field 'highlight.queries'"),
    (SECOND.replace('kind = "compare"', 'kind = "movie"'), "field 'source.kind'"),
    (SECOND.replace("tokens = 4", "tokens = 4, colour = 1"), "field 'source.colour'"),
    (SECOND + 'narrator = "me"\n', "unknown field 'narrator'"),
]


@pytest.mark.parametrize("second, field", BROKEN)
def test_a_broken_scene_is_refused_in_one_line_naming_it(tmp_path, second, field):
    with pytest.raises(LessonError) as caught:
        load_lesson(write_lesson(tmp_path, second))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("lesson.toml: scene 2 ('Second')")
    assert field in message


def test_a_caption_naming_no_figure_of_its_source_is_refused(tmp_path):
    path = write_lesson(tmp_path, SECOND.replace("panels", 'caption.en = "{static.bytes_copied}"\npanels'))
    path.write_text(path.read_text().replace('caption.en = "Again"\n', ""), encoding="utf-8")
    with pytest.raises(LessonError, match=r"scene 2 \('Second'\): field 'caption.en': no figure \{static.bytes_copied"):
        load_lesson(path)


def test_a_step_outside_the_run_is_refused_naming_the_scene(tmp_path):
    """Checked against the run once it is made: a saved run of 3 steps has no step 7."""
    from kvviz.notebook import compare

    trace = compare("ab", ("naive",), 3, threads=1).save(tmp_path / "run.json")
    n = 3
    path = tmp_path / "steps.toml"
    path.write_text(f'title = "t"\n[[scene]]\ntitle = "Only"\ncaption = "c"\nsource = {{ kind = "trace", path = '
                    f'{json.dumps(str(trace))} }}\nstep = {n + 4}\n', encoding="utf-8")
    lesson = load_lesson(path)
    with pytest.raises(LessonError, match=rf"scene 1 \('Only'\): field 'step': step {n + 4} is outside the run's "
                                          rf"steps 0..{n - 1}"):
        LessonRuns(lesson, tmp_path / "runs").load_all()


def test_kvviz_lesson_refuses_a_broken_lesson_in_one_line(tmp_path):
    path = write_lesson(tmp_path, SECOND.replace("zoom = 150", "zoom = 900"))
    proc = subprocess.run([sys.executable, "-m", "kvviz", "lesson", str(path), "--check"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvviz lesson: error: lesson.toml: scene 2 ('Second')")
    assert "field 'zoom'" in lines[0]


def test_a_json_lesson_reads_as_the_toml_one(tmp_path):
    import tomllib

    doc = tomllib.loads(GOOD.format(second=SECOND))
    path = tmp_path / "lesson.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert load_lesson(path).scenes == load_lesson(write_lesson(tmp_path, SECOND)).scenes


def test_the_deck_stores_each_runs_page_once_and_every_scene(tmp_path_factory):
    from kvviz.page.lesson import deck_data

    runs = lesson_runs(tmp_path_factory, "07-kv-cache")
    data = deck_data(runs.lesson, runs)
    assert len(data["scenes"]) == len(runs.lesson.scenes)
    assert len(data["pages"]) == 1  # six compare scenes of one run: its page once
    memory = [s for s in data["scenes"] if s["kind"] == "memory"]
    assert memory and all("114,688 B" in s["memory"]["en"]["kv_per_token"]["body"] for s in memory
                          if "kv_per_token" in s["panels"])


def test_the_lesson_written_in_the_teaching_guide_loads(tmp_path):
    import re

    guide = (ROOT / "docs" / "teaching.md").read_text(encoding="utf-8")
    example = re.search(r"The smallest one:\n\n```toml\n(.*?)```", guide, re.S).group(1)
    path = tmp_path / "why.toml"
    path.write_text(example, encoding="utf-8")
    lesson = load_lesson(path)
    assert [s.stops for s in lesson.scenes] == [(1, 10, -1)]
    path.write_text(example.replace("tokens = 40", "tokens = 0"), encoding="utf-8")
    with pytest.raises(LessonError, match=r"why.toml: scene 1 \('Naive recomputes'\): field 'source.tokens': it must"):
        load_lesson(path)


def test_a_runs_folder_that_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    import kvviz.lessons.runs as runs_module

    def refuse(source, path, models=None):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(runs_module, "make_run", refuse)
    lesson = load_lesson(write_lesson(tmp_path, SECOND))
    with pytest.raises(LessonError, match=r"^lesson.toml: cannot keep its runs in .*: Permission denied \(give another "
                                          r"folder with --runs\)$"):
        make_missing(lesson, tmp_path / "runs", say=lambda _text: None)
