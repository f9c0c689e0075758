"""A kernel comparison in the window: the form's second kernel runs every ticked engine under both kernels as
lanes ("static@native", shown "static · C step") in one colour family; the lanes reach the engines, the saved
trace (and back) and the summary, whose speedup is each lane against its engine under the first kernel; a trace
of one kernel, older ones included, loads as it was."""
from __future__ import annotations

import colorsys
import dataclasses

import pytest

from kvviz import catalog
from tests.test_ui_window import PROMPT, type_prompt


def test_a_lane_names_its_engine_and_kernel_and_is_the_engines_colour_in_the_kernels_shade():
    from kvviz.kernels import lane, lane_engine, lane_kernel, lane_label, lanes

    assert lanes(("concat", "static"), ("torch",)) == ("concat", "static")
    assert lanes(("concat", "static"), ("torch", "native")) == (
        "concat@torch", "concat@native", "static@torch", "static@native")
    assert (lane_engine("static@native"), lane_kernel("static@native")) == ("static", "native")
    assert (lane_engine("static"), lane_kernel("static")) == ("static", None)
    assert lane_label("static@native") == "static · C step" and lane_label("static") == "static"
    assert catalog.is_exact("static@native") and not catalog.is_exact("window@torch")
    assert catalog.used_settings(("sinks@openblas",)) == {"window", "sinks"}
    with pytest.raises(ValueError, match="^naive cannot decode with the C step kernel .*naive decodes with torch, "
                                         "openblas$"):
        lanes(("naive", "static"), ("torch", "native"))

    def hue(color: str) -> float:
        return colorsys.rgb_to_hls(*(int(color[i:i + 2], 16) / 255 for i in (1, 3, 5)))[0]

    spare = [k for k, e in catalog.ENGINES.items() if e.color is None]  # a spare colour by catalog order
    for engine, own in (("static", catalog.engine_color("static")),
                        ("window", catalog.EXTRA_COLORS[spare.index("window")])):
        torch, native, blas = (catalog.engine_color(lane(engine, k), order)  # whatever the lane's order
                               for order, k in enumerate(("torch", "native", "openblas"), 3))
        assert torch == own and len({torch, native, blas}) == 3  # PyTorch's ops keep the colour; told apart
        assert abs(hue(native) - hue(torch)) < 0.02 and abs(hue(blas) - hue(torch)) < 0.02  # one family


def comparison(open_window, qtbot, engines=("concat", "static"), kernels=("torch", "native"), tokens=6):
    window = open_window()
    type_prompt(qtbot, window, PROMPT)
    form = window.form
    form.set_engines(engines)
    form.tokens_spin.setValue(tokens)
    form.kernel_combo.setCurrentIndex(form.kernel_combo.findData(kernels[0]))
    form.compare_combo.setCurrentIndex(form.compare_combo.findData(kernels[1]))
    window.toolbar.speed_spin.setValue(0)
    return window


def test_the_forms_kernel_comparison_reaches_the_engines_and_the_saved_trace(open_window, qtbot, tmp_path):
    from kvviz.records import traceio

    window = comparison(open_window, qtbot)
    window.refresh()
    assert window.form.validation_text() == ""
    with qtbot.waitSignal(window.run_finished, timeout=120_000):
        assert window.start_run()
    assert window.error_text() == ""
    path = traceio.save_run(tmp_path / "lanes.json", window.history.info, window.history.traces)
    saved = traceio.load_run(path)
    lanes = ("concat@torch", "concat@native", "static@torch", "static@native")
    assert saved.info.engines == lanes and tuple(saved.traces) == lanes
    assert saved.info.decode_kernels == ("torch", "native", "torch", "native")  # each lane records its kernel
    assert saved.info.kernel is None
    tokens = {lane: [t.token_id for t in steps] for lane, steps in saved.traces.items()}
    assert len(tokens["concat@torch"]) == 6 and len(set(map(tuple, tokens.values()))) == 1  # identical
    assert {t.engine for t in saved.traces["static@native"]} == {"static@native"}

    summary = window.grid.panels["summary"]
    summary.show_step(window.history, 5)
    values = summary.table_values()
    totals = {lane: sum(t.latency_ms for t in saved.traces[lane]) for lane in lanes}
    for engine in ("concat", "static"):  # each lane against its engine under the first kernel
        assert values[f"{engine}@torch"]["speedup_vs_naive"] == pytest.approx(1.0)
        assert values[f"{engine}@native"]["speedup_vs_naive"] == pytest.approx(
            totals[f"{engine}@torch"] / totals[f"{engine}@native"])
    headers = [summary._table.horizontalHeaderItem(c).text() for c in range(summary._table.columnCount())]
    assert headers == ["concat\nPyTorch", "concat\nC step", "static\nPyTorch", "static\nC step"]
    assert "decode kernels PyTorch and C step" in summary._heading.text()
    latency = window.grid.panels["latency"]
    latency.show_step(window.history, 5)
    assert latency.legend_text("static@native", window.history, 5).startswith("static · C step: ")


