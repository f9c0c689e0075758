"""The Serve and Watch views read as drawn: an empty plot has no step line (its pixels), the Counters table's
columns share its width evenly and none is cut, the block pool's headings keep all their figures in Chinese and
English at 1280x720 (zoom 100 and 150), the short narration keeps the cached blocks in both languages, and a
plot of whole requests has whole-number ticks only. Serve records from `kvviz serve` on tiny-random; a watch
recording written here.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from test_serve_lecture import _serve, open_window, settle, zoomed  # noqa: F401 (zoomed: a fixture)
from test_serve_view_panels import shown

from kvviz.ui import i18n
from kvviz.ui.exporters import image_array
from kvviz.ui.serve.exports import load


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("legible")
    return {"course": _serve(folder / "course.json", "course-batch", "static,continuous,paged,prefix")}


@pytest.fixture(scope="module")
def one_at_a_time(tmp_path_factory) -> Path:
    """course-batch served one request at a time: the batch is never above 1."""
    import subprocess
    import sys

    path = tmp_path_factory.mktemp("one") / "one.json"
    done = subprocess.run([sys.executable, "-m", "kvviz", "serve", "--workload", "course-batch", "--schedulers",
                           "continuous,paged", "--max-batch", "1", "--model", "tiny-random", "--threads", "1",
                           "--json", str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return path


@pytest.fixture(scope="module")
def watch_recording(tmp_path_factory) -> Path:
    """One server's five samples a second apart, tokens and prefix queries growing, nobody waiting."""
    pytest.importorskip("msgspec")
    from test_watch_zh import URL, _metrics

    from kvviz.peers.watch.recording import Header, RecordingWriter, Sample

    t0 = 1000.0
    writer = RecordingWriter(tmp_path_factory.mktemp("watch") / "grow.kvwatch", Header(t0, (URL,), (1,)))
    for i in range(5):
        writer.write(Sample(t0 + 0.5 + i, 0, _metrics(float(i), hits=2.0 * i, queries=4.0 * i)))
    return writer.close()


def watch_frame(path: Path):
    from kvviz.ui.watch.source import ReplaySource

    source = ReplaySource(path)
    source.advance(10)
    return source.frame()


def step_line_pixels(panel) -> list[int]:
    """Per plot, the dark grey pixels inside its view box (a step line: the curves are coloured, the grid light)."""
    image = image_array(panel.grab().toImage()).astype(int)
    counts = []
    for plot in panel.plots:
        box = plot.getViewBox()
        rect = box.mapRectToScene(box.boundingRect())
        top_left = panel.view.mapTo(panel, panel.view.mapFromScene(rect.topLeft()))
        bottom_right = panel.view.mapTo(panel, panel.view.mapFromScene(rect.bottomRight()))
        inside = image[top_left.y() + 2:bottom_right.y() - 2, top_left.x() + 2:bottom_right.x() - 2]
        grey = (inside.max(axis=2) - inside.min(axis=2) <= 8) & (inside.max(axis=2) < 130)
        counts.append(int(grey.sum()))
    return counts


def show_panel(qtbot, panel, size=(500, 400)):
    qtbot.addWidget(panel)
    panel.resize(*size)
    panel.show()
    qtbot.waitExposed(panel)
    qtbot.wait(20)


def test_the_serve_usage_plots_draw_no_step_line_before_a_run(qtbot, records):
    from kvviz.ui.serve.panels.usage import UsagePanel

    panel = UsagePanel()
    show_panel(qtbot, panel)
    assert step_line_pixels(panel) == [0, 0]
    run = load(records["course"])
    shown(qtbot, panel, run, 10, size=(500, 400))
    assert all(n > 40 for n in step_line_pixels(panel))  # the line at step 10, down each plot
    panel.clear()
    qtbot.wait(20)
    assert step_line_pixels(panel) == [0, 0]


@pytest.mark.parametrize("name", ["WatchUsagePanel", "PrefixPanel", "RequestsPanel", "TimingPanel"])
def test_the_watch_plots_draw_no_step_line_before_a_sample(qtbot, watch_recording, name):
    from kvviz.ui.watch import panels

    panel = getattr(panels, name)()
    show_panel(qtbot, panel)
    assert step_line_pixels(panel) == [0, 0]
    frame = watch_frame(watch_recording)
    panel.show_step(frame, frame.t / 2)
    qtbot.wait(20)
    assert all(n > 40 for n in step_line_pixels(panel))  # the selected time's line, down each plot


def test_even_widths_share_the_room_and_keep_each_columns_need():
    from kvviz.ui.serve.panels.counters import even_widths

    assert even_widths([40, 50, 45, 60], 400) == [100, 100, 100, 100]
    assert even_widths([40, 250, 45], 400) == [75, 250, 75]  # the wide one keeps its need, the rest share
    assert even_widths([40, 50, 45], 301) == [101, 100, 100]  # every pixel used, the odd one to the first
    assert even_widths([90, 120, 95], 250) == [90, 120, 95]  # more than the room: each its need (a scroll bar)
    assert even_widths([], 300) == []


