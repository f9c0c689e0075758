"""The memory calculator beside the run the window shows: its bandwidth defaults to the read ceiling
at the run's threads (a cache file written here, never the real one), its measured decode tokens/s are counted
from the StepTraces fed to it (figures worked by hand), the wheel leaves unfocused boxes alone, and its
paragraphs wrap at 800 px and 150% zoom, in English and Chinese."""
from __future__ import annotations

import json
from dataclasses import asdict

import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QLabel

from kvviz.measure import bandwidth
from kvviz.measure.bandwidth import ReadCeiling
from kvviz.records.trace import RunInfo, StepTrace
from kvviz.ui.history import RunHistory

# `wide` (tests/test_wall_ui.py): every matrix once 109,611,008 B, a token's embedding row 2,048 B, K/V 32,768 B
WIDE = dict(weights_read_bytes=109_611_008, embed_row_bytes=2_048, kv_bytes_per_token=32_768)


@pytest.fixture
def ceilings(tmp_path, monkeypatch):
    """ceilings({threads: GB/s, ...}): this machine's read ceilings in a cache file of the test's own, each
    measured later than the one before (the last is the one `cached_read_ceiling()` would give)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def write(figures: dict[int, float]) -> None:
        key = bandwidth.machine_key()
        read = {str(t): asdict(ReadCeiling("cpu", gbps, t, 128 << 20, 9, machine=key, measured_at=float(i + 1)))
                for i, (t, gbps) in enumerate(figures.items())}
        path = bandwidth.cache_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"schema": bandwidth.SCHEMA, "version": 2, "machines": {}, "read": {key: read}}))

    return write


def wide_run(latencies=(20.0, 25.0, 30.0), engines=("concat",), read_gbps=27.0, read_threads=1, run_id="r",
             prompt=8) -> RunHistory:
    """`wide` on the CPU: a prefill of `prompt` positions (1,000 ms: left out of every figure), then one decode
    step per latency, to prompt + 1, prompt + 2, ... positions; each engine's steps `latencies` long."""
    hist = RunHistory()
    hist.reset(RunInfo(run_id=run_id, model_name="wide", device="cpu", dtype="float32", engines=engines,
                       prompt_ids=tuple(range(prompt)), max_new_tokens=len(latencies) + 1, read_gbps=read_gbps,
                       read_threads=read_threads, **WIDE))
    for engine, lat in zip(engines, latencies if isinstance(latencies[0], tuple) else [latencies] * len(engines)):
        for step, ms in enumerate((1000.0, *lat)):
            stop = prompt + step
            hist.add(StepTrace(run_id=run_id, engine=engine, step=step, phase="prefill" if step == 0 else "decode",
                               token_id=65, token_text="A", pos_start=0 if step == 0 else stop - 1, pos_stop=stop,
                               cache_len=stop, cache_capacity=stop, cache_bytes=stop * 32_768, bytes_copied=0,
                               bytes_written=0, bytes_gathered=0, kv_projections=1, latency_ms=ms))
    return hist


def dialog_of(qtbot):
    from kvviz.ui.dialogs.memory import MemoryDialog

    dialog = MemoryDialog()
    qtbot.addWidget(dialog)
    return dialog


def wide_config():
    from kvviz.config import ModelConfig

    # kvviz.models.presets' `wide` (that module imports torch): its RunInfo figures above are this config's
    return ModelConfig(name="wide", d_model=512, n_layer=8, n_head=8, n_kv_head=8, head_dim=64, d_ff=1536,
                       max_seq_len=4096, tie_embeddings=False)


