"""Each serve panel against hand-worked records (tests/test_serve_view_records.py): what it drew, counted in
the pixels of a grab, against counts worked out from the requests' lengths (the course's figures), not
from the panel's own arithmetic.
"""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QColor, QMouseEvent
from test_serve_view_records import COURSE_NEW, COURSE_PROMPTS, course_batch_static, shared_prefix_pair

from kvviz.serving.history import ServeHistory
from kvviz.ui.exporters import image_array
from kvviz.ui.serve import colors


def rgb(hex_color: str) -> np.ndarray:
    c = QColor(hex_color)
    return np.array([c.red(), c.green(), c.blue()])


def count(image: np.ndarray, hex_color: str, tol: int = 0) -> int:
    return int(np.count_nonzero(np.abs(image.astype(int) - rgb(hex_color)).max(axis=2) <= tol))


def shown(qtbot, panel, run, step, request=None, size=(900, 320)):
    qtbot.addWidget(panel)
    panel.resize(*size)
    panel.show()
    qtbot.waitExposed(panel)
    panel.show_step(run, step, request)
    qtbot.wait(20)
    return image_array(panel.grab().toImage())


@pytest.fixture
def course():
    return ServeHistory.from_runs((course_batch_static(),))


@pytest.fixture
def pair():
    return ServeHistory.from_runs((shared_prefix_pair("paged"), shared_prefix_pair("prefix")))


def cells_area(panel, image):
    """The grab's pixels inside the scheduler's block of cells (the legend's swatches left out), with a
    margin of 2 px around it (the selection marks)."""
    _k, rect, _w = panel.blocks[0]
    return image[rect.top() - 2:rect.bottom() + 3, rect.left() - 2:rect.right() + 3]


# -- request timeline ----------------------------------------------------------------------------
def test_the_course_batch_timeline_shows_55_padding_and_23_idle_cells(qtbot, course):
    from kvviz.ui.serve.panels.timeline import TimelinePanel

    panel = TimelinePanel()
    image = cells_area(panel, shown(qtbot, panel, course, step=course.n_steps() - 1))
    w, h = panel.cell_px
    assert w >= 1 and h >= 1, "the 50 slots fit the panel in whole pixels"
    longest, most = max(COURSE_PROMPTS), max(COURSE_NEW)
    padding = sum(longest - p for p in COURSE_PROMPTS)
    idle = sum(most - n for n in COURSE_NEW)
    assert (padding, idle) == (55, 23)  # the course's figures, from the lengths alone
    assert count(image, colors.CELL_COLORS["padding"]) == padding * w * h
    assert count(image, colors.CELL_COLORS["idle"]) == idle * w * h
    # Prefill: every prompt position once; decode: every token after the first (the prefill emits one).
    assert count(image, colors.CELL_COLORS["prefill"]) == sum(COURSE_PROMPTS) * w * h
    assert count(image, colors.CELL_COLORS["decode"]) == sum(n - 1 for n in COURSE_NEW) * w * h
    assert "static 78" in panel.title()


def test_a_timeline_cell_click_picks_its_request_and_step(qtbot, course):
    from kvviz.ui.serve.panels.timeline import TimelinePanel

    panel = TimelinePanel()
    shown(qtbot, panel, course, step=0)
    _k, rect, cell_w = panel.blocks[0]
    row_px = panel.cell_px[1]
    # Request 2, slot 30 + 4: the fifth decode step after the 30-slot prefill = step 5.
    point = QPoint(rect.left() + int((30 + 4 + 0.5) * cell_w), rect.top() + int(2.5 * row_px))
    with qtbot.waitSignal(panel.cell_picked) as picked:
        qtbot.mouseClick(panel, Qt.MouseButton.LeftButton, pos=point)
    assert picked.args == [2, 5]


def test_the_timeline_fades_the_steps_after_the_one_shown(qtbot, course):
    from kvviz.ui.serve.panels.timeline import TimelinePanel

    panel = TimelinePanel()
    image = cells_area(panel, shown(qtbot, panel, course, step=0))
    w, h = panel.cell_px
    # Only step 0 (prefill and padding) keeps its colours; every decode and idle cell is faded.
    assert count(image, colors.CELL_COLORS["padding"]) == 55 * w * h
    assert count(image, colors.CELL_COLORS["decode"]) == 0 and count(image, colors.CELL_COLORS["idle"]) == 0


# -- block pool ----------------------------------------------------------------------------------
def block_pixels(image, rect):
    return image[rect.top() + 3:rect.bottom() - 2, rect.left() + 3:rect.right() - 2].reshape(-1, 3)


