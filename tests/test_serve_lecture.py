"""The Serve window in a lecture hall (1280x720 at 150%) and on a desktop (1920x1080 at 100%), offscreen: a
course-batch run under four schedulers (and shared-prefix under three) from `kvviz serve` on tiny-random,
replayed. No panel laid out in the grid is below its declared readable size, the rest wait behind tabs that
say so, the grid never scrolls sideways, the timeline's rows are a line of text tall, the narration fits its
box (its whole text the tooltip), the two plots' axis names do not overlap, empty plots show no numbers,
the latency plots number requests from the first, the Workload dock's fields are not cut, and a large
screen shows every panel.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication

from kvviz.ui import style
from kvviz.ui.presentation import zoomed_font
from kvviz.ui.serve.narration import narrate
from kvviz.ui.serve.window import ServeWindow


def _serve(path: Path, workload: str, schedulers: str) -> Path:
    done = subprocess.run([sys.executable, "-m", "kvviz", "serve", "--workload", workload, "--schedulers", schedulers,
                           "--model", "tiny-random", "--threads", "1", "--json", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return path


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("serve")
    return {"course": _serve(folder / "course.json", "course-batch", "static,continuous,paged,prefix"),
            "shared": _serve(folder / "shared.json", "shared-prefix", "chunked,paged,prefix")}


@pytest.fixture
def zoomed():
    """The app's font and the plot text at a zoom, as View > Zoom sets them; back to 100% after."""
    app = QApplication.instance()
    base = app.font()

    def at(percent: int) -> None:
        app.setFont(zoomed_font(base, percent))
        style.set_zoom(percent)

    yield at
    app.setFont(base)
    style.set_zoom(100)


