"""The lesson deck (kvviz lesson --export deck.html) in headless Chromium with every host name unresolvable:
it opens from disk, PageDown walks every scene and bookmark in order (each scene's own page at the stop's step,
laid out with the scene's panels only), PageUp and the arrow keys walk back, PageDown pressed inside a scene's
page moves the deck too, B blanks the screen, the language switch changes captions and pages, each scene's
highlight (a work-matrix region, a request row, a pool block) is drawn in the presenter's colour at the scene's
zoom; nothing is fetched and no script fails."""
from __future__ import annotations

import time

import html_page_cdp
import pytest
from test_lesson import lesson_runs

from kvviz.lessons.facts import fill
from kvviz.page.lesson import MARK_COLOR, write_deck

pytestmark = pytest.mark.skipif(bool(html_page_cdp.missing()), reason=html_page_cdp.missing() or "")


def press(browser, key: str) -> None:
    browser.press(key)  # html_page_cdp.KEYS: PageDown, PageUp, the arrows, b


def settled(browser, want_step=None) -> tuple:
    """(scene, stop, the scene page's step) once the shown scene is ready (and at `want_step`, if given)."""
    deadline = time.monotonic() + 60  # a loaded machine: a serve page's first draw has taken seconds
    while True:
        state = browser.eval("[kvvizLesson.scene, kvvizLesson.stop, kvvizLesson.ready(), kvvizLesson.step]")
        if state[2] and (want_step is None or state[3] == want_step):
            return state[0], state[1], state[3]
        if time.monotonic() > deadline:
            raise AssertionError(f"the deck did not settle: {state}, {browser.problems}")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def browser():
    b = html_page_cdp.Browser(1280, 720)
    yield b
    b.close()


@pytest.mark.parametrize("name", ["07-kv-cache", "08-serving"])
def test_pagedown_walks_the_deck_scene_by_scene_and_stop_by_stop(browser, tmp_path_factory, tmp_path, name):
    runs = lesson_runs(tmp_path_factory, name)
    lesson = runs.lesson
    deck = write_deck(tmp_path / "deck.html", lesson, runs)
    browser.problems.clear()
    browser.open(deck)
    expected = [(i, k, None if runs.of(s).kind == "memory" else runs.step(s, k))
                for i, s in enumerate(lesson.scenes) for k in range(len(s.stops))]
    seen = [settled(browser, expected[0][2])]
    for want in expected[1:]:
        press(browser, "PageDown")
        seen.append(settled(browser, want[2]))
        i = want[0]
        scene = lesson.scenes[i]
        caption = browser.eval("document.querySelector('#caption p').textContent")
        assert caption == fill(scene.caption["en"], runs.of(scene).facts())
        if runs.of(scene).kind != "memory":  # the page shows the scene's panels, no other
            shown = browser.eval(f"""(() => {{ const d = document.querySelector('iframe[data-scene="{i}"]')
              .contentDocument; return [...d.querySelectorAll('#grid > .panel')]
              .filter(p => getComputedStyle(p).display !== 'none').map(p => p.id.slice(6)); }})()""")
            assert sorted(shown) == sorted(scene.panels)
    assert seen == expected
    press(browser, "PageDown")  # past the end: stays
    assert settled(browser) == expected[-1]
    press(browser, "PageUp")
    assert settled(browser, expected[-2][2]) == expected[-2]
    press(browser, "ArrowUp")
    assert settled(browser, expected[-3][2]) == expected[-3]
    press(browser, "ArrowDown")
    assert settled(browser, expected[-2][2]) == expected[-2]
    browser.pump()
    assert browser.problems == []


