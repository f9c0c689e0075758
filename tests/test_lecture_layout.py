"""The lecture hall, panel side: the grid gives way instead of squeezing panels, the
panels zoom live, the step's row is readable however long the run, Reset layout follows the run
shown, and drawing costs what is shown. Offscreen; tests/test_lecture_layout_xcb.py
checks the same on an X server, in the pixels of grabs."""
from __future__ import annotations

import numpy as np
import pytest

from kvviz.records.trace import MaskSpec, RunInfo, StepTrace
from kvviz.ui.history import RunHistory

EXACT = ("naive", "concat", "static", "paged")


@pytest.fixture(autouse=True)
def zoom_back():
    """The panels' zoom is the process's (one window per app): each test starts and ends at 100%."""
    from kvviz.ui import style

    style.set_zoom(100)
    yield
    style.set_zoom(100)


# -- give_way, the arithmetic -----------------------------------------------------------------------------
def fits(rows, needs, room, handle):
    """Checked here, not by the code's own test: each row no wider than the room, the rows no taller."""
    width, height = room
    wide = all(sum(needs[k][0] for k in row) + handle * (len(row) - 1) <= width for row in rows)
    tall = sum(max(needs[k][1] for k in row) for row in rows) + handle * (len(rows) - 1) <= height
    return wide and tall


def test_everything_shown_where_it_fits_in_the_usual_rows():
    from kvviz.ui.shell.giveway import give_way

    shown = ["a", "b", "c", "d", "e"]
    needs = {k: (200, 150) for k in shown}
    rows, moved = give_way(shown, needs, {}, (1200, 800), handle=6)
    assert rows == [["a", "b", "c"], ["d", "e"]] and moved == []
    rows, moved = give_way(shown[:3], needs, {}, (1200, 800), handle=6)
    assert rows == [["a", "b", "c"]] and moved == []


def test_the_least_important_panels_move_behind_tabs_and_the_rest_fit():
    from kvviz.ui.shell.giveway import give_way

    shown = ["tokens", "matrix", "recompute", "attention", "latency", "bytes", "memory", "summary"]
    priority = {"matrix": 10, "summary": 15, "latency": 20, "memory": 30, "attention": 40, "tokens": 45,
                "recompute": 60, "bytes": 70}
    needs = {"tokens": (250, 110), "matrix": (300, 450), "recompute": (220, 230), "attention": (240, 200),
             "latency": (220, 500), "bytes": (250, 390), "memory": (450, 250), "summary": (380, 300)}
    for room in ((1158, 582), (1170, 782), (1590, 942), (900, 400), (400, 300)):
        rows, moved = give_way(shown, needs, priority, room, handle=6)
        kept = [k for row in rows for k in row]
        assert sorted(kept + moved) == sorted(shown) and kept
        assert fits(rows, needs, room, 6) or len(kept) == 1, (room, rows)
        # Nothing kept is less important than something moved, and order is kept within a row.
        if moved:
            assert max(priority[k] for k in kept) < min(priority[k] for k in moved), (room, kept, moved)
        for row in rows:
            assert row == [k for k in shown if k in row]
    rows, moved = give_way(shown, needs, priority, (1590, 942), handle=6)
    assert moved == []  # the tall panels share a row, the short ones the other


def test_one_panel_is_kept_even_where_nothing_fits():
    from kvviz.ui.shell.giveway import give_way

    rows, moved = give_way(["a", "b"], {"a": (900, 900), "b": (900, 900)}, {"b": 1, "a": 2}, (300, 200))
    assert rows == [["b"]] and moved == ["a"]
    assert give_way([], {}, {}, (300, 200)) == ([], [])


def test_share_gives_each_its_need_and_the_room_left_equally():
    from kvviz.ui.shell.giveway import share

    sizes = share(1000, [300, 200, 100], handle=6)
    assert sum(sizes) == 1000 - 12 and all(s >= n for s, n in zip(sizes, [300, 200, 100]))
    assert max(s - n for s, n in zip(sizes, [300, 200, 100])) - min(s - n for s, n in zip(sizes, [300, 200, 100])) <= 1