def open_window(qtbot, tmp_path, size) -> ServeWindow:
    w = ServeWindow(None, QSettings(str(tmp_path / "serve.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.resize(*size)
    w.show()
    qtbot.waitExposed(w)
    return w


def settle(qtbot, w: ServeWindow) -> None:
    for _ in range(3):
        qtbot.wait(30)
        qtbot.waitUntil(lambda: not w._frame_timer.isActive() and not w.grid._arrange_timer.isActive(), timeout=5000)
        w.draw()
    qtbot.wait(30)


def replay(qtbot, w: ServeWindow, path: Path) -> None:
    assert w.exports.open_record(path)
    settle(qtbot, w)
    w.select_step(w.run.n_steps() - 1)
    settle(qtbot, w)


def check_readable(w: ServeWindow) -> list[str]:
    grid = w.grid
    laid = grid.laid_out()
    assert laid and laid[0] == "timeline"  # the most important is always kept
    for key in laid:
        frame = grid.frames[key]
        need = frame.readable_size()
        assert frame.width() >= need[0] - 1 and frame.height() >= need[1] - 1, (key, frame.size(), need)
    assert grid.body.width() <= grid.scroll.viewport().width(), "the grid scrolls sideways"
    assert not grid.scroll.horizontalScrollBar().isVisible()
    assert set(laid) | set(grid.moved) == set(grid.shown_panels())
    assert grid.strip.isVisible() == bool(grid.moved)
    if grid.moved:
        assert grid.tabs.count() == 1 + len(grid.moved)
        assert str(len(grid.moved)) in grid.moved_note.text()
    timeline = grid.panels["timeline"]
    assert timeline.cell_px[1] >= timeline.row_min() >= timeline.fontMetrics().height() * 0.75  # the labels' line
    return laid


def check_narration(w: ServeWindow, lines: int = 2) -> None:
    label = w.transport.narration
    text = label.text()
    assert text
    assert label.text_height(text) <= label.contentsRect().height()  # whole, not cut
    assert label.height() <= lines * label.fontMetrics().lineSpacing() + 4, (label.height(), text)  # in its box
    assert label.toolTip() == narrate(w.run, w.step)  # the whole story is the tooltip


@pytest.mark.parametrize("which", ["course", "shared"])
def test_a_lecture_hall_keeps_the_panels_it_shows_readable(qtbot, tmp_path, records, zoomed, which):
    zoomed(150)
    w = open_window(qtbot, tmp_path, (1280, 720))
    w.retranslate_ui()  # the plots' axis names at the zoom's type size
    replay(qtbot, w, records[which])
    assert w.run.schedulers == (("static", "continuous", "paged", "prefix") if which == "course"
                                else ("chunked", "paged", "prefix"))
    check_readable(w)
    check_narration(w)
    w.select_step(0)  # step 0 says the most: every request joins under every scheduler
    settle(qtbot, w)
    check_narration(w)
    for tab in range(1, w.grid.tabs.count()):  # a panel behind a tab has the grid to itself
        w.grid.tabs.setCurrentIndex(tab)
        settle(qtbot, w)
        key = w.grid.moved[tab - 1]
        assert w.grid.laid_out() == [key] and not w.grid.frames[key].isHidden()
    w.grid.tabs.setCurrentIndex(0)
    settle(qtbot, w)
    assert w.grid.laid_out()[0] == "timeline"


def test_the_course_run_at_150_percent_keeps_the_timeline_and_a_plot_beside_it(qtbot, tmp_path, records, zoomed):
    zoomed(150)
    w = open_window(qtbot, tmp_path, (1280, 720))
    replay(qtbot, w, records["course"])
    timeline = w.grid.panels["timeline"]
    assert timeline.cell_px[1] >= timeline.row_min()
    # Four requests' rows a line of text tall under each of the four schedulers, their labels drawn.
    assert len(timeline.blocks) == 4
    assert all(rect.height() >= 4 * timeline.row_min() for _k, rect, _c in timeline.blocks)
    assert timeline.blocks[0][1].left() >= timeline.label_width()


@pytest.mark.parametrize("which", ["course", "shared"])
def test_a_desktop_shows_every_panel_in_the_grid(qtbot, tmp_path, records, which):
    w = open_window(qtbot, tmp_path, (1920, 1080))
    replay(qtbot, w, records[which])
    laid = check_readable(w)
    assert laid and not w.grid.moved and not w.grid.strip.isVisible()
    assert set(laid) == set(w.grid.frames)
    check_narration(w)


def test_the_plots_axis_names_do_not_overlap_and_requests_are_numbered_from_0(qtbot, tmp_path, records, zoomed):
    zoomed(150)
    w = open_window(qtbot, tmp_path, (1280, 720))
    w.retranslate_ui()
    usage = w.grid.panels["usage"]
    for key in ("usage", "latency"):  # before a run: no numbers on empty axes
        for plot in w.grid.panels[key].plots:
            assert not plot.getAxis("left").style["showValues"]
            assert not plot.getAxis("bottom").style["showValues"]
    replay(qtbot, w, records["shared"])
    for key in ("usage", "latency"):
        if key not in w.grid.laid_out():
            w.grid.tabs.setCurrentIndex(1 + w.grid.moved.index(key))
            settle(qtbot, w)
        panel = w.grid.panels[key]
        names = []
        for plot in panel.plots:
            assert plot.getAxis("left").style["showValues"]
            label = plot.getAxis("left").label
            names.append(label.mapRectToScene(label.boundingRect()))
        assert not names[0].intersects(names[1]), (key, names)
    for key in ("usage", "latency"):  # at its readable size: the frame the grid gives it at the least
        panel = w.grid.panels[key]
        frame = w.grid.frames[key]
        w.grid.tabs.setCurrentIndex(0)
        frame.setParent(None)
        qtbot.addWidget(frame)
        frame.show()
        frame.resize(*frame.readable_size())
        qtbot.wait(50)
        names = [plot.getAxis("left").label for plot in panel.plots]
        rects = [label.mapRectToScene(label.boundingRect()) for label in names]
        assert not rects[0].intersects(rects[1]), (key, frame.size(), rects)
    latency = w.grid.panels["latency"]
    ticks = latency.tpot_plot.getAxis("bottom")._tickLevels[0]
    assert ticks[0][0] == 0 and all(v >= 0 for v, _t in ticks)
    assert usage is w.grid.panels["usage"]


def test_the_workload_docks_fields_are_not_cut(qtbot, tmp_path, zoomed):
    zoomed(150)
    w = open_window(qtbot, tmp_path, (1280, 720))
    settle(qtbot, w)
    scroll = w.form_dock.widget()
    view = scroll.viewport()
    for field in (w.form.max_batch, w.form.blocks, w.form.token_budget, w.form.model_combo):
        right = field.mapTo(view, field.rect().topRight()).x()
        assert right <= view.width(), (field.objectName(), right, view.width())


def test_the_narrations_punctuation_is_the_languages_and_its_short_form_shorter(records, monkeypatch):
    from kvviz.ui.serve import narration
    from kvviz.ui.serve.exports import load

    run = load(records["course"])
    text = narration.narrate(run, 3)
    assert text.count(".  ") == 3  # English: four sentences
    short = narration.narrate(run, 0, "short")
    assert len(short) < len(narration.narrate(run, 0)) / 2 and short.startswith("static 0: r0, r1, r2, r3 joined")
    chinese = {".  ": "。", "; ": "；"}  # the separators go through the translation as the words do
    monkeypatch.setattr(narration, "_tr", lambda text: chinese.get(text, text))
    text = narration.narrate(run, 3)
    assert ".  " not in text and "; " not in text and text.count("。") == 3


def test_the_save_dialogs_start_in_the_export_folder(qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    w = open_window(qtbot, tmp_path, (1280, 720))
    w.settings.setValue("export/folder", str(tmp_path))
    seen = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (seen.append(a[2]), ("", ""))[1])
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (seen.append(a[2]), ("", ""))[1])
    w.exports.dialog("png")
    w.open_record_dialog()
    assert seen and all(s.startswith(str(tmp_path)) for s in seen), seen


def test_the_timelines_legend_wraps_instead_of_being_cut(qtbot):
    from kvviz.ui.serve.panels.timeline import LEGEND_KINDS, TimelinePanel

    panel = TimelinePanel()
    qtbot.addWidget(panel)
    fm = panel.fontMetrics()
    one_line = panel.legend_rows(100_000)
    assert len(one_line) == 1
    for width in (160, 300, 500):
        rows = panel.legend_rows(width)
        assert [kind for row in rows for kind, _t in row] == list(LEGEND_KINDS)  # every entry, in order
        for row in rows:
            used = sum(fm.height() - 4 + 3 + fm.horizontalAdvance(text) + 10 for _k, text in row) - 10
            assert len(row) == 1 or used <= width, (width, row)
        assert panel.legend_height(width + 4, None) == (fm.height() + 2) * len(rows) + 2
        assert panel.legend_height(width + 4) >= panel.legend_height(width + 4, None)  # room for the cap note
    assert len(panel.legend_rows(160)) > 1


def test_a_zoom_while_the_window_is_open_gives_way_again(qtbot, tmp_path, records, zoomed):
    w = open_window(qtbot, tmp_path, (1280, 720))
    replay(qtbot, w, records["course"])
    laid = len(w.grid.laid_out())
    label = w.grid.panels["usage"].pool_plot.getAxis("left").label
    before = label.boundingRect().width()
    zoomed(150)  # as View > Zoom does: the app's font, then the plot text
    settle(qtbot, w)
    settle(qtbot, w)
    assert label.boundingRect().width() > 1.3 * before  # the axis names at the zoom's type size
    check_readable(w)
    assert len(w.grid.laid_out()) < laid  # fewer panels keep their (larger) readable size
