"""The memory wall in the app: the status bar's copy bandwidth and the narration's bytes read, from
RunInfo and the traces alone (figures worked by hand)."""
from __future__ import annotations

import math

import pytest
from PySide6.QtWidgets import QStatusBar

from kvviz.costs.wall import WallShape
from kvviz.records.trace import RunInfo, StepTrace
from kvviz.ui.history import RunHistory

WIDE = dict(weights_read_bytes=109_611_008, embed_row_bytes=2_048, kv_bytes_per_token=32_768)


def cached_history(wall: dict, copy_gbps: float, latency_ms: float, decode_stops: tuple[int, ...], prompt: int,
                   engines=("concat",), model_name: str = "m", max_new_tokens: int | None = None) -> RunHistory:
    """A prefill over `prompt` positions, then one decode step to each of decode_stops, every step
    latency_ms long; a cache holds every position (naive holds none and computes them all again)."""
    hist = RunHistory()
    hist.reset(RunInfo(run_id="c", model_name=model_name, device="cpu", dtype="float32", engines=engines,
                       prompt_ids=tuple(range(prompt)),
                       max_new_tokens=len(decode_stops) + 1 if max_new_tokens is None else max_new_tokens,
                       copy_gbps=copy_gbps, **wall))
    for engine in engines:
        for step, stop in enumerate((prompt, *decode_stops)):
            start = 0 if step == 0 or engine == "naive" else stop - 1
            held = 0 if engine == "naive" else stop
            hist.add(StepTrace(run_id="c", engine=engine, step=step, phase="prefill" if step == 0 else "decode",
                               token_id=65, token_text="A", pos_start=start, pos_stop=stop, cache_len=held,
                               cache_capacity=held, cache_bytes=held * wall["kv_bytes_per_token"], bytes_copied=0,
                               bytes_written=0, bytes_gathered=0, kv_projections=1, latency_ms=latency_ms))
    return hist


def wide_history(copy_gbps=16.0, latency_ms=20.0, engines=("concat",), **info) -> RunHistory:
    """`wide` at 1,900 positions: a prefill of 8, then decode steps to 1,899 and 1,900."""
    return cached_history({**WIDE, **info}, copy_gbps, latency_ms, (1899, 1900), 8, engines, model_name="wide",
                          max_new_tokens=1893)


def test_narration_tells_the_bytes_read_and_the_bandwidth(qapp):
    from kvviz.ui.narration import describe

    # step 2 of concat on wide attends over 1,900 positions: weights 109,611,008 + 2,048 = 109,613,056 B
    # (104.5 MiB), K/V 1,900 x 32,768 = 62,259,200 B (59.4 MiB); 171,872,256 B in 20 ms = 8.59 GB/s,
    # 53.7% of 16 GB/s
    text = describe(wide_history(), 2, color=lambda e, i: "#000").replace("\u00a0", " ")  # figures' no-break spaces
    assert ("read 104.5 MiB of weights and 59.4 MiB of K/V in 20.0 ms, 8.59 GB/s, 54% of this machine's copy "
            "bandwidth.") in text
    assert WallShape(109_611_008, 2_048, 32_768).step(1899, 1900).gbps(20.0) == pytest.approx(8.5936128)
    # no copy figure recorded: the bytes and the rate, no percentage
    assert "GB/s." in describe(wide_history(copy_gbps=0.0), 2, color=lambda e, i: "#000")
    for bad in (math.nan, math.inf, -5.0):
        assert "% of" not in describe(wide_history(copy_gbps=bad), 2, color=lambda e, i: "#000")
    # a trace saved before these figures: the sentence is left out, nothing else changes
    old = wide_history(weights_read_bytes=0, embed_row_bytes=0)
    assert "of weights" not in describe(old, 2, color=lambda e, i: "#000")
    # naive computes every position again: its rows too (1,900 x 2,048 B more than one row)
    both = describe(wide_history(engines=("naive", "concat")), 2, color=lambda e, i: "#000").replace("\u00a0", " ")
    assert "naive</b> read 108.2 MiB of weights" in both and "concat</b> read 104.5 MiB of weights" in both