def test_the_bandwidth_is_the_read_ceiling_at_the_runs_threads_not_the_last_measured(qtbot, ceilings):
    from kvviz.ui.dialogs.memory import run_figures

    ceilings({1: 27.0, 2: 42.6})  # 2 threads measured last: what the dialog had shown beside any run
    dialog = dialog_of(qtbot)
    dialog.set_preset("chapter-tiny")
    dialog.set_lengths([100])
    # no run: the form's threads
    dialog.set_context(None, threads=1)
    assert dialog.bandwidth_gbps() == 27.0 and dialog.bandwidth_source() == "measured"
    assert dialog.source_label.text() == "this machine's read ceiling, cpu, 1 thread"
    # 2,436,096 B a step at 100 positions (tests/test_read_ceiling_ui.py) at 27 GB/s: 11,083.3 tokens/s
    text = dialog.crossover_label.text()
    assert "Roofline at 100 positions and 27.0 GB/s: a decode step reads 2.3 MiB" in text
    assert "11,083 tokens/s at most" in text and "(27.0 GB/s is this machine's read ceiling, cpu, 1 thread)" in text
    dialog.set_context(None, threads=2)
    assert dialog.bandwidth_gbps() == 42.6 and dialog.source_label.text().endswith("cpu, 2 threads")
    # a run at 1 thread while the form says 2: the run's
    dialog.set_context(run_figures(wide_run(read_gbps=0.0, read_threads=1)), threads=2)  # recorded none: the file's
    assert dialog.bandwidth_gbps() == 27.0 and dialog.source_label.text().endswith("cpu, 1 thread")
    dialog.set_context(run_figures(wide_run(read_gbps=26.96, read_threads=1, run_id="s")), threads=2)
    assert dialog.bandwidth_gbps() == 26.96  # the run's own figure, not the field's rounding to 27.0
    assert dialog.report().bandwidth_gbps == 26.96
    # a replayed trace: the ceiling of the machine that recorded it, named so
    dialog.set_context(run_figures(wide_run(read_gbps=85.0, read_threads=4, run_id="t"), own=False), threads=2)
    assert dialog.bandwidth_gbps() == 85.0
    assert dialog.source_label.text() == "the read ceiling the trace recorded, cpu, 4 threads"


def test_a_typed_bandwidth_stays_until_measured_puts_the_ceiling_back(qtbot, ceilings):
    from kvviz.ui.dialogs.memory import run_figures

    ceilings({1: 27.0})
    dialog = dialog_of(qtbot)
    dialog.set_context(None, threads=1)
    assert not dialog.measured_button.isEnabled()
    dialog.bandwidth_spin.setValue(2000.0)  # an A100, typed
    assert dialog.bandwidth_gbps() == 2000.0 and dialog.bandwidth_source() == "typed"
    assert dialog.source_label.text() == "typed" and dialog.measured_button.isEnabled()
    assert "(this machine's read ceiling: 27.0 GB/s at 1 thread(s))" in dialog.crossover_label.text()
    dialog.set_context(run_figures(wide_run()), threads=1)  # a new run keeps what was typed
    assert dialog.bandwidth_gbps() == 2000.0
    dialog.measured_button.click()
    assert dialog.bandwidth_gbps() == 27.0 and dialog.bandwidth_spin.value() == 27.0
    assert dialog.bandwidth_source() == "measured" and not dialog.measured_button.isEnabled()


def test_with_nothing_measured_the_chapters_a100_figure_stays_named_so(qtbot, ceilings):
    ceilings({})
    dialog = dialog_of(qtbot)
    dialog.set_context(None, threads=1)
    assert dialog.bandwidth_gbps() == 2000.0 and dialog.bandwidth_source() == "default"
    assert not dialog.measured_button.isEnabled()
    assert "2,000 GB/s is an A100's memory bandwidth, as the chapter takes it" in dialog.crossover_label.text()


