"""Panels drawn from a real run of all four engines (tiny-random, CPU): what each shows is checked
against an independent count from the traces, and each renders a non-blank image.

Grabs are saved to /tmp/kvviz_panels/ for a human to look at.
"""
from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt

from kvviz.records.trace import MaskSpec, RunInfo, RunSummary, StepTrace, speedup
from kvviz.ui.history import RunHistory

ENGINES = ("naive", "concat", "static", "paged")
PROMPT = "KV cache demo"  # 13 byte tokens
NEW_TOKENS = 8
BLOCK_SIZE = 4
DECODE_STEP = 5
GRAB_DIR = Path("/tmp/kvviz_panels")


@pytest.fixture(scope="module")
def history(tiny_random, byte_tokenizer) -> RunHistory:
    return make_history(tiny_random, byte_tokenizer, PROMPT)


def make_history(tiny_random, tok, prompt: str, new_tokens: int = NEW_TOKENS) -> RunHistory:
    from kvviz.config import TraceOptions
    from kvviz.engines import make_engine

    ids = tok.encode(prompt)
    cfg = tiny_random.cfg
    info = RunInfo(run_id="r", model_name=cfg.name, prompt=prompt, prompt_ids=tuple(ids),
                   prompt_labels=tuple(tok.token_text(i) for i in ids), engines=ENGINES,
                   max_new_tokens=new_tokens, n_layer=cfg.n_layer, n_head=cfg.n_head,
                   n_kv_head=cfg.n_kv_head, head_dim=cfg.head_dim,
                   kv_bytes_per_token=cfg.kv_bytes_per_token(), block_size=BLOCK_SIZE)
    hist = RunHistory()
    hist.reset(info)
    runs = {k: make_engine(k, tiny_random, block_size=BLOCK_SIZE).generate(
        ids, new_tokens, trace=TraceOptions(weights_layer=0), run_id="r", token_text=tok.token_text)
        for k in ENGINES}
    for _ in range(new_tokens):  # lockstep, as the window's compare mode records them
        for k in ENGINES:
            hist.add(next(runs[k]))
    return hist


def make_panel(qtbot, key: str):
    from kvviz.ui.panels import PANELS

    module, cls = dict(PANELS)[key].split(":")
    panel = getattr(importlib.import_module(module), cls)()
    qtbot.addWidget(panel)
    panel.resize(900, 600)
    panel.show()
    return panel


def grab_distinct_colours(panel, name: str) -> int:
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QApplication

    QApplication.processEvents()
    pixmap = panel.grab()
    GRAB_DIR.mkdir(parents=True, exist_ok=True)
    pixmap.save(str(GRAB_DIR / f"{name}.png"))
    image = pixmap.toImage().convertToFormat(QImage.Format.Format_RGB32)
    arr = np.frombuffer(image.constBits(), dtype=np.uint32, count=image.sizeInBytes() // 4)
    return len(np.unique(arr))


# -- every panel -----------------------------------------------------------------------------------
def panel_keys() -> list[str]:
    from kvviz.ui.panels import PANELS

    return [k for k, _ in PANELS]


def test_registry_lists_the_ten_panels():
    assert panel_keys() == ["token_stream", "work_matrix", "recompute", "attention", "latency", "bytes",
                            "cache_memory", "quality", "summary", "speculation"]


@pytest.mark.parametrize("key", panel_keys())
@pytest.mark.parametrize("step", [0, DECODE_STEP])
def test_panel_renders_a_real_run(qtbot, history, key, step):
    from kvviz.ui.panels.base import Panel

    panel = make_panel(qtbot, key)
    assert isinstance(panel, Panel) and panel.key == key
    assert panel.title() and len(panel.help_text()) > 40
    panel.show_step(history, step)
    assert grab_distinct_colours(panel, f"{key}_step{step}") > 8


@pytest.mark.parametrize("key", panel_keys())
def test_panel_survives_clear_and_an_empty_history(qtbot, history, key):
    panel = make_panel(qtbot, key)
    panel.show_step(RunHistory(), 0)
    panel.show_step(history, DECODE_STEP)
    panel.clear()
    panel.show_step(history, 10_000)  # past the end: each engine clamps to its last step
    empty = RunHistory()
    empty.reset(RunInfo(run_id="x", engines=ENGINES))
    panel.show_step(empty, 0)


def test_panels_import_without_torch():
    from kvviz.ui.panels import PANELS

    mods = ", ".join(spec.split(":")[0] for _key, spec in PANELS)
    code = (f"import sys, {mods}; bad = [m for m in sys.modules if m.split('.')[0] == 'torch' "
            "or m.startswith(('kvviz.engines', 'kvviz.caches', 'kvviz.models'))]; "
            "print(bad); raise SystemExit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"})
    assert proc.returncode == 0, proc.stdout + proc.stderr


# -- work matrix -----------------------------------------------------------------------------------
def test_work_matrix_at_prefill_every_engine_computes_the_prompt_triangle(qtbot, history):
    from kvviz.ui.panels.work_matrix import COMPUTED, MASKED

    panel = make_panel(qtbot, "work_matrix")
    panel.show_step(history, 0)
    n = len(history.info.prompt_ids)
    lower = np.tril(np.ones((n, n), dtype=bool))
    for engine in ENGINES:
        kinds = panel.cell_kinds(engine)
        assert kinds.shape == (n, n)
        assert (kinds[lower] == COMPUTED).all() and (kinds[~lower] == MASKED).all()
        assert panel.worked_rows(engine).all()


def test_work_matrix_at_decode_naive_recomputes_every_row_caches_compute_one(qtbot, history):
    from kvviz.ui.panels.work_matrix import CACHED, COMPUTED, EMPTY, MASKED, RECOMPUTED

    panel = make_panel(qtbot, "work_matrix")
    panel.show_step(history, DECODE_STEP)
    n = len(history.info.prompt_ids) + DECODE_STEP  # positions whose K/V exist at this step
    lower = np.tril(np.ones((n, n), dtype=bool))
    for engine in ENGINES:
        kinds = panel.cell_kinds(engine)
        assert kinds.shape == (n, n)
        assert (kinds[~lower] == MASKED).all()
        assert kinds[n - 1, n - 1] == COMPUTED and (kinds == COMPUTED).sum() == 1  # the one new K/V
        worked = panel.worked_rows(engine)
        if engine == "naive":
            assert worked.all()
            assert (kinds[lower] != EMPTY).all() and (kinds == RECOMPUTED).sum() == lower.sum() - 1
            assert not (kinds == CACHED).any()
        else:
            assert worked.sum() == 1 and worked[-1]
            assert (kinds[n - 1, : n - 1] == CACHED).all()
            assert (kinds[: n - 1][lower[: n - 1]] == EMPTY).all()
            assert not (kinds == RECOMPUTED).any()