def test_status_bar_shows_the_copy_bandwidth(qtbot, monkeypatch):
    from kvviz.measure import bandwidth
    from kvviz.ui.status import StatusFields

    monkeypatch.setattr(bandwidth, "cpu_bandwidth", lambda: bandwidth.Bandwidth("cpu", 15.67, 1, 1))
    monkeypatch.setattr(bandwidth, "cached_read_ceiling", lambda: None)  # no read ceiling measured: the copy
    bar = QStatusBar()
    qtbot.addWidget(bar)
    fields = StatusFields(bar)
    qtbot.waitUntil(lambda: fields.bandwidth.text() == "copy 15.7 GB/s (cpu)")
    fields.show_run(RunInfo(device="cuda:0", copy_gbps=3950.4, peak_gbps=4800.0))
    assert fields.bandwidth.text() == "copy 3,950 GB/s of 4,800 GB/s peak (cuda:0)"
    fields.show_run(RunInfo(device="cpu", copy_gbps=12.34))
    assert fields.bandwidth.text() == "copy 12.3 GB/s (cpu)"
    fields.show_run(RunInfo(device="cpu", copy_gbps=math.nan))  # a hostile trace: this machine's figure
    assert fields.bandwidth.text() == "copy 15.7 GB/s (cpu)"
    fields.show_choice("tiny", "cpu", "float32", None)
    assert fields.bandwidth.text() == "copy 15.7 GB/s (cpu)"


def _plot_pixels(panel, plot, colour: str, tol: int = 40) -> int:
    """Pixels of `colour` inside the plot's view box, as drawn on screen."""
    import numpy as np
    from PySide6.QtGui import QColor, QImage
    from PySide6.QtWidgets import QApplication

    QApplication.processEvents()
    view = panel._canvas
    image = view.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    rect = view.mapFromScene(plot.getViewBox().sceneBoundingRect()).boundingRect()
    ptr = image.constBits()
    arr = np.frombuffer(ptr, np.uint8, image.sizeInBytes()).reshape(image.height(), image.bytesPerLine() // 4, 4)
    area = arr[max(rect.top(), 0):rect.bottom(), max(rect.left(), 0):rect.right(), :3].astype(int)
    c = QColor(colour)
    want = np.array([c.blue(), c.green(), c.red()])
    return int((np.abs(area - want).max(axis=2) <= tol).sum())


def long_wide_history(copy_gbps=16.0, weights=True) -> RunHistory:
    hist = RunHistory()
    extra = WIDE if weights else dict(kv_bytes_per_token=32_768)
    hist.reset(RunInfo(run_id="w", model_name="wide", device="cpu", dtype="float32", engines=("concat",),
                       prompt_ids=tuple(range(8)), max_new_tokens=60, copy_gbps=copy_gbps, **extra))
    for step in range(60):
        stop = 8 + step
        hist.add(StepTrace(run_id="w", engine="concat", step=step, phase="prefill" if step == 0 else "decode",
                           token_id=65, token_text="A", pos_start=0 if step == 0 else stop - 1, pos_stop=stop,
                           cache_len=stop, cache_capacity=stop, cache_bytes=stop * 32_768, bytes_copied=0,
                           bytes_written=0,
                           bytes_gathered=0, kv_projections=1, latency_ms=20.0 + step % 5))
    return hist


def test_latency_panel_draws_the_bandwidth_against_the_copy_line(qtbot):
    from kvviz.ui import style
    from kvviz.ui.panels.latency import COPY_LINE, LatencyPanel

    panel = LatencyPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 700)
    panel.show()
    hist = long_wide_history()
    panel.show_step(hist, 59)
    plot = panel._plots["bandwidth"]
    gbps = panel.curve("read_gbps", "concat")
    # step 1 attends over 9 positions: 109,613,056 + 9 x 32,768 B in 21 ms
    assert gbps[1] == pytest.approx((109_613_056 + 9 * 32_768) / 0.021 / 1e9)
    qtbot.waitUntil(lambda: _plot_pixels(panel, plot, style.engine_color("concat", 0)) > 200)
    assert _plot_pixels(panel, plot, COPY_LINE) > 200  # the dashed wall across the plot
    assert "copy bandwidth 16.0 GB/s" in panel._copy_line.label.toPlainText()
    assert plot.getViewBox().viewRange()[1][1] >= 16.0  # the wall is inside the range
    # a trace without the figures: no curve and no wall, the other plots as before
    panel.clear()
    old = long_wide_history(copy_gbps=0.0, weights=False)
    panel.show_step(old, 59)
    qtbot.wait(50)
    assert _plot_pixels(panel, plot, COPY_LINE) == 0
    assert _plot_pixels(panel, plot, style.engine_color("concat", 0)) < 20
    assert _plot_pixels(panel, panel._plots["step"], style.engine_color("concat", 0)) > 200
    panel.set_log_scale(True)  # NaNs and the log axis together
    panel.show_step(hist, 30)
    qtbot.wait(50)
    assert _plot_pixels(panel, plot, COPY_LINE) > 200