def test_a_comparison_an_engine_cannot_follow_is_refused_in_one_line_by_the_form(open_window, qtbot):
    window = comparison(open_window, qtbot, engines=("naive", "concat"))
    window.refresh()
    assert window.form.validation_text() == \
        "Naive cannot decode with the C step kernel (--kernel native); naive decodes with torch, openblas."
    assert not window.form.run_button.isEnabled() and not window.start_run()
    window.form.compare_combo.setCurrentIndex(window.form.compare_combo.findData("torch"))
    window.refresh()
    assert window.form.validation_text() == "Compare the decode kernel with another kernel (both are PyTorch)."
    window.form.compare_combo.setCurrentIndex(window.form.compare_combo.findData("openblas"))
    window.refresh()
    assert window.form.validation_text() == "" and window.form.build_run().engines == (
        "naive@torch", "naive@openblas", "concat@torch", "concat@openblas")


def test_the_comparison_is_kept_and_a_saved_one_shown_in_the_form(qtbot, tmp_path):
    from kvviz.records.trace import RunInfo
    from tests.test_kernel_ui import a_form

    form = a_form(qtbot, tmp_path)
    form.set_engines(("static",))
    form.compare_combo.setCurrentIndex(form.compare_combo.findData("native"))
    assert form.build_run().engines == ("static@torch", "static@native") and form.build_run().kernel == "torch"
    form.save(form.settings)
    again = a_form(qtbot, tmp_path)
    again.restore(form.settings)
    assert again.compare_combo.currentData() == "native"
    shown = a_form(qtbot, tmp_path, name="shown.ini")
    shown.show_run(RunInfo(model_name="tiny-random", prompt=PROMPT, engines=("concat@native", "concat@torch"),
                           decode_kernels=("native", "torch"), max_new_tokens=5))
    assert shown.checked_engines() == ("concat",)
    assert (shown.current_kernel(), shown.compare_combo.currentData()) == ("native", "torch")


@pytest.fixture(scope="module")
def one_kernel():
    import kvviz

    return kvviz.compare(PROMPT, engines=("concat", "static"), tokens=4, model="tiny-random", threads=1)


def test_a_saved_comparison_loads_and_a_trace_of_one_kernel_or_older_still_does(one_kernel, tmp_path):
    from kvviz.records import traceio

    info, traces = one_kernel.info, one_kernel.traces
    older = traceio.loads_run(traceio.dumps_run(dataclasses.replace(info, decode_kernels=()), traces))
    assert older.info.engines == ("concat", "static") and older.info.decode_kernels == ()
    assert traceio.loads_run(traceio.dumps_run(info, traces)).info.kernel == "torch"

    def as_lanes(kernels):
        named = {f"{e}@{k}": [dataclasses.replace(t, engine=f"{e}@{k}") for t in steps]
                 for (e, steps), k in zip(traces.items(), kernels)}
        return dataclasses.replace(info, engines=tuple(named), decode_kernels=tuple(kernels)), named

    loaded = traceio.loads_run(traceio.dumps_run(*as_lanes(("torch", "native"))))
    assert loaded.info.engines == ("concat@torch", "static@native")
    assert loaded.info.decode_kernels == ("torch", "native")
    lane_info, lane_traces = as_lanes(("torch", "native"))
    with pytest.raises(ValueError, match="decode_kernels names 'torch' for the lane 'static@native'"):
        traceio.loads_run(traceio.dumps_run(dataclasses.replace(lane_info, decode_kernels=("torch", "torch")),
                                            lane_traces))
    bad = {"static@fast": [dataclasses.replace(t, engine="static@fast") for t in traces["static"]]}
    with pytest.raises(ValueError, match="not an engine kvviz runs"):
        traceio.loads_run(traceio.dumps_run(dataclasses.replace(info, engines=("static@fast",),
                                                                decode_kernels=()), bad))