def test_measured_tokens_per_s_are_counted_from_the_decode_steps(qtbot, ceilings):
    """Three decode steps to 9, 10 and 11 positions: concat 20 + 25 + 30 = 75 ms, 40.0 tokens/s; static 10 + 10
    + 12 = 32 ms, 93.75 tokens/s (the 1,000 ms prefills left out). They must read 3 x (109,611,008 + 2,048) +
    (9 + 10 + 11) x 32,768 = 329,822,208 B: at 27 GB/s 12.2156 ms, 245.59 tokens/s allowed; 16% and 38%."""
    from kvviz.ui.dialogs.memory import run_figures

    ceilings({1: 27.0})
    hist = wide_run(latencies=((20.0, 25.0, 30.0), (10.0, 10.0, 12.0)), engines=("concat", "static"))
    run = run_figures(hist, wide_config())
    concat, static = run.engines
    assert (concat.engine, concat.steps, concat.ms, concat.tokens_per_s) == ("concat", 3, 75.0, 40.0)
    assert static.tokens_per_s == 93.75
    assert concat.allowed_tokens_per_s == static.allowed_tokens_per_s == pytest.approx(3 / (329_822_208 / 27e9))
    assert (run.first_len, run.last_len) == (9, 11)
    # an independent count from the records: decode steps over their own time
    for e in run.engines:
        decode = [t for t in hist.traces[e.engine] if t.phase == "decode"]
        assert e.tokens_per_s == pytest.approx(len(decode) / sum(t.latency_ms / 1000 for t in decode))

    dialog = dialog_of(qtbot)
    dialog.set_context(run, threads=1)
    assert dialog.model_combo.currentData() == "wide" and dialog.dtype_combo.currentData() == "float32"
    text = dialog.measured_label.text()
    assert dialog.measured_label.isVisibleTo(dialog)
    assert ("Measured in the run shown (wide, float32): its decode steps over 9 to 11 positions (the prefill left "
            "out); allowed: the same steps at batch 1, each reading its bytes at 27.0 GB/s (this machine's read "
            "ceiling, cpu, 1 thread):") in text
    assert "concat: 40.0 tokens/s measured, 16% of the 246 tokens/s allowed" in text
    assert "static: 93.8 tokens/s measured, 38% of the 246 tokens/s allowed" in text
    # the user picks another model: the measured line still names the run's
    dialog.set_preset("qwen3-0.6b")
    assert "run shown (wide, float32)" in dialog.measured_label.text()
    # the same run again (the dialog raised again) leaves the user's choice
    dialog.set_context(run, threads=1)
    assert dialog.model_combo.currentData() == "qwen3-0.6b"
    # a trace with no weights figure: the rate, no share
    old = wide_run(run_id="old")
    old.info.weights_read_bytes = 0
    dialog.set_context(run_figures(old), threads=1)
    assert "concat: 40.0 tokens/s measured" in dialog.measured_label.text()
    assert "allowed" not in dialog.measured_label.text().split("\n")[1]
    dialog.set_context(None, threads=1)
    assert dialog.measured_label.isHidden()


def _wheel(widget, down: bool = True) -> None:
    at = QPointF(widget.rect().center())
    event = QWheelEvent(at, QPointF(widget.mapToGlobal(at.toPoint())), QPoint(0, 0), QPoint(0, -120 if down else 120),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)