def test_the_engine_session_records_the_wall(tmp_path, monkeypatch):
    """A run's RunInfo carries the weights a forward reads (from the model's config) and the copy
    bandwidth of its device (this machine's cached probe), and a saved trace keeps them."""
    from kvviz.config import RunConfig
    from kvviz.measure import bandwidth
    from kvviz.models.presets import PRESETS
    from kvviz.records import traceio
    from kvviz.runtime.messages import RunRequest
    from kvviz.runtime.session import EngineSession

    monkeypatch.setattr(bandwidth, "cpu_bandwidth", lambda: bandwidth.Bandwidth("cpu", 14.5, 1, 1))
    session = EngineSession()
    try:
        info = session.start(RunRequest(run_id="s", model="tiny-random", device="cpu", threads=1,
                                        run=RunConfig(prompt="KV", max_new_tokens=3, engines=("concat",)))).info
        steps = [session.round()[0] for _ in range(3)]
    finally:
        session.close()
    # tiny-random: tiny's 524,800 layer elements + 128 (final norm) + an untied head 256 x 128, fp32
    assert (info.weights_read_bytes, info.embed_row_bytes) == ((524_800 + 128 + 32_768) * 4, 512)
    assert info.wall() == WallShape.from_config(PRESETS["tiny-random"].config)
    assert info.copy_gbps == 14.5 and info.peak_gbps == 0.0
    path = tmp_path / "run.json"
    path.write_text(traceio.dumps_run(info, {"concat": steps}))
    loaded = traceio.load_run(path)
    assert loaded.info.wall() == info.wall() and loaded.info.copy_gbps == 14.5


@pytest.mark.parametrize("field, value", [("copy_gbps", math.nan), ("copy_gbps", -1.0), ("peak_gbps", math.inf),
                                          ("weights_read_bytes", -5), ("embed_row_bytes", 1 << 60),
                                          ("copy_gbps", "fast")])
def test_a_trace_with_bad_wall_figures_is_refused_in_one_line(tmp_path, field, value):
    import json

    from kvviz.records import traceio

    info = RunInfo(run_id="w", model_name="wide", engines=("concat",), prompt_ids=(1, 2), max_new_tokens=1,
                   n_layer=8, n_head=8, n_kv_head=8, head_dim=64, **WIDE)
    doc = json.loads(traceio.dumps_run(info, {"concat": []}))
    doc["info"][field] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=f"info.{field}") as exc:
        traceio.load_run(path)
    assert "\n" not in str(exc.value)


def test_the_bandwidth_plot_is_always_shown_and_gets_its_readable_height(qtbot):
    """The memory wall had stepped aside below 420 px (and was ~15 px tall at 1920x1080): it stays, and a
    panel of the latency panel's readable height (the grid gives it that, or a tab) gives it READABLE_PLOT."""
    from kvviz.ui import style
    from kvviz.ui.panels.latency import COPY_LINE, LatencyPanel

    panel = LatencyPanel()
    qtbot.addWidget(panel)
    panel.resize(500, 380)
    panel.show()
    hist = long_wide_history()
    panel.show_step(hist, 59)
    bandwidth, step = panel._plots["bandwidth"], panel._plots["step"]
    qtbot.waitUntil(lambda: bandwidth.isVisible() and bandwidth.getViewBox().height() > 10)
    assert panel.plot_grid() == (1, 3)
    panel.resize(500, 620)
    need = style.readable(style.READABLE_PLOT)
    qtbot.waitUntil(lambda: bandwidth.getViewBox().height() >= need[1])
    qtbot.waitUntil(lambda: _plot_pixels(panel, bandwidth, COPY_LINE) > 200)
    assert bandwidth.getViewBox().viewRange()[0] == pytest.approx(step.getViewBox().viewRange()[0])  # linked


# -- the summary's rows and the summary exports ----------------------------------------------------------
TINY = dict(weights_read_bytes=2_230_784, embed_row_bytes=512, kv_bytes_per_token=2_048)  # tests/test_wall.py


def summary_panel(qtbot):
    from kvviz.ui.panels.summary import SummaryPanel

    panel = SummaryPanel()
    qtbot.addWidget(panel)
    panel.resize(600, 600)
    panel.show()
    return panel


def shown(panel, key: str) -> tuple[str, list[str]] | None:
    """(row name, figures) of a row as drawn, None where it is hidden."""
    from kvviz.ui.panels.summary import COLUMNS

    row = [k for k, _higher in COLUMNS].index(key)
    table = panel._table
    if table.isRowHidden(row):
        return None
    return table.verticalHeaderItem(row).text(), [table.item(row, c).text() for c in range(table.columnCount())]


