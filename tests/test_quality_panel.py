"""The quality panel on a real run: exact engines at 0, an approximate one's KL drawn and told."""
from __future__ import annotations

import numpy as np
import pytest

from kvviz.records.trace import RunInfo
from kvviz.ui.history import RunHistory

ENGINES = ("concat", "window", "int8")
PROMPT = list(range(70, 90))
N = 10


@pytest.fixture(scope="module")
def history(tiny_random):
    from kvviz.config import TraceOptions
    from kvviz.engines import make_engine
    from kvviz.measure.quality import annotate, measure

    exact = list(make_engine("concat", tiny_random).generate(PROMPT, N, trace=TraceOptions(logits=True), run_id="q"))
    traces = {"concat": exact}
    for key in ("window", "int8"):
        eng = make_engine(key, tiny_random, window=4)
        own = list(eng.generate(PROMPT, N, run_id="q"))
        traces[key] = annotate(own, measure(eng, PROMPT, exact, own))
    cfg = tiny_random.cfg
    hist = RunHistory()
    hist.reset(RunInfo(run_id="q", model_name=cfg.name, prompt_ids=tuple(PROMPT), engines=ENGINES,
                       max_new_tokens=N, n_layer=cfg.n_layer, n_head=cfg.n_head, n_kv_head=cfg.n_kv_head,
                       head_dim=cfg.head_dim, kv_bytes_per_token=cfg.kv_bytes_per_token()))
    for k in range(N):
        for e in ENGINES:
            hist.add(traces[e][k])
    return hist, traces