def test_repeat_n_runs_the_comparison_n_times_and_the_summary_gives_medians_and_their_spread(qtbot, torch_cpu,
                                                                                           tmp_path):
    import re
    import statistics

    from kvviz.config import RunConfig
    from kvviz.kernels import lanes
    from kvviz.records import traceio
    from kvviz.records.repeats import spread
    from kvviz.records.trace import RunInfo
    from kvviz.runtime.messages import RunRequest
    from kvviz.runtime.session import EngineSession
    from kvviz.ui.history import RunHistory
    from kvviz.ui.panels.summary import SummaryPanel

    session = EngineSession()
    run = RunConfig(prompt=PROMPT, max_new_tokens=5, engines=lanes(("concat", "static"), ("torch", "native")))
    started = session.start(RunRequest(run_id="r3", model="tiny-random", run=run, threads=1, repeat=3))
    info, notes = started.info, started.notes
    assert isinstance(info, RunInfo) and info.repeat == 3 and notes == ()
    assert set(info.earlier_ms) == set(run.engines)
    assert all(len(runs) == 2 and all(len(ms) == 5 for ms in runs) for runs in info.earlier_ms.values())
    history = RunHistory()
    history.reset(info)
    for _ in range(5):
        for trace in session.round():
            history.add(trace)
    session.close()

    path = traceio.save_run(tmp_path / "repeated.json", history.info, history.traces)
    saved = traceio.load_run(path)
    assert saved.info.repeat == 3 and saved.info.earlier_ms == info.earlier_ms  # N and the runs recorded
    shown_run = RunHistory(info=saved.info, traces=saved.traces)
    panel = SummaryPanel()
    qtbot.addWidget(panel)
    panel.resize(700, 900)
    panel.show_step(shown_run, 4)
    values = panel.table_values()
    for lane in run.engines:
        totals = [sum(ms) for ms in info.earlier_ms[lane]] + [sum(t.latency_ms for t in saved.traces[lane])]
        assert values[lane]["total_ms"] == pytest.approx(statistics.median(totals))
    assert values["static@native"]["speedup_vs_naive"] == pytest.approx(
        values["static@torch"]["total_ms"] / values["static@native"]["total_ms"])  # a ratio of medians
    assert panel._heading.text().startswith("Medians of 3 runs: Totals over steps 0\u20134 (5 new tokens)")
    note = re.sub("<[^>]+>", "", panel._note.text())
    assert note.startswith("Spread of the 3 runs (lowest\u2013highest total; the table gives the median): "
                           "concat · PyTorch ")

    from tests import html_page_cdp

    if not html_page_cdp.missing():  # the page gives the same medians, spread and decode note
        from kvviz.page import write_page
        from kvviz.page.said_compare import spread_note
        from tests.test_html_page import text_of
        from tests.test_kernel_ui import decode_note_text, named, note_text

        browser = html_page_cdp.Browser(1280, 720)
        try:
            browser.open(write_page(tmp_path / "repeated.html", saved.info, saved.traces))
            browser.pump()
            assert not browser.problems, browser.problems
            assert browser.eval("document.querySelector('#panel-summary .heading').textContent") == \
                panel._heading.text()
            note = "document.querySelector('#panel-summary .note.{0}').textContent"
            spreads = {e: spread(shown_run.totals(e, 4)) for e in saved.info.engines}
            window = text_of(panel._note.text())
            spread_text = note_text(spread_note(spreads, named(list(spreads))))
            assert browser.eval(note.format("spread")) == spread_text and spread_text in window
            decode = browser.eval(note.format("decode"))
            assert decode == decode_note_text(saved.traces, list(saved.info.engines), 4) and decode in window
            assert decode.startswith("Decode steps alone, each kernel against PyTorch on the same cache: concat")
        finally:
            browser.close()

    alone = dataclasses.replace(saved.info, repeat=1, earlier_ms={})
    assert traceio.loads_run(traceio.dumps_run(alone, saved.traces)).info.repeat == 1  # one run: no repeats
    earlier = dict(saved.info.earlier_ms, **{"static@native": saved.info.earlier_ms["static@native"][:1]})
    with pytest.raises(ValueError, match=r"info.earlier_ms\['static@native'\] must hold 2 runs"):
        traceio.loads_run(traceio.dumps_run(dataclasses.replace(saved.info, earlier_ms=earlier), saved.traces))