# -- the grid in the window -------------------------------------------------------------------------------
def synthetic(engines, n_prompt=13, new=30, window=None, top1=None) -> RunHistory:
    """Steps as naive and a cache record them (window: a bounded cache's evictions); top1(engine,
    step) gives top1_agrees."""
    info = RunInfo(run_id="s", prompt_ids=tuple(range(n_prompt)), engines=tuple(engines), max_new_tokens=new)
    hist = RunHistory()
    hist.reset(info)
    for step in range(new):
        for engine in engines:
            stop = n_prompt + step
            start = 0 if engine == "naive" or step == 0 else stop - 1
            paged = engine == "paged"
            hist.add(StepTrace(
                run_id="s", engine=engine, step=step, phase="prefill" if step == 0 else "decode", token_id=65,
                token_text="A", pos_start=start, pos_stop=stop, cache_len=stop, cache_capacity=stop,
                cache_bytes=stop * 64, bytes_copied=0, bytes_written=64, bytes_gathered=0,
                kv_projections=stop - start, latency_ms=1.0,
                mask_spec=MaskSpec(q_len=stop - start, kv_len=stop, past_len=start),
                block_size=4 if paged else None, block_table=tuple(range(-(-stop // 4))) if paged else None,
                top1_agrees=None if top1 is None else top1(engine, step),
                kl_to_exact=None if top1 is None or engine in EXACT else 0.01))
    return hist


def boxes_ok(grid, key) -> list[str]:
    """Each plot of a laid-out panel against its declared readable size (1 px of rounding)."""
    need = grid.panels[key].readable_plot()
    return [f"{key} {r.width()}x{r.height()} < {need}" for r in grid.plot_boxes(key)
            if r.width() < need[0] - 1 or r.height() < need[1] - 1]


def settle_window(qtbot, window, rounds=4):
    for _ in range(rounds):
        qtbot.wait(30)
        window.refresh()
    window.grab()


@pytest.fixture
def ran(qtbot, open_window):
    """A window after a 30-step run of the four exact engines on tiny-random."""
    window = open_window()
    window.form.set_engines(EXACT)
    window.form.tokens_spin.setValue(30)
    window.toolbar.speed_spin.setValue(0)
    with qtbot.waitSignal(window.run_finished, timeout=120_000):
        assert window.start_run()
    return window


@pytest.fixture
def language():
    from kvviz.ui import i18n

    yield i18n
    i18n.set_language("en")


@pytest.mark.parametrize("size,zoom,present,lang", [
    ((1280, 720), 100, False, "en"), ((1280, 720), 150, False, "en"), ((1920, 1080), 150, False, "en"),
    ((1280, 720), 100, True, "en"), ((1280, 720), 150, False, "zh_CN"), ((1500, 920), 100, False, "zh_CN")])
def test_no_laid_out_plot_is_below_its_readable_size_and_the_rest_wait_behind_tabs(qtbot, ran, size, zoom, present,
                                                                                   lang, language):
    """Also in presentation mode (F11) with four engines (the summary laid out whole or on a tab), and in
    Chinese (other legends, other titles)."""
    window = ran
    if lang != "en":
        language.set_language(lang)
        window.retranslate_ui()
        assert window.grid.frames["work_matrix"].header.text() == "工作矩阵"
    window.resize(*size)
    if present:
        window.presentation.set(True, full_screen=False)
    window.grid.set_zoom(zoom)
    settle_window(qtbot, window)
    grid = window.grid
    laid = grid.laid_out()
    assert laid and sorted(laid + grid.moved) == sorted(grid.shown_panels())
    short = [s for key in laid for s in boxes_ok(grid, key)]
    assert not short, short
    for key in laid:  # panels without plots: their frame at least their readable size
        if grid.panels[key].readable_size() is not None:
            w, h = grid.readable_size(key)
            assert grid.frames[key].width() >= w - 1 and grid.frames[key].height() >= h - 1, key
    if grid.moved:  # said on screen: a tab per moved panel and a note
        assert grid.strip.isVisible() and grid.moved_note.isVisible() and grid.moved_note.text()
        assert [grid.tabs.tabText(i) for i in range(1, grid.tabs.count())] == [
            grid.panels[k].title() for k in grid.moved]
        key = grid.moved[0]
        grid.tabs.setCurrentIndex(1)  # the tab shows that panel, alone and readable
        settle_window(qtbot, window)
        assert grid.laid_out() == [key] and not boxes_ok(grid, key)
        assert grid.painted.get(key) == (window.history.version, window.selected_step)
        grid.tabs.setCurrentIndex(0)
        settle_window(qtbot, window)
        assert grid.laid_out() == laid


def test_a_large_window_shows_every_panel_in_the_grid(qtbot, ran):
    ran.resize(1920, 1200)
    settle_window(qtbot, ran)
    assert ran.grid.moved == [] and not ran.grid.strip.isVisible()
    assert sorted(ran.grid.laid_out()) == sorted(ran.grid.shown_panels())


def test_zoom_rescales_plot_text_lines_and_markers_live_and_back(qtbot, ran):
    window = ran
    window.resize(1920, 1080)
    settle_window(qtbot, window)
    latency = window.grid.panels["latency"]
    axis = latency._plots["step"].getAxis("left")
    curve = latency._curves[("step", "naive")]
    marker = latency._markers["step"]
    step = window.selected_step
    before = (axis.style["tickFont"].pointSizeF(), curve.opts["pen"].widthF(), marker.opts["size"])
    window.grid.set_zoom(150)
    settle_window(qtbot, window)
    after = (axis.style["tickFont"].pointSizeF(), curve.opts["pen"].widthF(), marker.opts["size"])
    assert after == pytest.approx(tuple(1.5 * b for b in before), abs=0.26)
    assert window.selected_step == step and window.history.n_steps() == 30  # the run and the step stay
    assert window.grid.painted.get("latency") == (window.history.version, step)  # drawn again at once
    window.grid.set_zoom(200)
    window.grid.set_zoom(100)
    settle_window(qtbot, window)
    again = (axis.style["tickFont"].pointSizeF(), curve.opts["pen"].widthF(), marker.opts["size"])
    assert again == pytest.approx(before)  # from each item's own 100%, never compounding


def test_reset_gives_the_start_layout_for_the_run_shown(qtbot):
    from PySide6.QtCore import QSettings

    from kvviz.ui.grid import PanelGrid

    grid = PanelGrid(QSettings())
    qtbot.addWidget(grid)
    grid.resize(1900, 1100)
    grid.show()
    grid.install()
    exact = synthetic(("naive", "concat"))
    grid.draw(exact, 5, (exact.version, 5))
    grid.panel_actions["quality"].setChecked(True)
    grid.panel_actions["bytes"].setChecked(False)
    grid.reset()
    assert not grid.panel_actions["quality"].isChecked() and grid.panel_actions["bytes"].isChecked()
    approx = synthetic(("concat", "int8"), top1=lambda e, s: True)
    grid.forget_run()
    grid.draw(approx, 5, (approx.version, 5))
    grid.reset()
    assert grid.panel_actions["quality"].isChecked()
    assert "quality" in grid.shown_panels()


def test_block_labels_of_an_earlier_paged_run_do_not_come_back(qtbot):
    from PySide6.QtCore import QSettings

    from kvviz.ui.grid import PanelGrid

    grid = PanelGrid(QSettings())
    qtbot.addWidget(grid)
    grid.resize(1900, 1100)
    grid.show()
    grid.install()
    paged = synthetic(("concat", "paged"), n_prompt=4, new=6)
    grid.draw(paged, 5, (paged.version, 5))
    panel = grid.panels["cache_memory"]
    grid.toggle_focus("cache_memory")  # large: its blocks are labelled
    qtbot.wait(50)
    panel.show_step(paged, 5)
    assert any(t.isVisible() for t in panel._texts)
    grid.forget_run()
    exact = synthetic(("concat", "static"), n_prompt=4, new=6)
    grid.draw(exact, 5, (exact.version, 5))
    grid.toggle_focus("cache_memory")  # resized: labels are placed again
    qtbot.wait(50)
    assert not any(t.isVisible() for t in panel._texts)


def test_one_disagreement_in_200_steps_never_reads_100_percent(qtbot):
    from kvviz.ui.panels._plots import share_text
    from kvviz.ui.panels.quality import QualityPanel

    assert share_text(199 / 200) == "99%" and share_text(1.0) == "100%" and share_text(1 / 1000) == "1%"
    assert share_text(0.0) == "0%" and share_text(0.5) == "50%"
    panel = QualityPanel()
    qtbot.addWidget(panel)
    hist = synthetic(("concat", "int8"), new=200, top1=lambda e, s: not (e == "int8" and s == 77))
    panel.show_step(hist, 199)
    legend = panel._legend.text().replace("\xa0", " ").replace("\u2060", "")
    assert "top-1 99%" in legend and "top-1 100%" not in legend.split("int8")[1]


def test_the_steps_row_is_drawn_readable_however_long_the_run(qtbot):
    """At 2,000 positions one row is a fifth of a pixel: the row's cells are drawn again at least
    STEP_ROW_PX tall (cached reads, the new cell), framed."""
    from kvviz.ui import style
    from kvviz.ui.panels.work_matrix import CACHED, COMPUTED, STEP_ROW_PX, WorkMatrixPanel

    panel = WorkMatrixPanel()
    qtbot.addWidget(panel)
    panel.resize(500, 500)
    panel.show()
    hist = synthetic(("concat",), n_prompt=1990, new=12)
    panel.show_step(hist, 11)
    qtbot.wait(30)
    panel.show_step(hist, 11)
    view = panel._views["concat"]
    vb = view.plot.getViewBox()
    rect = view.row_image.mapRectToScene(view.row_image.boundingRect())
    tall_px = rect.height() * 1  # scene pixels: the view is unscaled
    assert view.row_image.isVisible() and tall_px >= style.px(STEP_ROW_PX) - 0.5
    assert tall_px < vb.height() / 4  # a band, not the matrix
    row = view.row_data
    assert (row == CACHED).sum() > 0.9 * len(row) and row[-1] == COMPUTED
    outline = view.outline.rect()
    assert outline.bottom() == pytest.approx(2001) and outline.height() * vb.height() / 2001 >= STEP_ROW_PX - 0.5


def test_drawing_a_million_positions_costs_what_is_shown(qtbot):
    """A 1,000,000-token prompt: the matrix is pooled to the view's pixels, the token stream holds a
    bounded text, the block pool a pixel per block (the drawing time is scripts/measure_layout.py's)."""
    from PySide6.QtCore import QSettings

    from kvviz.ui.grid import PanelGrid
    from kvviz.ui.panels.token_stream import PROMPT_SHOWN

    grid = PanelGrid(QSettings())
    qtbot.addWidget(grid)
    grid.resize(1500, 900)
    grid.show()
    grid.install()
    hist = synthetic(("concat", "paged"), n_prompt=1_000_000, new=3)
    grid.draw(hist, 2, (hist.version, 2))
    errors = [f.error for f in grid.frames.values() if f.error]
    assert not errors, errors
    matrix = grid.panels["work_matrix"]._views["concat"].image.image
    assert max(matrix.shape) <= 2000
    text = grid.panels["token_stream"]._view.document().characterCount()
    assert text < 20 * PROMPT_SHOWN
    pool = grid.panels["cache_memory"]._image.image
    assert pool.size <= 1_000_000 // 4 + 1000
    assert np.isin(pool, (0, 1, 2, 3, 4)).all()


def test_the_summary_shows_all_its_rows_or_says_where_they_went(qtbot):
    """Too short for the memory wall's rows, the summary sets them aside and its heading names them;
    given its readable size, every row with figures is shown and the heading names none."""
    from kvviz.records.trace import RunInfo as Info
    from kvviz.ui.panels.summary import COLUMNS, WALL_ROWS, SummaryPanel

    base = synthetic(EXACT, new=20)
    info = Info(run_id="s", prompt_ids=base.info.prompt_ids, engines=EXACT, max_new_tokens=20,
                weights_read_bytes=4_000_000, embed_row_bytes=2048, kv_bytes_per_token=1024, copy_gbps=10.0)
    hist = RunHistory()
    hist.reset(info)
    for engine in EXACT:
        for t in base.traces[engine]:
            hist.add(t)
    panel = SummaryPanel()
    qtbot.addWidget(panel)
    panel.resize(420, 200)
    panel.show()
    panel.show_step(hist, 19)
    qtbot.wait(30)
    assert panel._wall_rows == WALL_ROWS  # the run recorded the wall's figures and the copy bandwidth
    aside = panel.set_aside()
    assert aside, "a 200 px panel had room for every row"
    heading = panel._heading.text()
    names = {"bytes_read": "read", "read_gbps": "read rate", "copy_share": "of copy"}
    assert f"(+{len(aside)} in the narration)" in heading, heading
    assert all(names[k] in panel._heading.toolTip() for k in aside), panel._heading.toolTip()
    w, h = panel.readable_size()
    panel.resize(max(w, 420), h)
    qtbot.wait(30)
    panel.show_step(hist, 19)
    assert panel.set_aside() == [] and "narration" not in panel._heading.text()
    hidden = [key for row, (key, _h) in enumerate(COLUMNS) if key in WALL_ROWS and panel._table.isRowHidden(row)]
    assert hidden == [k for k in WALL_ROWS if k not in panel._wall_rows]