def test_the_pool_marks_shared_blocks_and_keeps_cached_ones_apart_from_free(qtbot, pair):
    from kvviz.ui.serve.panels.pool import PoolPanel

    panel = PoolPanel()
    image = shown(qtbot, panel, pair, step=1, size=(700, 300))
    owner0 = rgb(colors.request_color(0).name())
    prefix = panel.cells["prefix"]
    paged = panel.cells["paged"]

    def share(rect, color):
        px = block_pixels(image, rect)
        return np.mean(np.abs(px.astype(int) - color).max(axis=1) <= 2)

    black = np.array([0, 0, 0])
    # prefix, step 1: blocks 0 and 1 are held by both requests (ref count 2, drawn "×2"), block 2 by request 0.
    for b in (0, 1):
        assert share(prefix[b], owner0) > 0.5 and share(prefix[b], black) > 0
    # Block 2 holds request 0's positions 32..37 after step 1: filled to 6 of its 16, the rest paler.
    assert abs(share(prefix[2], owner0) - 6 / 16) < 0.08 and share(prefix[2], black) == 0
    # paged: the same prompts in six blocks of their own, none shared.
    assert all(share(paged[b], black) == 0 for b in range(6))
    image = shown(qtbot, panel, pair, step=3, size=(700, 300))
    free = rgb(colors.FREE_BLOCK)
    # After both finished: prefix keeps the system prompt's two blocks cached (hatched), paged frees all.
    assert all(share(panel.cells["paged"][b], free) > 0.95 for b in range(8))
    for b in (0, 1):
        assert share(panel.cells["prefix"][b], free) < 0.05 and share(panel.cells["prefix"][b], rgb("#555555")) > 0.1
    assert all(share(panel.cells["prefix"][b], free) > 0.95 for b in range(2, 8))


def test_hovering_a_block_shows_its_requests_block_table(qtbot, pair):
    from kvviz.ui.serve.panels.pool import PoolPanel, table_text

    panel = PoolPanel()
    shown(qtbot, panel, pair, step=1, size=(700, 300))
    block3 = panel.cells["prefix"][3]  # request 1's own block (its logical block 2)
    move = QMouseEvent(QMouseEvent.Type.MouseMove, QPointF(block3.center()),
                       QPointF(panel.mapToGlobal(block3.center())), Qt.MouseButton.NoButton,
                       Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
    panel.mouseMoveEvent(move)
    assert panel.hovered == ("prefix", 1)
    image = image_array(panel.grab().toImage())
    # The table's blocks (0, 1, 3) are edged in 2 px of the selection colour, block 2 is not.
    edge = rgb(colors.SELECTED_EDGE)
    for b, edged in ((0, True), (1, True), (3, True), (2, False)):
        r = panel.cells["prefix"][b]
        left_edge = image[r.top() + 4:r.bottom() - 4, r.left()]
        assert (np.abs(left_edge.astype(int) - edge).max(axis=1) <= 2).all() == edged, b
    assert table_text(1, (0, 1, 3)) == "request 1: 0→0 1→1 2→3"


# -- plots, counters, text, narration -----------------------------------------------------------
def test_usage_draws_each_scheduler_and_latency_has_the_hand_worked_ttft(qtbot, course, pair):
    from kvviz.ui.serve.panels.latency import LatencyPanel
    from kvviz.ui.serve.panels.usage import UsagePanel

    usage = UsagePanel()
    image = shown(qtbot, usage, pair, step=2, size=(500, 400))
    plot_area = image[usage.legend.height():]
    for k in ("paged", "prefix"):
        assert count(plot_area, colors.scheduler_color(k), tol=30) > 50, k
    latency = LatencyPanel()
    shown(qtbot, latency, course, step=19, size=(500, 400))
    ttft, tpot = latency.values["static"]
    # Every request's first token comes out of the one 20 ms prefill; then 5 ms per decode step.
    assert np.allclose(ttft, 20.0) and np.allclose(tpot, 5.0)
    shown(qtbot, latency, pair, step=1, size=(500, 400))
    ttft, _ = latency.values["prefix"]
    assert ttft[1] == pytest.approx(10.0)  # arrives at step 1, first token at the end of step 1
    image = image_array(latency.grab().toImage())
    assert count(image[latency.legend.height():], colors.scheduler_color("prefix"), tol=10) > 30


def test_counters_show_the_course_waste_and_the_prefix_saving(qtbot, course, pair):
    from kvviz.ui.serve.panels.counters import CountersPanel, rows

    panel = CountersPanel()
    shown(qtbot, panel, course, step=19, size=(400, 400))
    keys = [k for k, _n in rows()]

    def cell(key, col=0):
        return panel.table.item(keys.index(key), col).text()

    assert (cell("padding"), cell("padding_share"), cell("idle"), cell("idle_share")) == ("55", "46%", "23", "29%")
    shown(qtbot, panel, pair, step=3, size=(400, 400))
    # Two 36-token prompts: paged prefills 72 positions; prefix reuses the second's 32 (2 blocks of 16).
    assert (cell("prefill", 0), cell("saved", 0)) == ("72", "0")
    assert (cell("prefill", 1), cell("saved", 1), cell("hit_rate", 1)) == ("40", "32", f"{32 / 72:.0%}")


def test_the_text_panel_follows_the_selected_request(qtbot, pair):
    from kvviz.ui.serve.panels.text import TextPanel

    panel = TextPanel()
    shown(qtbot, panel, pair, step=2, request=1, size=(400, 300))
    text = panel.browser.toPlainText()
    assert "q2?" in text and text.count("CD") == 2  # request 1's first two tokens (67, 68) under both
    assert panel.title() == "Request 1: its text"


def test_the_narration_tells_joins_reuse_and_departures(pair):
    from kvviz.ui.serve.narration import narrate

    step1 = narrate(pair, 1)
    assert "prefix, step 1: request 1 joined and reused 2 blocks of a cached prefix (32 tokens not prefilled)" in step1
    assert "paged, step 1: request 1 joined; 2 of 8 blocks free" in step1
    assert "request 0 finished and left" in narrate(pair, 2)
    assert "6 of 8 blocks free (2 more cached)" in narrate(pair, 3)
