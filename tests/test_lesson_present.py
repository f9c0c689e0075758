"""The lesson presenter, offscreen: every scene of every built-in lesson draws at 1280x720 and 1920x1080 (the
pixels of each shown panel, the caption whole); PageDown walks every scene and bookmark in order and PageUp walks
back; B blanks the screen; the pointer is a large spot; highlights are drawn; the PNGs are slide-sized and the
PDF handout has one page per scene."""
from __future__ import annotations

import re

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QImage, QMouseEvent
from PySide6.QtWidgets import QApplication
from test_lesson import lesson_runs

from kvviz.lessons.facts import fill
from kvviz.ui.lessons.presenter import PresenterWindow

SIZES = [(1280, 720), (1920, 1080)]
MARK = (0xD8, 0x1B, 0x60)


def pixels(image: QImage) -> np.ndarray:
    image = image.convertToFormat(QImage.Format.Format_RGB888)
    w, h, stride = image.width(), image.height(), image.bytesPerLine()
    rows = np.frombuffer(image.constBits(), np.uint8, count=stride * h).reshape(h, stride)
    return rows[:, : 3 * w].reshape(h, w, 3).copy()  # the array's own: the converted image goes with this frame


def grab(widget) -> np.ndarray:
    QApplication.processEvents()
    return pixels(widget.grab().toImage())