def test_quality_panel_draws_and_tells(qtbot, history):
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QApplication

    from kvviz.ui import style
    from kvviz.ui.panels.quality import QualityPanel

    hist, traces = history
    panel = QualityPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 600)
    panel.show()
    panel.show_step(hist, N - 1)
    assert np.array_equal(panel.columns.values(hist, "concat", "kl"), np.zeros(N))  # exact: 0
    np.testing.assert_allclose(panel.columns.values(hist, "window", "kl"), [t.kl_to_exact for t in traces["window"]])
    legend = panel.legend_text("window", hist, N - 1)
    mean = np.mean([t.kl_to_exact for t in traces["window"]])
    assert f"{mean:.3g}" in legend and "top-1" in legend
    QApplication.processEvents()
    image = panel.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    arr = np.frombuffer(image.constBits(), dtype=np.uint32, count=image.sizeInBytes() // 4)
    rgb = {((v >> 16) & 255, (v >> 8) & 255, v & 255) for v in np.unique(arr)}
    for engine, order in (("window", 1), ("int8", 2)):
        color = style.engine_color(engine, order).lstrip("#")
        want = tuple(int(color[i:i + 2], 16) for i in (0, 2, 4))
        assert want in rgb, (engine, want)  # its curve is on screen
    panel.grab().save("/tmp/kvviz_panels/quality.png")


def test_work_matrix_colours_evicted_keys(qtbot, tiny_random):
    """W=4 on a 6-token prompt, decode step 3 (query position 8): keys 0..4 evicted, 5..7 cached."""
    from kvviz.config import TraceOptions
    from kvviz.engines import make_engine
    from kvviz.ui.panels.work_matrix import CACHED, COMPUTED, EVICTED, MASKED, classify

    traces = list(make_engine("window", tiny_random, window=4).generate(list(range(65, 71)), 4,
                                                                        trace=TraceOptions()))
    t = traces[3]
    row = classify(t, t.pos_start)[-1]
    assert list(row) == [EVICTED] * 5 + [CACHED] * 3 + [COMPUTED]
    prefill = classify(traces[0], 0)  # a prompt longer than W: banded, what lies left of the band is masked
    assert prefill[5, 1] == MASKED and prefill[5, 2] == COMPUTED and EVICTED not in prefill
    concat = list(make_engine("concat", tiny_random).generate(list(range(65, 71)), 4, trace=TraceOptions()))
    assert EVICTED not in classify(concat[3], concat[3].pos_start)


def test_work_matrix_draws_the_evicted_colour(qtbot, history):
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QApplication

    from kvviz.ui import style
    from kvviz.ui.panels.work_matrix import WorkMatrixPanel

    hist, _ = history
    panel = WorkMatrixPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 600)
    panel.show()
    panel.show_step(hist, 6)
    QApplication.processEvents()
    grab = panel.grab()
    grab.save("/tmp/kvviz_panels/work_matrix_evicted.png")
    image = grab.toImage().convertToFormat(QImage.Format.Format_RGB32)
    arr = np.frombuffer(image.constBits(), dtype=np.uint32, count=image.sizeInBytes() // 4)
    want = int(style.CELL_COLORS["evicted"].lstrip("#"), 16)
    assert ((arr & 0xFFFFFF) == want).sum() > 200  # the window's evicted cells (and the legend swatch)
    assert "1 row, 3 cached" in panel._views["window"].plot.titleLabel.text  # W=4: 3 read, the 4th new


def test_narration_says_what_the_window_dropped(history):
    from kvviz.ui.narration import describe

    hist, traces = history
    plain = lambda e, o: "#000"  # noqa: E731
    text = describe(hist, 3, plain)  # W=4, 20-token prompt: decode step 3 stores position 22, drops 18
    assert "dropped position 18; the cache holds 4 of 23 positions" in text
    assert "computed 1 new K/V and read 3 from the cache" in text  # window: only the 3 it still holds
    assert "dropped positions 0-15; the cache holds 4 of 20 positions" in describe(hist, 0, plain)


def test_attention_map_draws_evicted_keys_in_their_colour(qtbot, tiny_random):
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QApplication

    from kvviz.config import TraceOptions
    from kvviz.engines import make_engine
    from kvviz.ui import style
    from kvviz.ui.panels.attention import _EVICTED, AttentionPanel, to_codes

    assert to_codes(np.array([[0.5, np.nan], [-1.0, 1.0]], dtype=np.float32), 1.0)[1, 0] == _EVICTED
    cfg = tiny_random.cfg
    hist = RunHistory()
    hist.reset(RunInfo(run_id="a", model_name=cfg.name, prompt_ids=tuple(PROMPT), engines=("window",),
                       max_new_tokens=N, n_layer=cfg.n_layer, n_head=cfg.n_head, n_kv_head=cfg.n_kv_head,
                       head_dim=cfg.head_dim, kv_bytes_per_token=cfg.kv_bytes_per_token()))
    for t in make_engine("window", tiny_random, window=4).generate(PROMPT, N, trace=TraceOptions(weights_layer=0),
                                                                     run_id="a"):
        hist.add(t)
    panel = AttentionPanel()
    qtbot.addWidget(panel)
    panel.resize(700, 600)
    panel.show()
    panel.show_step(hist, N - 1)
    QApplication.processEvents()
    grab = panel.grab()
    grab.save("/tmp/kvviz_panels/attention_evicted.png")
    image = grab.toImage().convertToFormat(QImage.Format.Format_RGB32)
    arr = np.frombuffer(image.constBits(), dtype=np.uint32, count=image.sizeInBytes() // 4)
    want = int(style.CELL_COLORS["evicted"].lstrip("#"), 16)
    assert ((arr & 0xFFFFFF) == want).sum() > 200


def test_summary_gives_quality_rows_only_with_an_approximate_engine(qtbot, history):
    from kvviz.ui.panels.summary import COLUMNS, SummaryPanel

    hist, traces = history
    panel = SummaryPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 600)
    panel.show()
    panel.show_step(hist, N - 1)
    values = panel.table_values()
    assert values["concat"]["mean_kl"] == 0.0 and values["concat"]["top1_agreement"] == 1.0
    assert values["window"]["mean_kl"] == pytest.approx(np.mean([t.kl_to_exact for t in traces["window"]]))
    rows = [i for i, (k, _) in enumerate(COLUMNS) if k in ("mean_kl", "top1_agreement")]
    assert not any(panel._table.isRowHidden(r) for r in rows)
    exact_only = RunHistory()
    exact_only.reset(hist.info)
    for t in traces["concat"]:
        exact_only.add(t)
    panel.show_step(exact_only, N - 1)
    assert all(panel._table.isRowHidden(r) for r in rows)