def test_keys_in_a_scene_page_blank_and_language(browser, tmp_path_factory, tmp_path):
    runs = lesson_runs(tmp_path_factory, "07-kv-cache")
    deck = write_deck(tmp_path / "deck.html", runs.lesson, runs)
    browser.problems.clear()
    browser.open(deck)
    settled(browser, runs.step(runs.lesson.scenes[0], 0))
    # PageDown with the focus in the scene's own page (its slider) still moves the deck
    browser.eval("document.querySelector('iframe[data-scene=\"0\"]').contentDocument.getElementById('slider')"
                 ".focus()")
    press(browser, "PageDown")
    assert settled(browser, runs.step(runs.lesson.scenes[0], 1))[:2] == (0, 1)
    browser.eval("document.activeElement && document.activeElement.blur && document.activeElement.blur(); "
                 "document.body.focus()")
    press(browser, "b")
    assert browser.eval("document.body.classList.contains('blank')")
    shot, _png = browser.screenshot()
    assert shot.max() == 0
    press(browser, "b")
    assert not browser.eval("document.body.classList.contains('blank')")
    browser.eval("document.querySelector('#langs button[data-lang=\"zh\"]').click()")
    scene = runs.lesson.scenes[0]
    assert browser.eval("document.querySelector('#caption p').textContent") == \
        fill(scene.caption["zh"], runs.of(scene).facts())
    assert browser.eval("document.querySelector('iframe[data-scene=\"0\"]').contentWindow.kvviz.lang") == "zh_CN"
    browser.pump()
    assert browser.problems == []


def marked(browser, scene: int, panel: str) -> int:
    """Pixels in the presenter's highlight colour over the scene page's panel canvas, as the screen shows them."""
    browser.pump()
    image, _png = browser.screenshot()
    fx, fy, _fw, _fh = browser.rect(f'iframe[data-scene="{scene}"]')
    x, y, w, h = browser.eval(f"""(() => {{ const r = document.querySelector('iframe[data-scene="{scene}"]')
      .contentDocument.querySelector('#panel-{panel} canvas').getBoundingClientRect();
      return [r.x, r.y, r.width, r.height].map(Math.round); }})()""")
    area = image[fy + y:fy + y + h, fx + x:fx + x + w]
    color = [int(MARK_COLOR[i:i + 2], 16) for i in (1, 3, 5)]
    return int((area == color).all(axis=-1).sum())


def walk_to(browser, runs, scene: int) -> None:
    """PageDown until the deck shows `scene` (at its first stop, settled)."""
    while settled(browser)[0] != scene:
        press(browser, "PageDown")
    settled(browser, runs.step(runs.lesson.scenes[scene], 0))


def test_each_scenes_highlight_and_zoom_are_drawn_as_the_presenter_does(browser, tmp_path_factory, tmp_path):
    runs = lesson_runs(tmp_path_factory, "07-kv-cache")
    scenes = runs.lesson.scenes
    region = next(i for i, s in enumerate(scenes) if s.highlight.queries is not None)
    plain = next(i for i, s in enumerate(scenes) if i > region and s.highlight.empty and "work_matrix" in s.panels)
    browser.problems.clear()
    browser.open(write_deck(tmp_path / "deck.html", runs.lesson, runs))
    walk_to(browser, runs, region)
    api = f'document.querySelector(\'iframe[data-scene="{region}"]\').contentWindow.kvviz'
    assert browser.eval(f"{api}.zoom") == scenes[region].zoom != 100
    assert marked(browser, region, "work_matrix") > 100  # the region's frame round every engine's matrix
    walk_to(browser, runs, plain)
    assert marked(browser, plain, "work_matrix") == 0
    press(browser, "b")
    assert browser.screenshot()[0].max() == 0
    press(browser, "b")
    press(browser, "PageUp")
    while settled(browser)[0] != region:
        press(browser, "PageUp")
    assert marked(browser, region, "work_matrix") > 100
    browser.pump()
    assert browser.problems == []


def test_a_serve_scenes_request_and_block_are_marked(browser, tmp_path_factory, tmp_path):
    runs = lesson_runs(tmp_path_factory, "08-serving")
    scenes = runs.lesson.scenes
    request = next(i for i, s in enumerate(scenes) if s.highlight.request is not None)
    block = next(i for i, s in enumerate(scenes) if s.highlight.block is not None)
    browser.problems.clear()
    browser.open(write_deck(tmp_path / "deck.html", runs.lesson, runs))
    walk_to(browser, runs, request)
    frame = f'document.querySelector(\'iframe[data-scene="{request}"]\').contentDocument'
    assert marked(browser, request, "timeline") > 50  # the request's row framed
    assert browser.eval(f"{frame}.querySelector('#panel-text h2').textContent").startswith(
        f"Request {scenes[request].highlight.request}:")  # the request selected: its text shown
    walk_to(browser, runs, block)
    assert marked(browser, block, "pool") > 20
    assert marked(browser, block, "timeline") == 0
    browser.pump()
    assert browser.problems == []
