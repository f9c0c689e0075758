"""The read ceiling in the window: the status bar, the latency panel's wall line, the summary's
share and the narration name the read ceiling where the run recorded one, and the copy bandwidth, named
so, for a trace saved before it (figures worked by hand)."""
from __future__ import annotations

import pytest
from PySide6.QtWidgets import QStatusBar

from kvviz.records.trace import RunInfo
from tests.test_wall_ui import TINY, _plot_pixels, cached_history, long_wide_history, shown, summary_panel, wide_history


def _with_read(hist, gbps: float, threads: int = 1):
    hist.info.read_gbps, hist.info.read_threads = gbps, threads
    return hist


def test_status_bar_shows_the_read_ceiling(qtbot, monkeypatch):
    from kvviz.measure import bandwidth
    from kvviz.measure.bandwidth import ReadCeiling
    from kvviz.ui.status import StatusFields

    monkeypatch.setattr(bandwidth, "cached_read_ceiling", lambda: ReadCeiling("cpu", 17.64, 2, 1, 1))
    monkeypatch.setattr(bandwidth, "cpu_bandwidth", lambda: pytest.fail("the copy is not looked up"))
    bar = QStatusBar()
    qtbot.addWidget(bar)
    fields = StatusFields(bar)
    qtbot.waitUntil(lambda: fields.bandwidth.text() == "read 17.6 GB/s (cpu, 2 threads)")
    fields.show_run(RunInfo(device="cpu", copy_gbps=25.8, read_gbps=15.04, read_threads=1))
    assert fields.bandwidth.text() == "read 15.0 GB/s (cpu, 1 thread)"
    fields.show_run(RunInfo(device="cuda:0", copy_gbps=3950.4, read_gbps=4100.0, read_threads=2, peak_gbps=4800.0))
    assert fields.bandwidth.text() == "read 4,100 GB/s of 4,800 GB/s peak (cuda:0)"
    fields.show_run(RunInfo(device="cpu", copy_gbps=25.8))  # an older trace: its copy figure, named so
    assert fields.bandwidth.text() == "copy 25.8 GB/s (cpu)"
    assert "matrix-vector product" in fields.bandwidth.toolTip()


def test_narration_gives_the_share_of_the_read_ceiling(qapp):
    from kvviz.ui.narration import describe

    # 171,872,256 B in 20 ms = 8.59 GB/s: 72% of a 12 GB/s read ceiling (the 16 GB/s copy figure unused)
    text = describe(_with_read(wide_history(copy_gbps=16.0), 12.0), 2, color=lambda e, i: "#000")
    assert "8.59\u00a0GB/s, 72% of this machine's read ceiling." in text and "copy" not in text


def test_short_narration_names_what_its_shares_are_of(qapp):
    """The narrow window's sentence: each engine's rate and share, the first share saying what it is of (a bare
    "(72%)" left a room guessing what of); figures never part from their units."""
    import re

    from kvviz.ui.narration import describe

    history = _with_read(wide_history(engines=("concat", "static"), copy_gbps=16.0), 12.0)
    text = re.sub("<[^>]+>", "", describe(history, 2, color=lambda e, i: "#000", form="short"))
    assert text.endswith("concat 8.59\u00a0GB/s (72% of the read ceiling); static 8.59\u00a0GB/s (72%).")
    older = re.sub("<[^>]+>", "", describe(wide_history(copy_gbps=16.0), 2, color=lambda e, i: "#000", form="short"))
    assert older.endswith("8.59\u00a0GB/s (54% of the copy bandwidth).")
    for form in ("full", "no_traffic", "short"):
        words = describe(history, 2, color=lambda e, i: "#000", form=form)
        assert not re.search(r"\d (GB/s|GiB|MiB|KiB|B|ms|µs)\b", words), form


def test_summary_share_is_of_the_read_ceiling(qtbot):
    # tiny, 6,726,144 B in 3 ms = 2.242 GB/s (tests/test_wall_ui.py): 44.8% of a 5 GB/s read ceiling
    panel = summary_panel(qtbot)
    panel.show_step(_with_read(cached_history(TINY, 10.0, 1.0, (5, 6), 4), 5.0), 2)
    assert panel.table_values()["concat"]["copy_share"] == pytest.approx(0.4484096)
    assert shown(panel, "copy_share") == ("of read ceiling", ["45%"])
    panel.show_step(cached_history(TINY, 10.0, 1.0, (5, 6), 4), 2)  # an older trace: the copy, named so
    assert shown(panel, "copy_share") == ("of copy", ["22%"])