def test_the_repeat_is_kept_and_a_repeated_run_shows_its_count(qtbot, tmp_path):
    from kvviz.records.trace import RunInfo
    from tests.test_kernel_ui import a_form

    form = a_form(qtbot, tmp_path)
    assert form.repeat_count() == 1
    form.repeat_spin.setValue(5)
    form.save(form.settings)
    again = a_form(qtbot, tmp_path)
    again.restore(form.settings)
    assert again.repeat_count() == 5
    shown = a_form(qtbot, tmp_path, name="shown.ini")
    shown.show_run(RunInfo(model_name="tiny-random", prompt=PROMPT, engines=("concat",), max_new_tokens=5,
                           repeat=7, earlier_ms={"concat": ((1.0,) * 5,) * 6}))
    assert shown.repeat_count() == 7


def test_a_notebooks_kernel_comparison_and_its_page_name_the_lanes(tmp_path, qapp):
    import kvviz
    from tests import html_page_cdp

    run = kvviz.compare(PROMPT, engines=("concat", "static"), tokens=4, model="tiny-random", threads=1,
                        kernels=("torch", "native"))
    assert run.info.engines == ("concat@torch", "concat@native", "static@torch", "static@native")
    assert run.info.decode_kernels == ("torch", "native", "torch", "native")
    assert len({tuple(t.token_id for t in steps) for steps in run.traces.values()}) == 1
    with pytest.raises(ValueError, match="^naive cannot decode with the C step kernel"):
        kvviz.compare(PROMPT, engines=("naive",), tokens=2, model="tiny-random", kernels=("torch", "native"))
    with pytest.raises(ValueError, match="^repeat must be"):
        kvviz.compare(PROMPT, engines=("concat",), tokens=2, model="tiny-random", repeat=0)
    from kvviz.records import traceio

    rows = {r["engine"]: r for r in traceio.summary_rows(run.traces, run.info)}  # the summary's CSV and Markdown
    lane_totals = {lane: sum(t.latency_ms for t in steps) for lane, steps in run.traces.items()}
    assert rows["static@torch"]["speedup_vs_naive"] == pytest.approx(1.0)
    assert rows["static@native"]["speedup_vs_naive"] == pytest.approx(
        lane_totals["static@torch"] / lane_totals["static@native"])
    assert rows["static@native"]["same_tokens_as_naive"] is True
    if html_page_cdp.missing():
        pytest.skip(html_page_cdp.missing())
    from kvviz.page import write_page

    browser = html_page_cdp.Browser(1280, 720)
    try:
        browser.open(write_page(tmp_path / "lanes.html", run.info, run.traces))
        browser.pump()
        assert not browser.problems, browser.problems
        heads = browser.eval("[...document.querySelectorAll('#panel-summary thead th')].map(t => t.textContent)")
        assert heads[1:] == ["concat · PyTorch", "concat · C step", "static · PyTorch", "static · C step"]
        assert browser.eval("document.querySelector('#panel-summary .heading').textContent") == \
            "Totals over steps 0\u20133 (4 new tokens), decode kernels PyTorch and C step"
        speedups = browser.eval("[...document.querySelectorAll('#panel-summary tr')].find(r => "
                                "r.textContent.startsWith('speedup')).textContent")
        totals = {lane: sum(t.latency_ms for t in steps) for lane, steps in run.traces.items()}
        assert f"{totals['static@torch'] / totals['static@native']:.2f}\u00d7" in speedups
        assert speedups.count("1.00\u00d7") >= 2  # each engine's first lane against itself
    finally:
        browser.close()