def drawn_something(a: np.ndarray) -> bool:
    """A panel that drew its figure: several colours, and a share of pixels not its background."""
    flat = a.reshape(-1, 3)
    colours = len(np.unique(flat[:: max(1, len(flat) // 20000)], axis=0))
    background = np.bincount(np.ravel_multi_index(flat.T, (256, 256, 256))).argmax()
    share = np.mean(np.ravel_multi_index(flat.T, (256, 256, 256)) != background)
    return colours >= 6 and share > 0.02


def has_mark(a: np.ndarray) -> bool:
    return bool(np.any(np.all(np.abs(a.astype(int) - MARK) <= 12, axis=-1)))


@pytest.fixture
def presenter(qapp):
    """Presenters made by the test, closed after it; the process-wide zoom, font and language it may leave
    (the panels of later tests read them) given back as they were."""
    from kvviz.ui import i18n, style

    zoom, font, language = round(style.ZOOM * 100), QApplication.font(), i18n.current_language()
    made = []

    def make(name, tmp_path_factory, size=(1280, 720), lang="en"):
        runs = lesson_runs(tmp_path_factory, name)
        window = PresenterWindow(runs.lesson, runs, lang)
        window.resize(*size)
        window.show()
        QApplication.processEvents()
        made.append(window)
        return window

    yield make
    for window in made:
        window.close()
        window.deleteLater()
    QApplication.processEvents()
    style.set_zoom(zoom)
    QApplication.setFont(font)
    if i18n.current_language() != language:
        i18n.set_language(language)


def caption_whole(label) -> bool:
    """The label shows all of its text: its height holds the wrapped text at its width."""
    return label.heightForWidth(label.width()) <= label.height() + 1


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", ["07-kv-cache", "08-serving"])
def test_every_scene_draws_its_panels_and_its_whole_caption(presenter, tmp_path_factory, name, size):
    window = presenter(name, tmp_path_factory, size)
    assert (window.width(), window.height()) == size
    for i, scene in enumerate(window.lesson.scenes):
        window.go_to(i)
        window.draw()
        QApplication.processEvents()
        expected = fill(scene.caption["en"], window.runs.of(scene).facts())
        assert window.caption.text() == expected and window.title.text() == scene.title["en"]
        assert caption_whole(window.caption), f"scene {i + 1}: caption cut at {size}"
        shown = [box.key for box in window.stage.shown]
        assert shown[0] == scene.large and sorted(shown) == sorted(scene.panels)
        for box in window.stage.shown:
            assert box.isVisible() and box.panel.width() > 100 and box.panel.height() > 80
            assert drawn_something(grab(box.panel)), f"scene {i + 1}: panel {box.key} drew nothing at {size}"


def test_pagedown_walks_every_scene_and_bookmark_in_order(presenter, tmp_path_factory, qtbot):
    window = presenter("07-kv-cache", tmp_path_factory)
    runs = window.runs
    expected = [(i, k, runs.step(s, k)) for i, s in enumerate(window.lesson.scenes) for k in range(len(s.stops))]
    seen = [(window.scene_index, window.stop, window.step())]
    for _ in range(len(expected) + 2):  # two more: the last stays the last
        qtbot.keyClick(window, Qt.Key.Key_PageDown)
        seen.append((window.scene_index, window.stop, window.step()))
    assert seen[: len(expected)] == expected and seen[-3:] == [expected[-1]] * 3
    assert expected[0][2] == 1 and expected[1][2] == 10  # the first scene's step, then its bookmark
    back = []
    for _ in range(len(expected) - 1):
        qtbot.keyClick(window, Qt.Key.Key_PageUp)
        back.append((window.scene_index, window.stop, window.step()))
    assert back == expected[-2::-1]
    qtbot.keyClick(window, Qt.Key.Key_Right)  # a clicker's other key
    assert (window.scene_index, window.stop) == expected[1][:2]


def test_each_stop_draws_its_own_step(presenter, tmp_path_factory):
    window = presenter("07-kv-cache", tmp_path_factory)
    window.go_to(2, 0)  # prefill, then decode: step 0, then step 1
    panel = window.stage.page.box("work_matrix").panel
    prefill = grab(panel)
    assert drawn_something(prefill)
    assert window.step() == 0 and window.where.text().endswith("step 0 (1 of 3)")
    window.go_to(2, 1)
    assert window.step() == 1 and window.where.text().endswith("step 1 (2 of 3)")
    assert window.stage.page.box("work_matrix").panel is panel  # the scene's own panel, drawn again
    assert np.mean(np.any(grab(panel) != prefill, axis=-1)) > 0.001


def test_b_blanks_the_screen_and_b_again_brings_it_back(presenter, tmp_path_factory, qtbot):
    window = presenter("07-kv-cache", tmp_path_factory)
    qtbot.keyClick(window, Qt.Key.Key_B)
    assert grab(window).max() == 0
    qtbot.keyClick(window, Qt.Key.Key_PageDown)  # moving on while blank stays blank
    assert grab(window).max() == 0
    qtbot.keyClick(window, Qt.Key.Key_B)
    assert drawn_something(grab(window))


def test_the_pointer_is_a_large_spot_where_the_mouse_is(presenter, tmp_path_factory):
    window = presenter("07-kv-cache", tmp_path_factory)
    window.set_pointer(True)
    at = QPoint(400, 420)
    target = window.stage
    local = target.mapFrom(window, at)
    QApplication.sendEvent(target, QMouseEvent(QMouseEvent.Type.MouseMove, QPointF(local),
                                               QPointF(target.mapToGlobal(local)), Qt.MouseButton.NoButton,
                                               Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier))
    a = grab(window)
    spot = a[at.y() - 10: at.y() + 10, at.x() - 10: at.x() + 10].reshape(-1, 3).astype(int)
    assert np.all(spot[:, 0] > 200) and np.all(spot[:, 1] > 150) and np.all(spot[:, 2] < 90)  # yellow
    window.set_pointer(False)
    a = grab(window)
    spot = a[at.y() - 10: at.y() + 10, at.x() - 10: at.x() + 10].reshape(-1, 3).astype(int)
    assert not (np.all(spot[:, 0] > 200) and np.all(spot[:, 2] < 90))


def test_a_work_matrix_region_and_a_pool_block_are_marked(presenter, tmp_path_factory):
    window = presenter("07-kv-cache", tmp_path_factory)
    assert has_mark(grab(window.stage.page.box("work_matrix").panel))  # scene 1 outlines the prompt's rows and keys
    window.go_to(2)  # the same panel in another scene, no highlight
    assert not has_mark(grab(window.stage.page.box("work_matrix").panel))
    serving = presenter("08-serving", tmp_path_factory)
    scene = next(i for i, s in enumerate(serving.lesson.scenes) if s.highlight.block is not None)
    serving.go_to(scene)
    assert has_mark(grab(serving.stage.page.box("pool").panel))


def test_the_chinese_captions_and_panels(presenter, tmp_path_factory, qtbot):
    window = presenter("08-serving", tmp_path_factory, lang="zh")
    scene = window.lesson.scenes[0]
    assert window.caption.text() == fill(scene.caption["zh"], window.runs.of(scene).facts())
    zh_header = window.stage.shown[0].header.text()
    qtbot.keyClick(window, Qt.Key.Key_L)
    assert window.lang == "en" and window.caption.text().startswith("The course's")
    assert window.stage.shown[0].header.text() != zh_header


def test_pngs_are_slide_sized_and_the_pdf_has_a_page_per_scene(qapp, tmp_path_factory, tmp_path):
    from kvviz.ui.lessons.export import write_pdf, write_pngs

    runs = lesson_runs(tmp_path_factory, "07-kv-cache")
    pngs = write_pngs(runs.lesson, runs, tmp_path / "png", (1280, 720), "en")
    assert [p.name for p in pngs] == [f"scene-{i:02d}.png" for i in range(1, len(runs.lesson.scenes) + 1)]
    for p in pngs:
        image = QImage(str(p))
        assert (image.width(), image.height()) == (1280, 720) and drawn_something(pixels(image))
    pdf = write_pdf(runs.lesson, runs, tmp_path / "handout.pdf", "en").read_bytes()
    assert pdf.startswith(b"%PDF")
    pages = re.findall(rb"/Type\s*/Page\b(?!s)", pdf)
    counts = [int(c) for c in re.findall(rb"/Type\s*/Pages\b[^>]*?/Count\s+(\d+)", pdf, re.S)]
    assert len(pages) == len(runs.lesson.scenes) and counts == [len(runs.lesson.scenes)]


@pytest.mark.parametrize("name", ["07-kv-cache", "08-serving"])
def test_every_chinese_caption_is_whole_at_1280x720(presenter, tmp_path_factory, name):
    window = presenter(name, tmp_path_factory, (1280, 720), lang="zh")
    for i, scene in enumerate(window.lesson.scenes):
        window.go_to(i)
        QApplication.processEvents()
        assert window.caption.text() == fill(scene.caption["zh"], window.runs.of(scene).facts())
        assert window.title.text() == scene.title["zh"] and window.where.text().startswith(f"场景 {i + 1} / ")
        assert caption_whole(window.caption), f"scene {i + 1}: the Chinese caption is cut"


def test_closing_the_presenters_gives_back_the_apps_language_zoom_and_font(presenter, tmp_path_factory, qtbot):
    """The app at 125% in English; presenters in Chinese on a 150% scene, one opened while the other shows it and
    closed in the order opened; after the last closes (and its timers have had their turn) the app's language,
    the panels' zoom and the application font are as they were."""
    from kvviz.ui import i18n, style
    from kvviz.ui.presentation import zoomed_font

    style.set_zoom(125)
    QApplication.setFont(zoomed_font(QApplication.font(), 125))
    before = (i18n.current_language(), round(style.ZOOM * 100), QApplication.font().toString())
    shown = []
    for size in SIZES:
        window = presenter("08-serving", tmp_path_factory, size, lang="zh")
        scene = next(i for i, s in enumerate(window.lesson.scenes) if s.zoom == 150)
        window.go_to(scene)
        QApplication.processEvents()
        assert (i18n.current_language(), round(style.ZOOM * 100)) == ("zh_CN", 150)
        shown.append(window)
    shown[0].close()
    qtbot.wait(200)
    assert (i18n.current_language(), round(style.ZOOM * 100)) == ("zh_CN", 150)  # the other still presents
    shown[1].close()
    qtbot.wait(200)
    assert (i18n.current_language(), round(style.ZOOM * 100), QApplication.font().toString()) == before