def test_work_matrix_names_its_axes_once_and_numbers_the_outer_plots(qtbot, history):
    """The four engines' matrices share their axes: one name per axis for the grid (a name per plot
    overlapped its neighbour's in a short panel), position numbers on the outer plots only; token
    labels, which differ where engines' tokens differ, stay on every plot that has room for them."""
    panel = make_panel(qtbot, "work_matrix")
    panel.resize(320, 330)
    panel.show_step(history, DECODE_STEP)
    plots = panel.export_items()
    qtbot.waitUntil(lambda: plots[0].getViewBox().height() < 120 and plots[0].getViewBox().width() < 140)
    n = len(history.info.prompt_ids) + DECODE_STEP
    vb = plots[0].getViewBox()
    assert max(vb.width(), vb.height()) / n < 8  # cells too small for token labels: positions numbered
    assert len(plots) == 4 and panel._cols == 2
    assert all(p.getAxis(a).labelText == "" for p in plots for a in ("left", "bottom"))
    assert panel._x_name.text == "key position" and panel._y_name.text == "query position"

    def numbered():
        return [(p.getAxis("bottom").style["showValues"], p.getAxis("left").style["showValues"]) for p in plots]

    qtbot.waitUntil(lambda: numbered() == [(False, True), (False, False), (True, True), (True, False)])
    inner, outer = plots[1].getAxis("left"), plots[0].getAxis("left")
    qtbot.waitUntil(lambda: inner.width() == 0 < outer.width())  # no room taken for numbers
    widths = [p.getViewBox().width() for p in plots]
    assert max(widths) - min(widths) < 2  # the matrices alike, though only the left ones have numbers
    panel.resize(2400, 2400)  # cells large enough for token labels
    qtbot.waitUntil(lambda: all(p.getAxis("bottom").style["showValues"] for p in plots))
    assert all(p.getAxis("left").style["showValues"] for p in plots)


def test_a_series_panel_numbers_its_shared_steps_under_the_lowest_plot(qtbot, history):
    panel = make_panel(qtbot, "latency")
    panel.show_step(history, DECODE_STEP)
    items = panel.export_items()
    upper, lower = items[0], items[-1]  # the top plot and the one that numbers the steps
    up, low = upper.getViewBox(), lower.getViewBox()
    assert up.linkedView(0) is low or low.linkedView(0) is up  # one x range: the steps
    assert not upper.getAxis("bottom").style["showValues"] and lower.getAxis("bottom").style["showValues"]

    def lined_up() -> bool:  # the step marker at one x in both; plot areas alike (35 px apart before)
        a, b = up.sceneBoundingRect(), low.sceneBoundingRect()
        return abs(a.left() - b.left()) < 1 and abs(a.width() - b.width()) < 1 and abs(a.height() - b.height()) < 5

    qtbot.waitUntil(lined_up)
    low.setYRange(0, 4_000_000, padding=0)  # much wider tick labels below ("3000000"): aligned still
    qtbot.waitUntil(lambda: lower.getAxis("left").textWidth > upper.getAxis("left").textWidth + 20)
    qtbot.waitUntil(lined_up)


def click_at(qtbot, plot, x: float, y: float) -> None:
    """A left click where the plot draws data point (x, y), through the view's viewport as a mouse would."""
    from PySide6.QtCore import QPointF

    scene_pos = plot.getViewBox().mapViewToScene(QPointF(x, y))
    view = plot.scene().views()[0]
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.mapFromScene(scene_pos))
    qtbot.wait(350)  # the next click is not a double-click


@pytest.mark.parametrize("key", ["latency", "bytes", "cache_memory", "recompute", "work_matrix", "attention"])
def test_a_click_in_a_plot_picks_the_step_under_it(qtbot, history, key):
    """Per-step plots: the step at the x clicked. Position plots (recompute: a token position;
    the matrices: a query row): the step that first computed that position, prefill for the prompt."""
    panel = make_panel(qtbot, key)
    panel.show_step(history, NEW_TOKENS - 1)
    qtbot.wait(50)
    picked = []
    panel.step_picked.connect(picked.append)
    n_prompt = len(history.info.prompt_ids)
    plot = panel.export_items()[1 if key == "work_matrix" else 0]  # the work matrix: concat's view
    assert panel.picks_steps
    if key in ("latency", "bytes", "cache_memory"):
        click_at(qtbot, plot, 3.2, sum(plot.getViewBox().viewRange()[1]) / 2)  # mid-height, step 3.2
        assert picked == [3]
        return
    position = (lambda p: (p + 0.5, 0.5)) if key == "recompute" else (lambda p: (0.5, p + 0.5))
    for row, step in ((n_prompt + 2, 3), (4, 0), (n_prompt, 1)):
        click_at(qtbot, plot, *position(row))
        assert picked[-1:] == [step], (row, picked)
    assert len(picked) == 3


def test_a_click_on_a_token_picks_the_step_that_sampled_it(qtbot, history):
    """Token stream: a generated token's step; the prompt: prefill (0); an engine's name: nothing.
    Each token is found where it is drawn (hit-tested in the document, as a click is)."""
    panel = make_panel(qtbot, "token_stream")
    panel.show_step(history, NEW_TOKENS - 1)
    qtbot.wait(50)
    picked = []
    panel.step_picked.connect(picked.append)
    view = panel._view
    document = view.document()
    from kvviz.textshow import display_labels

    # as read: a character made of several tokens drawn once, on its first token
    texts = {e: display_labels([t.token_text for t in history.traces[e]]) for e in ENGINES}
    for i, engine in enumerate(ENGINES):
        start, ends = panel._token_ends[i]
        block = document.findBlockByNumber(i)
        assert block.text().startswith(engine)
        for step in (0, 3, NEW_TOKENS - 1):
            first = start if step == 0 else int(ends[step - 1])
            text = block.text()[first:int(ends[step])]
            # the token, then a zero-width space: a line may end between any two tokens
            assert text == texts[engine][step].replace("\n", "\u21b5\u2028") + "\u200b", (engine, step, text)

    def click_position(position: int) -> None:
        cursor = view.textCursor()
        cursor.setPosition(position)
        rect = view.cursorRect(cursor)  # the caret before the character: click just right of it
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center() + QPoint(2, 0))
        qtbot.wait(350)

    concat = document.findBlockByNumber(1)
    start, ends = panel._token_ends[1]
    step = next(k for k in range(1, NEW_TOKENS) if texts["concat"][k].strip() and texts["concat"][k] != "\n")
    click_position(concat.position() + int(ends[step - 1]))  # the token's first character
    assert picked[-1] == step
    click_position(concat.position() + start - 1)  # the prompt's last character
    assert picked[-1] == 0
    n = len(picked)
    click_position(concat.position())  # the engine's name
    assert len(picked) == n


def test_narration_tells_a_step_from_its_traces(qtbot, history):
    """Under the timeline: each engine's K/V work at the step (grouped where engines did the same) and
    the bytes its cache moved, every figure read from the traces."""
    import re

    from kvviz.format import fmt_bytes
    from kvviz.ui.narration import describe

    def plain(step, **kw):  # the words as read: a figure's no-break space before its unit as a space
        return re.sub("<[^>]+>", "", describe(history, step, **kw)).replace("\u00a0", " ")

    n = len(history.info.prompt_ids)
    assert plain(0).startswith(f"Step 0, prefill: every engine computed the K/V of all {n} prompt positions")
    k = DECODE_STEP
    text = plain(k)
    assert text.startswith(f"Step {k}, decode: naive computed the K/V of all {n + k} positions, "
                           f"{n + k - 1} of them again though unchanged; concat, static and paged computed 1 new "
                           f"K/V and read {n + k - 1} from the cache.")
    concat = history.at("concat", k)
    assert concat.bytes_copied > 0 and f"concat copied {fmt_bytes(concat.bytes_copied)}" in text
    paged = history.at("paged", k)
    assert f"paged wrote {fmt_bytes(paged.bytes_written)} and gathered {fmt_bytes(paged.bytes_gathered)}" in text
    assert "naive copied" not in text and "naive wrote" not in text  # naive keeps no cache
    assert "Cache traffic" not in plain(k, form="no_traffic")
    assert plain(10_000).startswith(f"Step {NEW_TOKENS - 1}, decode")  # past the end: the last step
    assert describe(RunHistory(), 0) == ""