def test_latency_wall_line_is_the_read_ceiling(qtbot):
    from kvviz.ui.panels.latency import COPY_LINE, LatencyPanel

    panel = LatencyPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 700)
    panel.show()
    panel.show_step(_with_read(long_wide_history(copy_gbps=16.0), 9.5), 59)
    plot = panel._plots["bandwidth"]
    qtbot.waitUntil(lambda: _plot_pixels(panel, plot, COPY_LINE) > 200)  # the dashed wall, drawn
    assert "read ceiling 9.50 GB/s" in panel._copy_line.label.toPlainText()
    low, high = plot.getViewBox().viewRange()[1]
    assert low <= 9.5 <= high


def test_memory_dialog_shows_the_roofline(qtbot, monkeypatch):
    from kvviz.measure import bandwidth
    from kvviz.measure.bandwidth import ReadCeiling
    from kvviz.ui.dialogs.memory import MemoryDialog

    monkeypatch.setattr(bandwidth, "cached_read_ceiling", lambda: ReadCeiling("cpu", 17.6, 1, 1, 1))
    dialog = MemoryDialog()
    qtbot.addWidget(dialog)
    dialog.set_preset("chapter-tiny")
    dialog.bandwidth_spin.setValue(10.0)
    dialog.set_lengths([100])
    text = dialog.crossover_label.text()
    # tests/test_read_ceiling_roofline.py works these by hand: 2,436,096 B a step at 100 positions, 0.4999 FLOP
    # a byte, 4,104.9 tokens/s at 10 GB/s; batch 8 reads 2,230,784 + 8 x 205,312 B = 3,873,280 B (3.7 MiB)
    assert "Roofline at 100 positions and 10.0 GB/s: a decode step reads 2.3 MiB, 0.5 FLOP a byte" in text
    assert "batch 8 reads 3.7 MiB" in text and "this machine's read ceiling: 17.6 GB/s at 1 thread(s)" in text


def test_summary_markdown_names_the_read_ceiling():
    from kvviz.records import traceio

    hist = _with_read(cached_history(TINY, 10.0, 1.0, (5, 6), 4), 5.0)
    md = traceio.summary_markdown(hist.traces, hist.info)
    assert "| read | read GB/s | of read ceiling |" in md and "| 45% |" in md  # 2.242 GB/s of 5 GB/s
    old = cached_history(TINY, 10.0, 1.0, (5, 6), 4)  # a trace from before the read ceiling: the copy, named so
    assert "| of copy bandwidth |" in traceio.summary_markdown(old.traces, old.info)


def test_a_rate_below_a_hundredth_stays_text_in_the_narration(qapp):
    """fmt_figure says "<0.01" for a trace of a rate; unescaped, Qt's rich text read it as a tag and
    dropped the narration up to the next tag (the next engine's name went with it)."""
    from PySide6.QtGui import QTextDocument

    from kvviz.ui.narration import describe

    # 171,872,256 B in 20 s = 0.0086 GB/s
    hist = _with_read(wide_history(latency_ms=20_000.0, engines=("concat", "static")), 12.0)
    doc = QTextDocument()
    doc.setHtml(describe(hist, 2, color=lambda e, i: "#000"))
    text = doc.toPlainText()
    assert "concat read 104.5 MiB of weights and 59.4 MiB of K/V in 20.0 s, <0.01 GB/s, 0% of" in text, text
    assert "static read 104.5 MiB" in text, text


