"""A lesson as one offline HTML deck: every scene's caption (its figures filled from the run, in English and
Chinese), its steps, the line saying where the lesson is at each of them, and its picture: the run's own page
(kvviz.page.build_page / build_serve_page, stored once per run and shown in an iframe laid out for the scene, at its
zoom, with its highlight) or a memory scene's tables. lesson.js moves between scenes. Stdlib and numpy only: no Qt,
no torch; the runs come from kvviz.lessons.runs.
"""
from __future__ import annotations

import html
import re
from pathlib import Path

from kvviz.lessons import memory_view
from kvviz.lessons.facts import fill
from kvviz.lessons.lesson import LANGS, MARK_COLOR, Lesson
from kvviz.lessons.runs import LessonRuns
from kvviz.page import _asset, _script_json, write_text

WHERE = {"en": ("Scene {0} / {1}", "step {0} ({1} of {2})"), "zh": ("场景 {0} / {1}", "第 {0} 步（{1} / {2}）")}
SEP = "  ·  "


def where_text(index: int, count: int, step: int, stop: int, stops: int, memory: bool, lang: str,
               title: str = "") -> str:
    """Where the lesson is: "Scene 2 / 9  ·  step 5 (1 of 2)" (`index` and `stop` from 0; a memory scene has no
    step), with the lesson's `title` between them where given (the presenter's line; the deck shows it apart)."""
    scene, at = WHERE[lang]
    return (scene.format(index + 1, count) + (SEP + title if title else "")
            + ("" if memory else SEP + at.format(step, stop + 1, stops)))


def highlight_data(scene, run) -> dict | None:
    """The scene's highlight as the page's highlight() takes it: the work-matrix region (query and key positions,
    inclusive), the request, the pool block and its scheduler (the run's first where the file names none)."""
    h = scene.highlight
    if h.empty:
        return None
    scheduler = h.scheduler
    if h.block is not None and scheduler is None and run.kind != "compare" and run.serve:
        scheduler = run.serve[0].scheduler
    return {"queries": list(h.queries) if h.queries else None, "keys": list(h.keys) if h.keys else None,
            "request": h.request, "block": h.block, "scheduler": scheduler, "color": MARK_COLOR}


def deck_data(lesson: Lesson, runs: LessonRuns, lang: str = "en") -> dict:
    """What lesson.js draws: the lesson's title, each scene's texts, stops (with where_text at each), panels and
    page (an index into `pages`, one per run), and the memory scenes' tables in both languages."""
    from kvviz.page import build_page
    from kvviz.page.serve import build_serve_page

    pages: list[str] = []
    page_of: dict[str, int] = {}
    scenes = []
    for index, scene in enumerate(lesson.scenes):
        run = runs.of(scene)
        facts = run.facts()
        stops = [runs.step(scene, i) for i in range(len(scene.stops))]
        where = {k: [where_text(index, len(lesson.scenes), step, i, len(stops), run.kind == "memory", k)
                     for i, step in enumerate(stops)] for k in LANGS}
        doc = {"title": {k: scene.text("title", k) for k in LANGS},
               "caption": {k: fill(scene.text("caption", k), facts) for k in LANGS},
               "kind": run.kind, "stops": stops, "where": where, "panels": list(scene.panels), "large": scene.large,
               "zoom": scene.zoom, "highlight": highlight_data(scene, run)}
        if run.kind == "memory":
            doc["memory"] = {k: {p: {"title": html.escape(memory_view.title(p, k)),
                                     "body": memory_view.panel_html(p, run.memory, k)} for p in scene.panels}
                             for k in LANGS}
        else:
            key = scene.source.key()
            if key not in page_of:
                page_of[key] = len(pages)
                pages.append(build_page(run.saved.info, run.saved.traces, step=stops[0]) if run.kind == "compare"
                             else build_serve_page(run.serve, step=stops[0]))
            doc["page"] = page_of[key]
        scenes.append(doc)
    return {"title": {k: lesson.text(k) for k in LANGS}, "scenes": scenes, "pages": pages, "start": {"lang": lang}}


def build_deck(lesson: Lesson, runs: LessonRuns, lang: str = "en") -> str:
    if lang not in LANGS:
        raise ValueError(f"language must be one of {', '.join(LANGS)}, got {lang!r}")
    data = deck_data(lesson, runs, lang)
    values = {"lang": "zh-CN" if lang == "zh" else "en", "title": html.escape(f"kvviz: {lesson.text(lang)}"),
              "data": _script_json(data), "script": _asset("lesson.js")}
    # One pass: text put in is never read again for placeholders (a page's own braces stay as they are).
    return re.sub(r"\{(lang|title|data|script)\}", lambda m: values[m.group(1)], _asset("lesson.html"))


def write_deck(path: str | Path, lesson: Lesson, runs: LessonRuns, lang: str = "en") -> Path:
    """The deck, written by kvviz.fileio's output rule (a temporary name, renamed)."""
    return write_text(path, build_deck(lesson, runs, lang))


__all__ = ["MARK_COLOR", "build_deck", "deck_data", "highlight_data", "where_text", "write_deck"]