def test_a_short_series_plot_names_its_axis_by_its_unit_and_keeps_a_byte_label(qtbot, history):
    """Two stacked plots in a short panel: "latency (ms)" would run into "time (ms)" beside the
    plot below, so each gives only "ms"; the full names come back when the panel is tall. A byte
    axis only 35 px long keeps one label ("8 MiB 6 MiB 4 MiB 2 MiB" had overlapped there)."""
    panel = make_panel(qtbot, "latency")
    panel.show_step(history, DECODE_STEP)
    upper = panel.export_items()[0]
    panel.resize(320, 260)
    qtbot.waitUntil(lambda: upper.getAxis("left").labelText == "ms")
    assert panel.export_items()[1].getAxis("left").labelText == "ms"
    panel.resize(320, 700)
    qtbot.waitUntil(lambda: upper.getAxis("left").labelText == "latency")  # with its units, "(ms)"
    assert upper.getAxis("left").labelUnits == "ms"

    from kvviz.ui.panels._plots import BytesAxis

    axis = BytesAxis("left")
    levels = axis.tickSpacing(0, 8.5 * 2**20, 35)
    values = [v for v in axis.tickValues(0, 8.5 * 2**20, 35)[0][1] if v > 0]
    assert len(levels) == 1 and len(values) == 1  # one label beside zero: it fits
    assert len(axis.tickValues(0, 8.5 * 2**20, 300)[0][1]) >= 4  # a tall axis keeps its labels


def test_work_matrix_classify_without_a_mask_uses_the_causal_rule():
    from kvviz.ui.panels.work_matrix import CACHED, COMPUTED, MASKED, classify

    trace = StepTrace(run_id="r", engine="x", step=3, phase="decode", token_id=1, token_text="a", pos_start=4,
                      pos_stop=6, cache_len=6, cache_capacity=8, cache_bytes=0, bytes_copied=0,
                      bytes_written=0, bytes_gathered=0, kv_projections=2, latency_ms=1.0)
    kinds = classify(trace, prev_stop=4)  # a two-token step (speculative-style): rows 4 and 5
    assert kinds[4].tolist() == [CACHED] * 4 + [COMPUTED, MASKED]
    assert kinds[5].tolist() == [CACHED] * 4 + [COMPUTED, COMPUTED]


def test_work_matrix_at_2048_tokens_is_one_pooled_image_per_engine(qtbot):
    import pyqtgraph as pg

    from kvviz.ui.panels.work_matrix import COMPUTED, pool_max

    n = 2048
    info = RunInfo(run_id="big", prompt_ids=tuple(range(16)), engines=("naive", "static"), max_new_tokens=n - 15)
    hist = RunHistory()
    hist.reset(info)
    for engine in info.engines:
        for step in range(n - 15):
            stop = 16 + step
            start = 0 if engine == "naive" or step == 0 else stop - 1
            hist.add(StepTrace(run_id="big", engine=engine, step=step, phase="prefill" if step == 0 else "decode",
                               token_id=65, token_text="A", pos_start=start, pos_stop=stop, cache_len=0,
                               cache_capacity=0, cache_bytes=0, bytes_copied=0, bytes_written=0,
                               bytes_gathered=0, kv_projections=stop - start, latency_ms=1.0,
                               mask_spec=MaskSpec(q_len=stop - start, kv_len=stop, past_len=start)))
    panel = make_panel(qtbot, "work_matrix")
    panel.show_step(hist, n)
    for engine in info.engines:
        assert panel.cell_kinds(engine).shape == (n, n)  # the last step sees 2048 positions
        view = panel._views[engine]  # the step's row drawn tall (row_image) is not the matrix
        images = [i for i in view.plot.items if isinstance(i, pg.ImageItem) and i is not view.row_image]
        assert len(images) == 1
        shown = images[0].image
        assert shown.shape[0] < 1000  # pooled to the view's pixels, not 2048 rows
        assert (shown[-1] == COMPUTED).any()  # the one new row survives the pooling
    c = COMPUTED
    assert pool_max(np.eye(5, dtype=np.uint8) * c, 2).tolist() == [[c, 0, 0], [0, c, 0], [0, 0, c]]
    # The frame's one row is thinner than a pixel: "this step" names it, where the label fits the view.
    static = panel._views["static"]
    assert static.row_label.isVisible()
    panel.resize(150, 600)  # views narrower than the label: hidden, not cut
    qtbot.waitUntil(lambda: static.plot.getViewBox().width() < static.row_label.boundingRect().width())
    panel.show_step(hist, n)
    assert not static.row_label.isVisible()


# -- recompute -------------------------------------------------------------------------------------
@pytest.mark.parametrize("step", [0, DECODE_STEP, NEW_TOKENS - 1])
def test_recompute_counts_equal_an_independent_count(qtbot, history, step):
    panel = make_panel(qtbot, "recompute")
    panel.show_step(history, step)
    for engine in ENGINES:
        expected = {}
        for trace in history.upto(engine, step):
            for pos in range(trace.pos_start, trace.pos_stop):
                expected[pos] = expected.get(pos, 0) + 1
        counts = panel.counts(engine)
        assert counts.tolist() == [expected[p] for p in range(len(expected))]
        if engine == "naive":
            assert counts[0] == step + 1  # every step recomputed position 0
        else:
            assert (counts == 1).all()


# -- attention -------------------------------------------------------------------------------------
def test_attention_cached_rows_accumulate_to_naives_matrix(qtbot, history):
    panel = make_panel(qtbot, "attention")
    panel.show_step(history, DECODE_STEP)
    assert panel.engine() == "naive"
    naive = panel.weights()
    trace = history.at("naive", DECODE_STEP)
    expected = np.where(trace.mask, trace.attn_weights, np.nan)
    np.testing.assert_allclose(naive, expected, atol=1e-6)
    for engine in ("concat", "static", "paged"):
        panel.set_engine(engine)
        assert panel.engine() == engine
        weights = panel.weights()
        assert np.isfinite(weights).sum() == np.isfinite(naive).sum()  # the whole triangle, filled in
        np.testing.assert_allclose(weights, naive, atol=1e-4)


# -- latency and bytes -----------------------------------------------------------------------------
def test_latency_curves_hold_every_step(qtbot, history):
    panel = make_panel(qtbot, "latency")
    panel.show_step(history, DECODE_STEP)
    for engine in ENGINES:
        ms = [t.latency_ms for t in history.traces[engine]]
        assert len(panel.curve("step", engine)) == NEW_TOKENS
        np.testing.assert_allclose(panel.curve("step", engine), ms)
        np.testing.assert_allclose(panel.curve("total", engine), np.cumsum(ms))
    panel.set_log_scale(True)
    panel.show_step(history, 0)


def test_bytes_curves_concat_grows_static_and_paged_copy_nothing(qtbot, history):
    panel = make_panel(qtbot, "bytes")
    panel.set_log_scale(True)
    panel.show_step(history, DECODE_STEP)
    assert grab_distinct_colours(panel, "bytes_log") > 8
    for engine in ENGINES:
        assert panel.curve("copied", engine).tolist() == [t.bytes_copied for t in history.traces[engine]]
        assert panel.curve("gathered_total", engine).tolist() == list(
            np.cumsum([t.bytes_gathered for t in history.traces[engine]]))
    concat = panel.curve("copied", "concat")
    assert (np.diff(concat[1:]) > 0).all()  # a longer history to copy every step
    assert not panel.curve("copied", "static").any() and not panel.curve("copied", "paged").any()
    assert panel.curve("gathered", "paged").all()