def test_summary_rows_of_the_wall_by_hand_on_tiny(qtbot):
    # tiny, a 4-token prompt and two decode steps of 1 ms:
    # prefill [0, 4): weights 2,230,784 + 4 rows x 512 = 2,232,832, K/V 4 x 2,048 = 8,192 -> 2,241,024
    # decode to 5: 2,231,296 of weights (+ one row), K/V 5 x 2,048 = 10,240 -> 2,241,536
    # decode to 6: 2,231,296 + 12,288 -> 2,243,584; in all 6,726,144 B (6.41 MiB) in 3 ms = 2.242 GB/s,
    # 22.4% of 10 GB/s
    panel = summary_panel(qtbot)
    panel.show_step(cached_history(TINY, 10.0, 1.0, (5, 6), 4), 2)
    values = panel.table_values()["concat"]
    assert values["bytes_read"] == 6_726_144
    assert values["read_gbps"] == pytest.approx(2.242048)
    assert values["copy_share"] == pytest.approx(0.2242048)
    assert shown(panel, "bytes_read") == ("read (MiB)", ["6.41"])
    assert shown(panel, "read_gbps") == ("read rate (GB/s)", ["2.24"])
    assert shown(panel, "copy_share") == ("of copy", ["22%"])
    # at step 1 the first two steps only: 4,482,560 B in 2 ms
    panel.show_step(cached_history(TINY, 10.0, 1.0, (5, 6), 4), 1)
    assert panel.table_values()["concat"]["bytes_read"] == 4_482_560
    assert panel.table_values()["concat"]["read_gbps"] == pytest.approx(2.24128)


def test_summary_rows_of_the_wall_on_wide_and_naive(qtbot):
    from kvviz.costs.wall import WallShape, bytes_read

    # wide at 1,900 positions (the narration's test): concat 109,889,536 (prefill of 8) + 171,839,488
    # + 171,872,256 = 453,601,280 B in 60 ms = 7.56 GB/s, 47% of 16 GB/s; naive computes every position
    # again: 1,899 and 1,900 embedding rows of 2,048 B on top of the weights, 461,377,536 B, 7.69 GB/s
    panel = summary_panel(qtbot)
    hist = wide_history(engines=("naive", "concat"))
    panel.show_step(hist, 2)
    values = panel.table_values()
    assert (values["concat"]["bytes_read"], values["naive"]["bytes_read"]) == (453_601_280, 461_377_536)
    assert values["concat"]["bytes_read"] == bytes_read(WallShape(**{
        "weights_bytes": 109_611_008, "row_bytes": 2_048, "kv_bytes_per_token": 32_768}), hist.traces["concat"])
    assert values["concat"]["read_gbps"] == pytest.approx(7.56002133)
    assert values["naive"]["copy_share"] == pytest.approx(7.6896256 / 16)
    assert shown(panel, "bytes_read") == ("read (MiB)", ["440", "433"])  # the byte rows' binary units
    assert shown(panel, "copy_share") == ("of copy", ["48%", "47%"])
    # scrubbing back and forth and a new run give the sums afresh (they are kept as running sums)
    panel.show_step(hist, 0)
    assert panel.table_values()["concat"]["bytes_read"] == 109_889_536
    panel.show_step(hist, 2)
    assert panel.table_values()["concat"]["bytes_read"] == 453_601_280
    panel.show_step(wide_history(engines=("concat",), latency_ms=10.0), 2)
    assert panel.table_values()["concat"]["read_gbps"] == pytest.approx(2 * 7.56002133)


def test_summary_rows_of_the_wall_stay_blank_without_their_figures(qtbot):
    panel = summary_panel(qtbot)
    # a trace saved before the wall's figures: no row, no figure (not 0)
    panel.show_step(wide_history(weights_read_bytes=0, embed_row_bytes=0), 2)
    values = panel.table_values()["concat"]
    assert (values["bytes_read"], values["read_gbps"], values["copy_share"]) == (None, None, None)
    assert [shown(panel, k) for k in ("bytes_read", "read_gbps", "copy_share")] == [None, None, None]
    assert shown(panel, "bytes_copied") is not None  # the rest as before
    # no copy bandwidth recorded (or a hostile one): the bytes and the rate, no share
    for copy in (0.0, math.nan, math.inf):
        panel.show_step(wide_history(copy_gbps=copy), 2)
        values = panel.table_values()["concat"]
        assert values["bytes_read"] == 453_601_280 and values["copy_share"] is None
        assert shown(panel, "read_gbps") == ("read rate (GB/s)", ["7.56"]) and shown(panel, "copy_share") is None
    # no step time recorded: no rate, no share
    panel.show_step(wide_history(latency_ms=0.0), 2)
    values = panel.table_values()["concat"]
    assert values["bytes_read"] == 453_601_280 and values["read_gbps"] is None and values["copy_share"] is None
    assert shown(panel, "read_gbps") == ("read rate (GB/s)", ["\u2014"])