def test_the_wheel_scrolls_past_boxes_it_has_not_been_given(qtbot):
    dialog = dialog_of(qtbot)
    dialog.resize(800, 500)  # shorter than its content: it scrolls
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.figures.setFocus()
    bar = dialog.scroll.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == 0
    for box in (dialog.mla_combo, dialog.window_spin, dialog.bandwidth_spin, dialog.model_combo):
        before = box.currentIndex() if hasattr(box, "currentIndex") else box.value()
        _wheel(box)
        assert (box.currentIndex() if hasattr(box, "currentIndex") else box.value()) == before, box
        assert box.focusPolicy() == Qt.FocusPolicy.StrongFocus
    assert bar.value() > 0  # the wheel went on to the scroll area
    # a box the user clicked or tabbed to takes the wheel as before
    dialog.activateWindow()
    dialog.mla_combo.setFocus()
    qtbot.waitUntil(dialog.mla_combo.hasFocus)
    _wheel(dialog.mla_combo)
    assert dialog.mla_combo.currentIndex() == 1


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
def test_paragraphs_wrap_to_an_800_px_dialog_at_150_percent(qtbot, ceilings, lang):
    """At 1280x720 and 150% zoom the dialog is 800 px wide: its content fits that width, no paragraph
    cut off at the right edge with no way to read it."""
    from kvviz.ui import i18n
    from kvviz.ui.dialogs.memory import run_figures
    from kvviz.ui.presentation import zoomed_font

    ceilings({1: 27.0})
    app = QApplication.instance()
    base = app.font()
    try:
        app.setFont(zoomed_font(base, 150))
        i18n.set_language(lang)
        dialog = dialog_of(qtbot)
        dialog.set_context(run_figures(wide_run(engines=("concat", "static")), wide_config()), threads=1)
        dialog.set_preset("qwen3-0.6b")  # its description and its note: the longest paragraphs
        dialog.resize(800, 690)
        dialog.show()
        qtbot.waitExposed(dialog)
        QApplication.processEvents()
        viewport = dialog.scroll.viewport()
        assert dialog.scroll.horizontalScrollBar().maximum() == 0
        assert dialog.scroll.widget().width() <= viewport.width()
        paragraphs = [dialog.description_label, dialog.source_label, dialog.per_layer_label, dialog.per_token_label,
                      dialog.crossover_label, dialog.measured_label, dialog.notes_label, dialog.strategy_label]
        assert all(p.text() and p.isVisibleTo(dialog) for p in paragraphs)
        for label in (*paragraphs, *dialog.findChildren(QLabel)):
            if label.isVisibleTo(dialog) and label.text():
                right = label.mapTo(viewport, label.rect().topRight()).x()
                assert right <= viewport.width(), (label.text()[:40], right, viewport.width())
        for label in paragraphs:
            assert label.wordWrap() and label.sizeHint().width() <= dialog.width(), label.text()[:40]
        # a wrapped paragraph is as tall as its lines: none is cut in height
        for label in paragraphs:
            assert label.height() >= label.heightForWidth(label.width()), label.text()[:40]
    finally:
        i18n.set_language("en")
        app.setFont(base)


def test_the_window_shows_its_run_and_a_trace_it_opens(qtbot, open_window, ceilings, tmp_path):
    """Opened from the window: the app's models offered, the run shown selected with its engines' measured
    decode tokens/s (counted here from the window's history), followed when a trace is opened."""
    from kvviz.records import traceio
    from kvviz.ui.export_actions import replay_run

    ceilings({1: 27.0, 2: 42.6})
    window = open_window()
    window.show_memory_calculator()
    dialog = window._memory_dialog
    models = {dialog.model_combo.itemData(i) for i in range(dialog.model_combo.count())}
    assert {"tiny", "tiny-random", "wide"} <= models
    assert dialog.bandwidth_gbps() == 27.0  # the window's torch threads (1), not the ceiling measured last

    window.form.tokens_spin.setValue(6)
    window.form.set_engines(("concat", "static"))
    window.toolbar.speed_spin.setValue(0)
    with qtbot.waitSignal(window.run_finished, timeout=60_000):
        assert window.start_run()
    assert dialog.model_combo.currentData() == "tiny-random"
    text = dialog.measured_label.text()
    for engine in ("concat", "static"):
        decode = [t for t in window.history.traces[engine] if t.phase == "decode"]
        assert len(decode) == 5
        tokens_per_s = len(decode) / sum(t.latency_ms / 1000 for t in decode)
        from kvviz.format import fmt_figure

        assert f"{engine}: {fmt_figure(tokens_per_s)} tokens/s measured" in text, text
    assert "this machine's read ceiling, cpu, 1 thread" in dialog.source_label.text()

    saved = traceio.SavedRun(wide_run(run_id="saved", read_gbps=85.0, read_threads=4).info,
                             wide_run(run_id="saved").traces)
    replay_run(window, saved, str(tmp_path / "wide.json"))
    qtbot.waitUntil(lambda: dialog.model_combo.currentData() == "wide", timeout=10_000)
    assert "concat: 40.0 tokens/s measured" in dialog.measured_label.text()
    assert dialog.source_label.text() == "the read ceiling the trace recorded, cpu, 4 threads"