@pytest.mark.parametrize("width", [930, 420, 240])
def test_the_counters_columns_share_the_tables_width_evenly(qtbot, records, width):
    from kvviz.ui.serve.panels.counters import CountersPanel

    panel = CountersPanel()
    shown(qtbot, panel, load(records["course"]), 19, size=(width, 360))
    qtbot.wait(20)
    table, header = panel.table, panel.table.horizontalHeader()
    sizes = [header.sectionSize(c) for c in range(table.columnCount())]
    needs = [max(header.sectionSizeHint(c), table.sizeHintForColumn(c)) for c in range(table.columnCount())]
    assert len(sizes) == 4 and all(s >= n for s, n in zip(sizes, needs)), (sizes, needs)  # no figure cut
    room = table.viewport().width()
    if sum(needs) <= room:
        assert sum(sizes) == room and not table.horizontalScrollBar().isVisible(), (sizes, room)
        wide = [s for s, n in zip(sizes, needs) if s > n]  # the columns given more than they need: one share each
        assert wide and max(wide) - min(wide) <= 1, (sizes, needs)
        assert sizes[-1] <= min(sizes) + 1 or sizes[-1] == needs[-1], sizes  # the last no wider than its share
    else:
        assert sizes == needs and table.horizontalScrollBar().isVisible(), (sizes, needs, room)


@pytest.fixture
def language():
    def use(lang: str) -> None:
        i18n.set_language(lang)

    yield use
    i18n.set_language("en")


@pytest.mark.parametrize("lang", ["zh_CN", "en"])
@pytest.mark.parametrize("percent", [100, 150])
def test_the_block_pools_headings_keep_their_figures_at_1280x720(qtbot, tmp_path, records, zoomed,  # noqa: F811
                                                                 language, lang, percent):
    from kvviz.serving.narration import pool_heading

    language(lang)
    zoomed(percent)
    w = open_window(qtbot, tmp_path, (1280, 720))
    w.retranslate_ui()
    assert w.exports.open_record(records["course"])
    settle(qtbot, w)
    w.select_step(w.run.n_steps() - 1)  # prefix holds cached blocks: the longest heading
    settle(qtbot, w)
    grid = w.grid
    if "pool" in grid.moved:
        grid.tabs.setCurrentIndex(1 + grid.moved.index("pool"))
        settle(qtbot, w)
    panel = grid.panels["pool"]
    panel.repaint()
    assert set(panel.heads) == {"static", "continuous", "paged", "prefix"}
    fm = panel.fontMetrics()
    for k, lines in panel.heads.items():
        record = w.run.at(k, w.step)
        whole = {pool_heading(k, record, panel.tr, form).replace(" ", "") for form in ("full", "short")}
        assert "".join(lines).replace(" ", "") in whole, (k, lines, whole)  # every word and figure, none cut
        assert all(fm.horizontalAdvance(line) <= panel.head_width for line in lines), (k, lines, panel.head_width)
        assert panel.head_width <= panel.width() - 6 and panel.head_width > 0
        assert record.pool.cached_blocks == 0 or str(record.pool.cached_blocks) in "".join(lines)
    assert w.run.at("prefix", w.step).pool.cached_blocks > 0
    w.close()


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_the_short_narration_keeps_the_cached_blocks_in_both_languages(qtbot, records, language, lang):
    from kvviz.ui.serve.narration import _tr, narrate

    language(lang)
    run = load(records["course"])
    step = run.n_steps() - 1
    cached = run.at("prefix", step).pool.cached_blocks
    assert cached > 0
    short, full = narrate(run, step, "short"), narrate(run, step, "full")
    said = _tr(" ({0} more cached)").format(cached)
    assert said in full and said in short, (said, short)
    if lang == "zh_CN":
        assert said == f"（另有 {cached} 块已缓存）"  # the translation's own words, not the English fallback


def tick_labels(axis) -> list[str]:
    """The axis's tick labels that it draws (those inside its bounds) at its range and size."""
    from PySide6.QtGui import QImage, QPainter

    image = QImage(10, 10, QImage.Format.Format_RGB32)
    painter = QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [text for _rect, _flags, text in specs[2]] if specs else []


def test_the_batch_plot_numbers_whole_requests_only(qtbot, one_at_a_time, records):
    import pyqtgraph as pg

    from kvviz.ui.serve.panels.usage import UsagePanel

    panel = UsagePanel()
    run = load(one_at_a_time)
    assert max(run.series("paged")["batch"]) == 1
    shown(qtbot, panel, run, 5, size=(500, 400))
    axis = panel.batch_plot.getAxis("left")
    low, high = panel.batch_plot.getViewBox().viewRange()[1]
    plain = [s for spacing, values in pg.AxisItem("left").tickValues(low, high, axis.height())
             for s in pg.AxisItem("left").tickStrings(values, 1.0, spacing)]
    assert any("." in s for s in plain), plain  # a plain axis would number tenths or halves here
    labels = tick_labels(axis)
    assert labels and all("." not in s for s in labels), labels
    shown(qtbot, panel, load(records["course"]), 5, size=(500, 400))  # a batch of 4 at most
    labels = tick_labels(axis)
    assert len(labels) >= 2 and all("." not in s for s in labels), labels


@pytest.mark.parametrize("name, plots", [("RequestsPanel", (0, 1)), ("WatchUsagePanel", (1,)), ("PrefixPanel", (1,))])
def test_the_watch_plots_of_counts_number_0_and_1_only(qtbot, watch_recording, name, plots):
    from kvviz.ui.watch import panels

    panel = getattr(panels, name)()
    show_panel(qtbot, panel)
    frame = watch_frame(watch_recording)
    panel.show_step(frame, frame.t)
    qtbot.wait(20)
    for i in plots:  # nobody waits or is preempted, one request runs, a block stored or none: never 0.5
        assert tick_labels(panel.plots[i].getAxis("left")) == ["0", "1"], i