# -- cache memory ----------------------------------------------------------------------------------
@pytest.mark.parametrize("step", [0, DECODE_STEP])
def test_cache_memory_block_pool_matches_the_block_table(qtbot, history, step):
    from kvviz.ui.panels.cache_memory import FREE, NEW, USED, WASTED

    panel = make_panel(qtbot, "cache_memory")
    panel.show_step(history, step)
    trace = history.at("paged", step)
    pool = panel.pool()
    assert panel.block_table() == trace.block_table
    assert pool.shape == (-(-(len(PROMPT) + NEW_TOKENS) // BLOCK_SIZE), BLOCK_SIZE)
    held = np.isin(pool, (USED, NEW)).sum()
    assert held == trace.cache_len
    assert (pool == NEW).sum() == trace.pos_stop - trace.pos_start
    assert (pool == WASTED).sum() == trace.cache_capacity - trace.cache_len
    free = [b for b in range(pool.shape[0]) if b not in trace.block_table]
    assert (pool[free] == FREE).all()
    assert panel.curve("bytes", "static").tolist() == [t.cache_bytes for t in history.traces["static"]]


# -- summary ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("step", [0, DECODE_STEP, NEW_TOKENS - 1])
def test_summary_values_equal_run_summary(qtbot, history, step):
    panel = make_panel(qtbot, "summary")
    panel.show_step(history, step)
    values = panel.table_values()
    assert list(values) == list(ENGINES)
    naive = RunSummary.from_traces(history.upto("naive", step))
    for engine in ENGINES:
        s = RunSummary.from_traces(history.upto(engine, step))
        row = values[engine]
        assert row["total_ms"] == pytest.approx(s.total_ms)
        assert row["tokens_per_s"] == pytest.approx(s.tokens_per_s)
        assert row["speedup_vs_naive"] == pytest.approx(speedup(s, naive))
        assert (row["kv_projections"], row["bytes_copied"], row["bytes_written"], row["bytes_gathered"],
                row["peak_cache_bytes"]) == (s.kv_projections, s.bytes_copied, s.bytes_written,
                                             s.bytes_gathered, s.peak_cache_bytes)
    assert values["naive"]["speedup_vs_naive"] == pytest.approx(1.0)


# -- token stream ----------------------------------------------------------------------------------
def test_token_stream_shows_text_so_far_and_highlights_the_step(qtbot, history):
    panel = make_panel(qtbot, "token_stream")
    panel.show_step(history, DECODE_STEP)
    from kvviz.textshow import group_labels, readable

    for engine in ENGINES:
        labels = [t.token_text for t in history.traces[engine]]
        current = next(g for g in group_labels(labels) if g.start <= DECODE_STEP < g.stop)  # the step's character
        assert panel.plain_text(engine) == readable(history.info.prompt_labels) + readable(labels[: current.stop])
        assert panel.highlighted(engine) == current.text


def test_token_stream_keeps_spaces_and_wraps_between_words(qtbot, tiny_random, byte_tokenizer):
    """Spaces are shown as typed and are where a line may end: a narrow panel wraps a prompt of
    words between words, never inside one (non-breaking spaces had broken "to|ken")."""
    history = make_history(tiny_random, byte_tokenizer, "The key and value of a token never change once computed")
    panel = make_panel(qtbot, "token_stream")
    panel.resize(160, 600)
    panel.show()
    panel.show_step(history, DECODE_STEP)
    text = panel._view.toPlainText()
    assert "".join(history.info.prompt_labels) in text
    doc = panel._view.document()
    wraps = 0
    block = doc.begin()
    prompt = "".join(history.info.prompt_labels)  # words and spaces (the random model's bytes are not)
    while block.isValid():
        layout, body = block.layout(), block.text().replace("\u00a0", " ")
        start = body.find(prompt)
        for i in range(layout.lineCount() - 1):  # every line that the width ended, not the block
            line = layout.lineAt(i)
            end = line.textStart() + line.textLength()
            if start < 0 or not start < end < start + len(prompt):
                continue
            assert not (body[end - 1].isalnum() and body[end].isalnum()), f"inside a word: {body[end - 8:end + 8]!r}"
            wraps += 1
        block = block.next()
    assert wraps >= 2 * len(ENGINES)  # the prompt did wrap, in every engine's block


def test_token_stream_wraps_at_every_width_never_scrolls_sideways(qtbot, tiny_random, byte_tokenizer):
    """Every line fits the view at every width: a run of tokens without spaces had stayed one line at some
    widths (Qt's word-or-anywhere wrap: a 647 px line at 284 px under Xvfb, a horizontal scroll bar and the
    selected token past the right edge), so each generated token ends with a zero-width space. The run is
    tests/test_desktop_xcb.py's: tiny-random, 30 tokens after "A cache is a promise"."""
    history = make_history(tiny_random, byte_tokenizer, "A cache is a promise", new_tokens=30)
    panel = make_panel(qtbot, "token_stream")
    panel.show()
    panel.show_step(history, 29)
    view = panel._view
    wider = []
    for width in range(180, 460, 2):
        panel.resize(width, 300)
        qtbot.wait(1)
        if view.document().idealWidth() > view.viewport().width() + 1 or view.horizontalScrollBar().isVisible():
            wider.append((view.viewport().width(), round(view.document().idealWidth())))
    assert not wider, wider


def test_token_stream_draws_the_same_text_per_token_or_in_three_spans(qtbot, history, monkeypatch):
    """A long run whose engines agree is drawn as three spans per engine (no pass over each token):
    the same text and highlight as one span per token, without the zebra shading."""
    from kvviz.ui.panels import token_stream

    drawn = {}
    for spans in (10_000, 4):  # every token its own span; a "long" run
        monkeypatch.setattr(token_stream, "_ZEBRA_SPANS", spans)
        panel = make_panel(qtbot, "token_stream")
        panel.show_step(history, DECODE_STEP)
        html = panel._view.toHtml()
        drawn[spans] = (panel._view.toPlainText(), {e: panel.highlighted(e) for e in ENGINES},
                        token_stream._ZEBRA[0] in html, html.count(style_of_highlight()))
    assert drawn[10_000][:2] == drawn[4][:2]
    assert drawn[10_000][2] and not drawn[4][2]
    assert drawn[10_000][3] == drawn[4][3] == len(ENGINES)  # one highlighted token per engine


def style_of_highlight() -> str:
    from PySide6.QtGui import QColor

    from kvviz.ui import style

    return f"background-color:{QColor(style.HIGHLIGHT).name()}"


@pytest.mark.parametrize("spans", [10_000, 4])
def test_token_stream_underlines_a_token_that_differs_from_the_first_engine(qtbot, history, monkeypatch, spans):
    import dataclasses

    from kvviz.ui.panels import token_stream

    monkeypatch.setattr(token_stream, "_ZEBRA_SPANS", spans)  # a difference is drawn in either mode

    forked = RunHistory()
    forked.reset(history.info)
    for step in range(NEW_TOKENS):
        for engine in ENGINES:
            trace = history.at(engine, step)
            if engine == "paged" and step == 3:
                trace = dataclasses.replace(trace, token_id=trace.token_id ^ 1, token_text="\u00a7")
            forked.add(trace)
    panel = make_panel(qtbot, "token_stream")
    panel.show_step(forked, DECODE_STEP)
    html = panel._view.toHtml()
    assert html.count("underline") == 1 and "\u00a7" in panel.plain_text("paged")
    # Its note ("differs from naive from step 3") moves paged's tokens along: where a click finds
    # each token, it is drawn.
    block = panel._view.document().findBlockByNumber(ENGINES.index("paged"))
    start, ends = panel._token_ends[ENGINES.index("paged")]
    assert "differs from naive from step 3" in block.text()
    assert block.text()[int(ends[2]):int(ends[3])] == "\u00a7\u200b"


@pytest.mark.parametrize("key", panel_keys())
def test_panel_follows_a_new_run_with_other_engines(qtbot, history, key):
    panel = make_panel(qtbot, key)
    panel.show_step(history, DECODE_STEP)
    info = RunInfo(**{**history.info.__dict__, "run_id": "r2", "engines": ("static", "paged")})
    second = RunHistory()
    second.reset(info)
    import dataclasses

    for step in range(3):
        for engine in info.engines:
            second.add(dataclasses.replace(history.at(engine, step), run_id="r2"))
    panel.clear()
    panel.show_step(second, 2)
    assert grab_distinct_colours(panel, f"{key}_second_run") > 8
    if key == "work_matrix":
        assert panel.cell_kinds("naive").size == 0 and panel.worked_rows("paged").sum() == 1
    if key == "summary":
        assert list(panel.table_values()) == ["static", "paged"]
        assert panel.table_values()["paged"]["speedup_vs_naive"] is None


# -- language switch -------------------------------------------------------------------------------
def test_panel_texts_follow_a_language_switch(qtbot, history):
    """Texts a panel sets once (axis labels, plot titles, checkboxes) are set again in the new language
    when the panel's frame is retranslated, as the window does on QEvent.LanguageChange."""
    from kvviz.ui import i18n
    from kvviz.ui.shell.grid import TitledFrame

    latency, attention = make_panel(qtbot, "latency"), make_panel(qtbot, "attention")
    frames = [TitledFrame(latency, "compare"), TitledFrame(attention, "compare")]
    for frame in frames:
        qtbot.addWidget(frame)
    latency.show_step(history, DECODE_STEP)
    attention.show_step(history, DECODE_STEP)
    plot = latency.export_items()[0]
    try:
        i18n.set_language("zh_CN")
        for frame in frames:
            frame.retranslate()
        assert plot.titleLabel.text == "每步"
        assert "延迟" in plot.getAxis("left").labelText
        assert latency._log.text() == "对数坐标"
        assert attention._engine_label.text() == "引擎："
        assert "query 位置" in attention.export_items()[0].getAxis("left").labelText
        assert frames[0].header.text() == latency.title() != "Latency"
    finally:
        i18n.set_language("en")
    for frame in frames:
        frame.retranslate()
    assert plot.titleLabel.text == "per step" and latency._log.text() == "log scale"


def test_attention_image_kept_step_by_step_equals_one_made_from_scratch(qtbot, history):
    """The panel folds each new step's rows into the image it keeps; streaming the run in, and then
    scrubbing back, must draw what accumulate() over steps 0..k gives."""
    from kvviz.ui.panels.attention import accumulate, to_codes

    panel = make_panel(qtbot, "attention")
    growing = RunHistory()
    growing.reset(history.info)
    for engine in ("naive", "concat"):
        for k in [*range(NEW_TOKENS), 2, 0, NEW_TOKENS - 1]:
            while len(growing.traces[engine]) <= k:
                for e in ENGINES:
                    growing.add(history.traces[e][len(growing.traces[e])])
            panel.set_engine(engine)
            panel.show_step(growing, k)
            weights, _filled = accumulate(growing.upto(engine, k))
            np.testing.assert_array_equal(panel.weights(), weights)
            want = to_codes(weights, max(float(np.nanmax(weights)), 1e-6), 1)
            np.testing.assert_array_equal(panel._image.image, want)


def test_attention_pooled_image_equals_pooling_from_scratch_as_the_factor_coarsens():
    """The kept image starts uninitialised and is NaN-filled row by row as the sequence reaches it;
    through factor changes (1, 2, 4, a jump to 16, back to 1) every image must equal pooling the
    matrix accumulate() makes from scratch."""
    from types import SimpleNamespace

    from kvviz.ui.panels import attention
    from kvviz.ui.panels.attention import _Accumulated, _pool_fmax, accumulate

    # A kept buffer from an earlier run, full of its values: the new run must not see any of them.
    garbage = np.full(400 * 400, 7.0, dtype=np.float32)
    attention._give_buffer(garbage)
    rng = np.random.default_rng(0)
    prompt, steps = 5, 300
    prefill = rng.random((prompt, prompt), dtype=np.float32)
    traces = [SimpleNamespace(pos_start=0, pos_stop=prompt, attn_weights=prefill)]
    for j in range(1, steps):
        n = prompt + j
        traces.append(SimpleNamespace(pos_start=n - 1, pos_stop=n, attn_weights=rng.random((1, n), dtype=np.float32)))
    acc = _Accumulated(traces, prompt + steps)
    assert acc.buf.base is garbage  # taken from the spares
    for k, factor in [(0, 1), (3, 1), (60, 1), (61, 2), (130, 2), (131, 4), (200, 4), (201, 16), (299, 16),
                      (299, 1)]:
        acc.fold(k + 1)
        want, _filled = accumulate(traces[: k + 1])
        n = want.shape[0]
        np.testing.assert_array_equal(acc.buf[:n, :n], want)
        got = acc.image(factor)
        np.testing.assert_array_equal(got, _pool_fmax(want, factor) if factor > 1 else want)


@pytest.mark.parametrize("key", ["latency", "bytes", "cache_memory"])
def test_series_curves_made_ahead_are_reused_and_hidden_for_engines_a_run_leaves_out(qtbot, history, key):
    import dataclasses

    panel = make_panel(qtbot, key)
    assert panel.warm_up(ENGINES) is False  # all in one go
    made = dict(panel._curve_pool)
    assert len(made) == len(panel.series_keys()) * len(ENGINES)
    two = RunHistory()
    two.reset(dataclasses.replace(history.info, run_id="two", engines=("concat", "paged")))
    for step in range(NEW_TOKENS):
        for engine in ("concat", "paged"):
            two.add(dataclasses.replace(history.at(engine, step), run_id="two"))
    panel.clear()
    panel.show_step(two, NEW_TOKENS - 1)
    assert panel._curve_pool == made  # nothing made again
    for (series, engine, _colour), curve in made.items():
        assert curve.isVisible() == (engine in ("concat", "paged")), (series, engine)
        if engine in ("concat", "paged"):
            np.testing.assert_array_equal(curve.getData()[1], panel.curve(series, engine))
            assert len(panel.curve(series, engine)) == NEW_TOKENS



def test_attention_buffers_are_warmed_kept_and_bounded():
    from kvviz.ui.panels import attention

    attention._spare.clear()
    assert attention.warm_buffer(300) is True
    assert attention.warm_buffer(300) is False  # one is there already
    assert attention.warm_buffer(5000) is False  # 95 MiB: over the bound, not made
    warmed = attention._spare[0]
    assert warmed.size == 300 * 300 and np.isnan(warmed).all()  # written through: pages faulted in
    buf = attention._take_buffer(250)
    assert buf.shape == (250, 250) and buf.base is warmed and attention._spare == []
    attention._give_buffer(buf)
    assert len(attention._spare) == 1 and attention._spare[0] is warmed
    small = np.empty((100, 100), dtype=np.float32)
    attention._spare.clear()
    attention._give_buffer(small)
    attention._give_buffer(warmed)
    assert attention._take_buffer(200).base is warmed  # past a spare too small: taken by identity
    assert len(attention._spare) == 1 and attention._spare[0] is small
    attention._give_buffer(warmed)
    for _ in range(6):  # more than the bound in all: the smallest go
        attention._give_buffer(np.empty((2048, 2048), dtype=np.float32))
    assert sum(b.nbytes for b in attention._spare) <= attention._KEEP_BYTES


def test_byte_axes_name_gigabytes_in_their_ticks(qtbot):
    """Totals past 1e9 bytes: the ticks say GiB, and no SI factor stands beside the axis name."""
    import pyqtgraph as pg

    from kvviz.ui.panels._plots import BytesAxis

    axis = BytesAxis("left")
    plot = pg.PlotItem(axisItems={"left": axis})
    plot.setLabel("left", "bytes")
    plot.setYRange(0, 4e9, padding=0)
    values = [v for _spacing, vs in axis.tickValues(0, 4e9, 200) for v in vs]
    labels = axis.tickStrings(values, axis.autoSIPrefixScale, values[1] - values[0])
    assert any(label.endswith("GiB") for label in labels), labels
    assert not any(label.endswith(" B") and label != "0" for label in labels), labels
    assert "x1e" not in axis.labelString()


# -- legends ---------------------------------------------------------------------------------------
def test_legend_keeps_entries_whole_until_one_alone_is_too_wide(qtbot):
    """Entries flow side by side, each on one line; one wider than the legend starts its own line
    and may wrap inside; the legend's minimum width is its widest word, not its widest entry; and a
    cleared legend shows the same entries again when they are set again."""
    from kvviz.ui.panels._plots import legend_row

    short = [("#d62728", "naive: 1.25 ms/step", "line"), ("#ff7f0e", "concat: 0.87 ms/step", "line")]
    long_entry = ("#1f77b4", "paged: 0 B copied, 768.0 KiB gathered", "dashed")
    label = legend_row(short + [long_entry])
    qtbot.addWidget(label)
    label.resize(900, 60)
    label.show()
    assert "<br>" not in label.text() and label.text().count("&nbsp;") > 6  # all whole, one line
    narrow = label.fontMetrics().horizontalAdvance(long_entry[1]) * 3 // 4  # the short entries still fit
    label.resize(narrow, 200)
    text = label.text()
    assert text.count("<br>") == 1 and "0 B copied, 768.0 KiB gathered" in text  # breakable, own line
    assert "naive:\u00a01.25\u00a0ms/step" in text.replace("\u2060", "")  # the short ones stay whole
    widest_word = max(label.fontMetrics().horizontalAdvance(w) for w in long_entry[1].split())
    assert label.minimumSizeHint().width() < narrow
    assert label.minimumSizeHint().width() >= widest_word
    label.clear()
    assert label.text() == ""
    label.set_entries(short + [long_entry])
    assert "naive" in label.text().replace("\u2060", "")


def test_cache_memory_places_its_pool_by_the_panel_shape(qtbot, history):
    """The block pool sits beside the plot unless the panel is tall, decided by the panel's shape
    (the canvas's shape followed the legends' line count, which differs between languages)."""
    panel = make_panel(qtbot, "cache_memory")
    panel.resize(300, 300)
    panel.show()
    canvas = panel._canvas
    qtbot.waitUntil(lambda: canvas.height() > 0)
    assert panel._side_by_side is True  # before any run, and with the legends filled
    panel.show_step(history, DECODE_STEP)
    qtbot.wait(20)
    assert panel._side_by_side is True
    # Beside the pool, a 300-pixel panel's plot has no room for the tokens axis as well (its two axes
    # took ~125 px of the plot's ~175): hidden; the legend gives each capacity in tokens.
    assert not panel._tokens_axis.isVisible()
    legend = panel._legend.text().replace("\u2060", "").replace("\xa0", " ")
    assert re.search(r"static: [\d.]+ KiB, room for \d+ tokens, \d+ held", legend), legend
    panel.resize(300, 900)
    qtbot.waitUntil(lambda: panel._side_by_side is False)
    assert panel._tokens_axis.isVisible()  # under the pool, the plot has the canvas's width
    # Under the plot, the pool keeps a share of the height (the plots' equal-rows rule of the
    # latency and bytes panels had once given the plot all of it, the pool a 20-pixel strip).
    pool, plot = panel._grid.getViewBox(), panel.export_items()[0].getViewBox()
    qtbot.waitUntil(lambda: pool.height() > 0.25 * plot.height())


def test_legend_entries_in_chinese_stay_whole(qtbot):
    """Chinese text may break between any two characters: an entry that fits its line is kept whole
    all the same, and the next entry goes to the next line (it had split "计算 / 了 88 次")."""
    from PySide6.QtGui import QTextDocument

    from kvviz.ui.panels._plots import legend_row

    entries = [("#d62728", "naive：计算了 2205 次 K/V", "line"), ("#ff7f0e", "concat：计算了 88 次 K/V", "line"),
               ("#2ca02c", "static：计算了 88 次 K/V", "dashed")]
    label = legend_row(entries)
    qtbot.addWidget(label)
    widths = [label.fontMetrics().horizontalAdvance(e[1]) for e in entries]
    label.resize(max(widths) + 40 + min(widths) // 2, 200)  # any one entry with its swatch, never two
    label.show()
    doc = QTextDocument()
    doc.setDefaultFont(label.font())
    doc.setDocumentMargin(0)
    doc.setHtml(label.text())
    doc.setTextWidth(label.contentsRect().width())
    doc.size()  # lays the document out
    block = doc.begin()
    layout, body = block.layout(), block.text()
    lines = [body[line.textStart():line.textStart() + line.textLength()].replace("\u2060", "").strip("\u00a0 ")
             for line in (layout.lineAt(i) for i in range(layout.lineCount()))]
    assert len(lines) == len(entries), lines
    for line, entry in zip(lines, entries):
        assert line.endswith(entry[1].replace(" ", "\u00a0")), (line, entry[1])


def test_a_pale_legend_square_is_drawn_as_an_outline():
    """'free block' (#ececec) and 'not computed' (#f7f7f7) vanished on the window's grey as filled squares."""
    from kvviz.ui import style

    for pale in (style.BLOCK_COLORS["free"], style.CELL_COLORS["empty"]):
        html = style.swatch_html(pale, "x")
        assert style.OUTLINE_SQUARE[0] in html and pale not in html
    html = style.swatch_html(style.CELL_COLORS["masked"], "x")
    assert style.SWATCH_MARKS["square"] in html and style.CELL_COLORS["masked"] in html


# -- whitespace tokens -----------------------------------------------------------------------------
def blank_history(history: RunHistory, texts: dict[int, str]) -> RunHistory:
    """The run with each engine's token at step s replaced by texts[s] (spaces, a tab...)."""
    import dataclasses

    blank = RunHistory()
    blank.reset(history.info)
    for step in range(NEW_TOKENS):
        for engine in ENGINES:
            trace = history.at(engine, step)
            blank.add(dataclasses.replace(trace, token_text=texts[step]) if step in texts else trace)
    return blank


def token_pixels(panel, engine_index: int, step: int) -> np.ndarray:
    """RGB pixels [h, w, 3] of the viewport where the token of `step` is drawn (its line's height)."""
    from PySide6.QtGui import QImage

    view = panel._view
    block = view.document().findBlockByNumber(engine_index)
    start, ends = panel._token_ends[engine_index]
    first = block.position() + (start if step == 0 else int(ends[step - 1]))
    cursor = view.textCursor()
    cursor.setPosition(first)
    left = view.cursorRect(cursor)
    cursor.setPosition(block.position() + int(ends[step]))
    right = view.cursorRect(cursor)
    assert left.top() == right.top(), "the token is on one line"
    image = view.viewport().grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    ratio = image.devicePixelRatio()
    arr = np.frombuffer(image.constBits(), dtype=np.uint8).reshape(image.height(), image.bytesPerLine())
    arr = arr[:, : image.width() * 4].reshape(image.height(), image.width(), 4)[..., 2::-1]
    y0, y1 = round(left.top() * ratio), round(left.bottom() * ratio)
    x0, x1 = round((left.left() + 1) * ratio), round(right.left() * ratio)
    return arr[y0:y1, x0:x1].astype(int)


@pytest.mark.parametrize("blank", [" ", "\t", "   "])
def test_a_whitespace_token_is_drawn_as_a_mark_and_highlighted(qtbot, history, blank):
    """A step that wrote only whitespace shows a mark (a space: a middle dot, a tab: an arrow) in
    the highlight, drawn darker than the highlight: before, the highlight held nothing to see."""
    from PySide6.QtGui import QColor

    from kvviz.ui import style

    panel = make_panel(qtbot, "token_stream")
    panel.show_step(blank_history(history, {DECODE_STEP: blank, DECODE_STEP - 1: "a"}), DECODE_STEP)
    qtbot.wait(20)
    assert panel.highlighted("naive") == blank  # the real text behind the mark
    pixels = token_pixels(panel, 0, DECODE_STEP)
    highlight = np.array(QColor(style.HIGHLIGHT).getRgb()[:3])
    assert pixels.shape[1] >= 4
    assert (np.abs(pixels - highlight).sum(axis=2) < 30).mean() > 0.4  # the token is highlighted
    assert (np.abs(pixels - highlight).sum(axis=2) > 120).sum() >= 2  # and a mark is drawn in it
    panel.grab().save(str(GRAB_DIR / f"token_stream_blank_{ord(blank[0])}.png"))


def test_whitespace_marks_copy_and_tooltip_as_the_real_text(qtbot, history):
    """Copy gives the tokens as typed (the marks become spaces, tabs and newlines again); the token
    under the pointer is named with its real text."""
    panel = make_panel(qtbot, "token_stream")
    blank = blank_history(history, {1: " ", 2: "\t", 3: "  \n"})
    panel.show_step(blank, NEW_TOKENS - 1)
    view = panel._view
    view.selectAll()
    copied = view.createMimeDataFromSelection().text()
    for engine in ENGINES:
        assert panel.plain_text(engine) in copied
    assert "\u00b7" not in copied and "\u2192" not in copied and "\u200b" not in copied
    # token_at: the second token of naive's block is a space, and is found as one
    start, ends = panel._token_ends[0]
    cursor = view.textCursor()
    cursor.setPosition(view.document().findBlockByNumber(0).position() + int(ends[0]))
    rect = view.cursorRect(cursor)
    assert panel.token_at(QPointF(rect.center().x() + 2, rect.center().y())) == ("naive", 1, " ")


# -- layout at the window's sizes ------------------------------------------------------------------
# Panel sizes in the first-launch 1500x920 window, a 1280x720 and a 1920x1080 one (the grid's 4 x 2 cells, measured
# in the window with the Inputs dock shown).
WINDOW_PANEL_SIZES = {"1280x720": (224, 256), "1500x920": (279, 349), "1920x1080": (384, 445)}


def wide_history(history: RunHistory) -> RunHistory:
    """The run with figures as wide as a real one's: seconds of step time, naive's K/V count in the
    ten thousands (10,560: a 60-token run of the tiny preset made 10,620) and byte counts of a bigger
    model's cache (x 4,000: MiB and GiB)."""
    import dataclasses

    wide = RunHistory()
    wide.reset(history.info)
    for step in range(NEW_TOKENS):
        for engine in ENGINES:
            t = history.at(engine, step)
            wide.add(dataclasses.replace(
                t, latency_ms=t.latency_ms * 0 + 151.17 * (1 + ENGINES.index(engine)),
                kv_projections=t.kv_projections * 40, bytes_copied=t.bytes_copied * 4000,
                bytes_written=t.bytes_written * 4000, bytes_gathered=t.bytes_gathered * 4000,
                cache_bytes=t.cache_bytes * 4000))
    return wide


def walled(history: RunHistory, copy_gbps: float = 16.0) -> RunHistory:
    """The run as recorded with the memory wall's figures (`wide`'s: 104.5 MiB of weights a forward)."""
    import dataclasses

    history.info = dataclasses.replace(history.info, weights_read_bytes=109_611_008, embed_row_bytes=2_048,
                                       kv_bytes_per_token=32_768, copy_gbps=copy_gbps)
    return history


@pytest.fixture(params=["en", "zh_CN"])
def language(request, qapp):
    from kvviz.ui import i18n

    i18n.set_language(request.param)
    yield request.param
    i18n.set_language("en")


def colour_pixels(image, colour: str, tolerance: int = 40) -> int:
    from PySide6.QtGui import QColor, QImage

    image = image.convertToFormat(QImage.Format.Format_RGB32)
    arr = np.frombuffer(image.constBits(), dtype=np.uint8).reshape(image.height(), image.bytesPerLine())
    rgb = arr[:, : image.width() * 4].reshape(image.height(), image.width(), 4)[..., 2::-1].astype(int)
    want = np.array(QColor(colour).getRgb()[:3])
    return int((np.abs(rgb - want).sum(axis=2) < tolerance).sum())


@pytest.mark.parametrize("window", WINDOW_PANEL_SIZES)
def test_summary_shows_every_engine_without_scrolling_at_the_window_sizes(qtbot, history, window, language):
    """At the first-launch 1500x920 window and at 1280x720 the summary's four engine columns are all
    on screen, no horizontal scrollbar: each engine's name is drawn in its colour, none behind a
    scrollbar."""
    from PySide6.QtGui import QFontMetrics

    from kvviz.ui import style
    from kvviz.ui.panels.summary import COLUMNS, WALL_ROWS

    panel = make_panel(qtbot, "summary")
    panel.show_step(walled(wide_history(history)), NEW_TOKENS - 1)  # drawn first, then resized, as in the window
    keys = [k for k, _higher in COLUMNS]
    assert not any(panel._table.isRowHidden(keys.index(k)) for k in WALL_ROWS)  # the memory wall's rows too
    qtbot.wait(20)
    panel.retranslate()
    panel.resize(*WINDOW_PANEL_SIZES[window])
    qtbot.wait(50)
    assert panel.height() == WINDOW_PANEL_SIZES[window][1]  # the table's height had held the panel taller
    # The wall's rows where the panel has the height (at 1280x720 four engines' rows leave none: they step
    # aside, the narration tells the figures)
    wall_shown = [k for k in WALL_ROWS if not panel._table.isRowHidden(keys.index(k))]
    assert wall_shown == ([] if window == "1280x720" else list(WALL_ROWS))
    table = panel._table
    assert not table.horizontalScrollBar().isVisible()
    header = table.horizontalHeader()
    for col in range(table.columnCount()):
        assert header.sectionViewportPosition(col) + header.sectionSize(col) <= table.viewport().width()
    for row in range(table.rowCount()):  # every figure whole (a column narrower than its text elides it)
        for col in range(table.columnCount()):
            item = table.item(row, col)
            assert QFontMetrics(item.font()).horizontalAdvance(item.text()) + 6 < header.sectionSize(col), item.text()
    # The table whole inside the panel, and the note (where shown) under it, not over its last rows.
    assert table.geometry().bottom() <= panel.height()
    rows = sum(table.rowHeight(r) for r in range(table.rowCount()))
    assert table.horizontalHeader().height() + rows <= table.viewport().height() + table.horizontalHeader().height()
    note = panel._note
    assert not note.isVisible() or note.geometry().top() > table.geometry().bottom()
    assert not note.isVisible() or note.geometry().top() + note.heightForWidth(note.width()) <= panel.height()
    panel.grab().save(str(GRAB_DIR / f"summary_panel_{window}_{language}.png"))
    image = table.grab().toImage()
    image.save(str(GRAB_DIR / f"summary_{window}_{language}.png"))
    for engine in ENGINES:
        assert colour_pixels(image, style.engine_color(engine)) > 15, engine


def text_specs(axis) -> list:
    """(rect, flags, text) of each tick label an axis draws (as its paint draws them)."""
    from PySide6.QtGui import QPainter, QPicture

    picture = QPicture()
    painter = QPainter(picture)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return specs[2] if specs else []


def label_rects(axis) -> list:
    """Scene rectangles of the tick labels an axis draws."""
    return [axis.mapRectToScene(rect) for rect, _flags, _text in text_specs(axis)]


def tick_texts(axis) -> list[str]:
    return [text for _rect, _flags, text in text_specs(axis)]


@pytest.mark.parametrize("window", WINDOW_PANEL_SIZES)
def test_cache_memory_lays_out_alike_in_english_and_chinese(qtbot, history, window, language):
    """At the window's panel sizes, in English and Chinese alike: the pool beside the plot, no tokens
    axis, the pool's note in the legend (as the grid's title it ran over "resident K/V"), step
    labels apart ("50 100150"), and the pool drawn (its colours' pixels)."""
    from kvviz.ui import style

    panel = make_panel(qtbot, "cache_memory")
    panel.retranslate()
    panel.resize(*WINDOW_PANEL_SIZES[window])
    panel.show_step(wide_history(history), NEW_TOKENS - 1)
    qtbot.wait(50)
    assert panel._side_by_side is True and not panel._tokens_axis.isVisible()
    assert panel._grid.titleLabel.text == ""
    assert "paged" in panel._block_legend.text().replace("\u2060", "")
    plot = panel.export_items()[0]
    for axis in (plot.getAxis("bottom"), plot.getAxis("left")):
        rects = sorted(label_rects(axis), key=lambda r: (r.left(), r.top()))
        for a, b in zip(rects, rects[1:]):
            assert not a.intersects(b), (axis.orientation, a, b)
    image = panel.grab().toImage()
    image.save(str(GRAB_DIR / f"cache_memory_{window}_{language}.png"))
    assert len(label_rects(plot.getAxis("bottom"))) >= (2 if window == "1500x920" else 1)
    assert colour_pixels(image, style.BLOCK_COLORS["used"], 10) > 100


def test_whole_number_axis_keeps_labels_apart_and_whole(qtbot):
    """A step / position / count axis: labels never run together in a narrow plot (steps 0-150 in
    ~100 pixels had read "50 100150"), ticks only on whole numbers (a count of 0-1.5 had ticked 0.5),
    and no SI prefix on steps."""
    import pyqtgraph as pg

    from kvviz.ui.panels._series import WholeAxis

    canvas = pg.GraphicsLayoutWidget()
    qtbot.addWidget(canvas)
    plot = canvas.addPlot(axisItems={"bottom": WholeAxis("bottom"), "left": WholeAxis("left")})
    canvas.resize(150, 160)
    canvas.show()
    plot.setRange(xRange=(0, 150), yRange=(0, 1.5), padding=0)
    # the layout settles in a few event-loop turns: 50 ms had not been enough in a fresh-clone CI run
    # on a loaded machine (one label, the axis not yet at its width); it must come to two or more
    qtbot.waitUntil(lambda: len(label_rects(plot.getAxis("bottom"))) >= 2, timeout=5_000)
    bottom = sorted(label_rects(plot.getAxis("bottom")), key=lambda r: r.left())
    for a, b in zip(bottom, bottom[1:]):
        assert a.right() < b.left(), (a, b)
    left = plot.getAxis("left")
    ticks = [v for _spacing, values in left.tickValues(0, 1.5, left.height()) for v in values]
    assert ticks and all(float(v).is_integer() for v in ticks), ticks
    # The prefix turned off (style_plot does, at each retranslate) while the range is within 0..1,
    # as before a run: pyqtgraph kept a x1000 scale, and steps 20 and 40 read "20000", "40000".
    plot.setLabel("bottom", "step")
    plot.setRange(xRange=(0, 0.06), padding=0)
    plot.getAxis("bottom").enableAutoSIPrefix(False)
    plot.setRange(xRange=(0, 60), padding=0)
    qtbot.wait(20)
    assert plot.getAxis("bottom").autoSIPrefixScale == 1.0
    assert "20" in tick_texts(plot.getAxis("bottom"))


def test_recompute_legend_and_summary_give_one_k_v_figure(qtbot, history):
    """'K/V computed' is one figure in one unit (token x layer) in the recompute legend and in the
    summary, printed alike (the legend had given the per-layer sum, 3,140 against 6,280, and
    without separators: 2076030 against 4,152,060)."""
    from kvviz.format import fmt_count
    from kvviz.ui.panels.summary import COLUMNS

    recompute = make_panel(qtbot, "recompute")
    summary = make_panel(qtbot, "summary")
    wide = wide_history(history)  # counts in the thousands: separators show
    recompute.show_step(wide, DECODE_STEP)
    summary.show_step(wide, DECODE_STEP)
    legend = recompute._legend.text().replace("\u2060", "").replace("\xa0", " ")
    table = summary._table
    row = [key for key, _higher in COLUMNS].index("kv_projections")
    for col, engine in enumerate(ENGINES):
        figure = summary.table_values()[engine]["kv_projections"]
        assert figure == sum(t.kv_projections for t in wide.traces[engine][: DECODE_STEP + 1])
        assert f"{engine}: {fmt_count(figure)} K/V computed" in legend, (engine, legend)
        assert table.item(row, col).text() == fmt_count(figure)
    assert "," in fmt_count(summary.table_values()["naive"]["kv_projections"])


@pytest.mark.parametrize("key", ["latency", "bytes", "cache_memory"])
def test_axes_keep_their_figures_after_a_language_switch(qtbot, history, key):
    """Switching the language re-styles each plot, which turns pyqtgraph's SI prefix off again: its
    figures must stay the data's (pyqtgraph worked out a scale from the range of the moment and
    kept it: a 0-5000 ms axis would read 0-5)."""
    panel = make_panel(qtbot, key)
    panel.show_step(wide_history(history), NEW_TOKENS - 1)
    qtbot.wait(20)
    before = {k: (tick_texts(p.getAxis("left")), tick_texts(p.getAxis("bottom"))) for k, p in panel._plots.items()}
    panel.retranslate()
    qtbot.wait(20)
    after = {k: (tick_texts(p.getAxis("left")), tick_texts(p.getAxis("bottom"))) for k, p in panel._plots.items()}
    assert after == before
    for plot in panel._plots.values():
        assert plot.getAxis("left").autoSIPrefixScale == plot.getAxis("bottom").autoSIPrefixScale == 1.0