def test_summary_rows_of_the_wall_in_chinese(qtbot):
    from kvviz.ui import i18n
    from kvviz.ui.panels.summary import COLUMNS, WALL_ROWS

    panel = summary_panel(qtbot)
    panel.show_step(wide_history(), 2)
    i18n.set_language("zh_CN")
    try:
        panel.retranslate()
        assert [shown(panel, k)[0] for k in WALL_ROWS] == ["读取（MiB）", "读取速率（GB/s）", "占复制带宽"]
        row = [k for k, _higher in COLUMNS].index("read_gbps")
        assert "GB/s" in panel._table.verticalHeaderItem(row).toolTip() and "带宽" in \
            panel._table.verticalHeaderItem(row).toolTip()
    finally:
        i18n.set_language("en")
        panel.retranslate()


def test_a_short_summary_panel_sets_the_wall_rows_aside(qtbot):
    """Four engines in a 1280x720 window's 224x256 panel: the wall's rows step aside, the table stays
    inside the panel, and they come back when the panel is taller."""
    from kvviz.ui.panels.summary import WALL_ROWS

    panel = summary_panel(qtbot)
    engines = ("naive", "concat", "static", "paged")
    panel.show_step(wide_history(engines=engines), 2)
    assert all(shown(panel, k) for k in WALL_ROWS)
    panel.resize(224, 256)
    qtbot.waitUntil(lambda: not any(shown(panel, k) for k in WALL_ROWS))
    assert panel.height() == 256 and panel._table.geometry().bottom() <= 256
    assert shown(panel, "peak_cache_bytes") is not None  # the rows before them stay
    panel.resize(300, 420)
    qtbot.waitUntil(lambda: all(shown(panel, k) for k in WALL_ROWS))
    assert panel._table.geometry().bottom() <= panel.height()


def test_summary_exports_carry_the_wall(tmp_path, qapp):
    import csv

    from kvviz.records import traceio
    from kvviz.ui.export_actions import DATA_KINDS

    hist = wide_history(engines=("naive", "concat"))
    DATA_KINDS["summary_csv"][1](tmp_path / "s.csv", hist)
    with open(tmp_path / "s.csv", newline="", encoding="utf-8") as fh:
        rows = {r["engine"]: r for r in csv.DictReader(fh)}
    assert int(rows["concat"]["bytes_read"]) == 453_601_280 and int(rows["naive"]["bytes_read"]) == 461_377_536
    assert float(rows["concat"]["read_gbps"]) == pytest.approx(7.56002133)
    assert float(rows["concat"]["copy_share"]) == pytest.approx(7.56002133 / 16)
    DATA_KINDS["summary_md"][1](tmp_path / "s.md", hist)
    md = (tmp_path / "s.md").read_text(encoding="utf-8")
    assert "| read | read GB/s | of copy bandwidth |" in md
    assert "| 432.6 MiB | 7.56 | 47% |" in md
    # an old trace (or no RunInfo): empty cells, not 0
    old = wide_history(weights_read_bytes=0, embed_row_bytes=0)
    row = next(csv.DictReader(traceio.summary_csv(old.traces, old.info).splitlines()))
    assert (row["bytes_read"], row["read_gbps"], row["copy_share"]) == ("", "", "")
    assert "| - | - | - |" in traceio.summary_markdown(old.traces, old.info)
    assert next(csv.DictReader(traceio.summary_csv(hist.traces).splitlines()))["bytes_read"] == ""


def test_an_empty_summary_holds_no_wall_rows(qtbot):
    """Before any run, and after one is cleared, the wall's rows wait for figures (an empty table at
    1500x920 had shown them, the last cut in half); a run brings them back."""
    panel = summary_panel(qtbot)
    optional = ("bytes_read", "read_gbps", "copy_share", "mean_kl", "top1_agreement")
    assert [shown(panel, k) for k in optional] == [None] * 5  # the quality rows wait for a run too
    assert shown(panel, "total_ms") is not None
    panel.show_step(wide_history(), 2)
    assert shown(panel, "bytes_read") is not None and shown(panel, "copy_share") is not None
    panel.clear()
    assert [shown(panel, k) for k in optional] == [None] * 5