def test_a_message_gets_its_room_in_a_narrow_status_bar(qtbot, monkeypatch):
    """At 1280x720 and 150% the fields left a message no room ("finished: 150 ste" ran into "device cpu"):
    while a message shows, the least needed fields step aside; when it goes, they come back. The read ceiling
    never steps aside."""
    from PySide6.QtWidgets import QMainWindow

    from kvviz.measure import bandwidth
    from kvviz.ui.status import StatusFields, WindowCost

    monkeypatch.setattr(bandwidth, "cached_read_ceiling", lambda: bandwidth.ReadCeiling("cpu", 24.9, 1, 1, 1))
    window = QMainWindow()
    qtbot.addWidget(window)
    window.resize(760, 200)
    fields = StatusFields(window.statusBar())
    fields.show_run(RunInfo(device="cpu", dtype="float32", model_name="wide", param_count=27_530_000,
                            kv_bytes_per_token=32768, read_gbps=24.9, read_threads=1))
    window.show()
    qtbot.waitExposed(window)
    bar = window.statusBar()

    def left_of_fields() -> int:  # where the leftmost field that takes room begins
        return min(w.geometry().left() for w in fields._fields() if w.isVisible() and w.width() > 0)

    message = "finished: 150 steps in 14.2 s"
    bar.showMessage(message)  # the window's order: the message, then the run's cost beside the fields
    cost = WindowCost()
    cost.cpu_s, cost.wall_s = 0.5, 2.0
    fields.show_cost(cost)
    qtbot.waitUntil(lambda: left_of_fields() > bar.fontMetrics().horizontalAdvance(message))
    assert fields.bandwidth.width() > 0 and fields.bandwidth.text() == "read 24.9 GB/s (cpu, 1 thread)"
    assert fields.cost.width() == 0  # the least needed went first
    bar.clearMessage()
    qtbot.waitUntil(lambda: all(w.width() > 0 for w in fields._fields() if w.isVisible()))
    assert fields.cost.isVisible() and fields.mem.isHidden()  # visibility as the run left it
    assert left_of_fields() < bar.fontMetrics().horizontalAdvance(message)  # the room the message needed


def test_summary_says_what_ran_each_decode_step(qtbot):
    """A run has one decode kernel, named in the summary's heading, with no note beside it; an older trace whose
    engines ran different kernels says which ran where, and that their times then differ by kernel too; a trace
    saved before it was recorded says nothing."""
    import re

    panel = summary_panel(qtbot)
    hist = cached_history(TINY, 10.0, 1.0, (5, 6), 4, engines=("naive", "concat", "static"))
    hist.info.decode_kernels = ("torch", "native", "native")
    panel.show_step(hist, 2)
    note = re.sub("<[^>]+>", " ", panel._note.text())
    assert "Decode step: PyTorch (naive), C step (concat, static). Their times differ by kernel as " \
           "well as by cache." in note  # in the engines' order
    assert "decode kernel" not in panel._heading.text()
    hist.info.decode_kernels = ("native", "native", "native")
    panel.show_step(hist, 2)
    assert panel._heading.text().endswith(", decode kernel C step")
    assert "Decode step:" not in panel._note.text() and "differ by kernel" not in panel._note.text()
    hist.info.decode_kernels = ()
    panel.show_step(hist, 2)
    assert "Decode step:" not in panel._note.text() and "kernel" not in panel._heading.text()


def test_a_share_past_the_ceiling_says_the_step_fits_in_the_cache(qapp):
    """tiny's steps read 2 MiB and pass the read ceiling (a probe of 128 MiB runs from memory, they from the
    CPU's cache): the narration says so where the run recorded the cache's size, and only then."""
    from kvviz.ui.narration import describe

    # 171,872,256 B (163.9 MiB) in 10 ms = 17.19 GB/s: 143% of a 12 GB/s ceiling
    fast = _with_read(wide_history(copy_gbps=16.0, latency_ms=10.0), 12.0)
    fast.info.cache_bytes = 256 << 20
    text = describe(fast, 2, color=lambda e, i: "#000").replace("\u00a0", " ")
    assert "143% of this machine's read ceiling. Above 100%: the 163.9 MiB a step reads fit in this CPU's " \
           "256.0 MiB cache, which the read ceiling's probe overflows." in text
    short = describe(fast, 2, color=lambda e, i: "#000", form="short").replace("\u00a0", " ")
    assert short.endswith("(143% of the read ceiling). Over 100%: read from the CPU's 256.0 MiB cache.")
    fast.info.cache_bytes = 32 << 20  # more than the cache holds: no such reason
    assert "Above 100%" not in describe(fast, 2, color=lambda e, i: "#000")
    assert "Over 100%" not in describe(fast, 2, color=lambda e, i: "#000", form="short")
    slow = _with_read(wide_history(copy_gbps=16.0, latency_ms=20.0), 12.0)  # 72%: nothing to explain
    slow.info.cache_bytes = 256 << 20
    assert "Above 100%" not in describe(slow, 2, color=lambda e, i: "#000")
