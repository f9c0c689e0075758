"""The decode kernel in the window and the page: the form's choice reaches every engine and is refused in one
line where an engine cannot use it, the status bar, the summary's heading, the narration and the page name the
run's kernel (an older trace that mixed kernels says which ran where), and a paced run's engines run their
steps in batches, each engine's back to back, ahead of what the Speed control shows."""
from __future__ import annotations

import dataclasses

import pytest

from kvviz.config import ModelConfig
from kvviz.runtime.messages import Environment, ModelChoice
from tests.conftest import settings_at
from tests.test_ui_window import PROMPT, type_prompt


def a_form(qtbot, tmp_path, devices=("auto", "cpu"), auto_device="cpu", name="form.ini"):
    from kvviz.ui.form import RunForm

    form = RunForm(settings_at(tmp_path / name))
    qtbot.addWidget(form)
    form.retranslate()
    env = Environment(models=(ModelChoice(name="tiny-random", config=ModelConfig(name="tiny-random")),),
                      default_model="tiny-random", devices=devices, auto_device=auto_device,
                      engines=(("naive", ""), ("concat", ""), ("static", "")))
    form.set_environment(env)
    form.prompt_edit.setPlainText(PROMPT)
    return form


def item_state(form, key: str) -> tuple[bool, str]:
    from PySide6.QtCore import Qt

    index = form.kernel_combo.findData(key)
    item = form.kernel_combo.model().item(index)
    return item.isEnabled(), form.kernel_combo.itemData(index, Qt.ItemDataRole.ToolTipRole)


def test_the_kernel_choice_is_offered_greyed_where_it_cannot_run_and_kept(qtbot, tmp_path):
    from kvviz.kernels import KERNEL_KEYS, KERNELS

    form = a_form(qtbot, tmp_path)
    combo = form.kernel_combo
    assert [combo.itemData(i) for i in range(combo.count())] == list(KERNEL_KEYS)
    assert [combo.itemText(i) for i in range(combo.count())] == [KERNELS[k].label for k in KERNEL_KEYS]
    assert combo.currentData() == "torch" and form.build_run().kernel == "torch"
    assert item_state(form, "torch") == (True, KERNELS["torch"].help)
    enabled, tip = item_state(form, "cuda-graph")  # a CPU: greyed, the reason as its tooltip
    assert not enabled and tip == "the CUDA graph kernel runs on CUDA only, not on a CPU"
    form.set_engines(("static",))
    combo.setCurrentIndex(combo.findData("compiled"))
    assert form.build_run().kernel == "compiled"
    form.save(form.settings)
    again = a_form(qtbot, tmp_path)
    again.restore(form.settings)
    assert again.kernel_combo.currentData() == "compiled"

    on_cuda = a_form(qtbot, tmp_path, devices=("auto", "cpu", "cuda"), auto_device="cuda", name="cuda.ini")
    assert item_state(on_cuda, "cuda-graph")[0]
    enabled, tip = item_state(on_cuda, "native")
    assert not enabled and tip == "the C step kernel runs on a CPU only, not on CUDA"
    on_cuda.kernel_combo.setCurrentIndex(on_cuda.kernel_combo.findData("native"))  # a saved choice, say
    on_cuda.set_engines(("static",))
    assert on_cuda.problem() == "The C step kernel runs on a CPU only, not on CUDA."
    on_cuda.device_combo.setCurrentIndex(on_cuda.device_combo.findData("cpu"))
    assert item_state(on_cuda, "native")[0] and not item_state(on_cuda, "cuda-graph")[0]


def test_a_kernel_an_engine_cannot_use_is_refused_in_one_line(open_window, qtbot):
    window = open_window()
    type_prompt(qtbot, window, PROMPT)
    window.form.set_engines(("naive", "concat"))
    window.form.kernel_combo.setCurrentIndex(window.form.kernel_combo.findData("native"))
    window.refresh()
    text = window.form.validation_text()
    assert text == "Naive cannot decode with the C step kernel (--kernel native); naive decodes with torch, openblas."
    assert window.form.validation_label.isVisibleTo(window) and not window.form.run_button.isEnabled()
    assert not window.start_run()
    from kvviz.ui import i18n

    i18n.set_language("zh_CN")  # the same refusal in the reader's language, once the window has the change
    try:
        qtbot.waitUntil(lambda: "cannot decode" not in window.form.validation_text(), timeout=10_000)
        chinese = window.form.validation_text()
        assert any("\u4e00" <= c <= "\u9fff" for c in chinese) and "--kernel native" in chinese, chinese
        assert "C step" not in chinese and "C 解码步" in chinese, chinese  # the kernel's label translated too
    finally:
        i18n.set_language("en")
        qtbot.waitUntil(lambda: "cannot decode" in window.form.validation_text(), timeout=10_000)
    window.form.set_engines(("concat", "static"))
    window.refresh()
    assert window.form.validation_text() == "" and window.form.run_button.isEnabled()


def test_the_forms_kernel_reaches_every_engine_and_is_named_where_the_run_is_shown(open_window, qtbot):
    window = open_window()
    type_prompt(qtbot, window, PROMPT)
    window.form.set_engines(("concat", "static"))
    window.form.tokens_spin.setValue(4)
    window.form.kernel_combo.setCurrentIndex(window.form.kernel_combo.findData("native"))
    window.toolbar.speed_spin.setValue(0)
    with qtbot.waitSignal(window.run_finished, timeout=120_000):
        assert window.start_run()
    assert window.error_text() == ""
    info = window.history.info
    assert info.decode_kernels == ("native", "native") and info.kernel == "native"  # read back from the trace
    window.refresh()
    qtbot.waitUntil(lambda: window.status_fields.kernel.isVisible())
    assert window.status_fields.kernel.text() == "kernel C step" and window.status_fields.kernel.width() > 0
    mark = window.transport.shown_run_label
    window.form.kernel_combo.setCurrentIndex(window.form.kernel_combo.findData("torch"))
    assert mark.isVisibleTo(window) and "decode kernel" in mark.toolTip()  # the form asks for another kernel
    window.form.kernel_combo.setCurrentIndex(window.form.kernel_combo.findData("native"))
    assert mark.isHidden()
    summary = window.grid.panels["summary"]
    summary.show_step(window.history, 3)
    assert summary._heading.text().startswith("Totals over steps 0\u20133 (4 new tokens), decode kernel C step")
    assert "Decode step:" not in summary._note.text()  # one kernel: no per-engine note
    from kvviz.ui.narration import describe

    told = describe(window.history, 3, lambda e, i: "#000")
    assert "Every engine decodes with the C step kernel: their times differ by cache alone." in told
    assert "kernel" not in describe(window.history, 3, lambda e, i: "#000", form="short").lower()  # two lines
    assert "kernel" not in describe(window.history, 0, lambda e, i: "#000").lower()  # prefill: no decode kernel


def note_text(note) -> str:
    """A note of kvviz.page.said_compare as the summary panel's note label shows it, less its markup: each engine
    by its label (a kernel comparison's lane as "static · C step")."""
    from kvviz.page.said import text
    from kvviz.ui import style

    return text(note, name=lambda e: style.engine_label(e.name))


def named(engines: list[str]) -> dict:
    from kvviz.page.said import Engine

    return {e: Engine(e, order) for order, e in enumerate(engines)}


def decode_note_text(traces, engines: list[str], step: int) -> str:
    """kvviz.page.said_compare.decode_note over decode times summed here from the traces (steps 1..`step`: all of
    them, the odd ones, the even ones; step 0 is the prefill), as the summary panel's note label shows it."""
    from kvviz.kernels import compared_kernels
    from kvviz.page.said_compare import decode_note

    decode = {e: [sum(t.latency_ms for t in traces[e][1:step + 1] if parity is None or t.step % 2 == parity)
                  for parity in (None, 1, 0)] for e in engines}
    return note_text(decode_note(decode, {e: traces[e][0].latency_ms for e in engines}, named(engines),
                                 compared_kernels(engines)))


@pytest.fixture(scope="module")
def mixed():
    """A run as an older trace holds it: the exact caches on the C step, naive on PyTorch's ops."""
    import kvviz
    from kvviz.records import traceio

    run = kvviz.compare(PROMPT, engines=("naive", "concat", "static"), tokens=4, model="tiny-random", threads=1)
    info = dataclasses.replace(run.info, decode_kernels=("torch", "native", "native"))
    return traceio.loads_run(traceio.dumps_run(info, run.traces))


def test_an_older_trace_with_mixed_kernels_says_which_ran_where(open_window, qtbot, mixed, tmp_path):
    import re

    from kvviz.ui.export_actions import replay_run, settle

    assert mixed.info.kernel is None and mixed.info.decode_kernels == ("torch", "native", "native")
    window = open_window()
    replay_run(window, mixed)
    settle()
    window.select_step(3)
    settle()
    window.refresh()
    fields = window.status_fields
    assert fields.kernel.isVisible() and fields.kernel.text() == "kernels PyTorch (naive), C step (concat, static)"
    summary = window.grid.panels["summary"]
    summary.show_step(window.history, 3)
    assert "kernel" not in summary._heading.text()
    note = re.sub("<[^>]+>", "", summary._note.text())
    assert "Decode step: PyTorch (naive), C step (concat, static). Their times differ by kernel as well as by " \
           "cache." in note
    from kvviz.ui.narration import describe

    assert "Decode kernels: PyTorch (naive), C step (concat, static); their times differ by kernel as well as " \
           "by cache." in re.sub("<[^>]+>", "", describe(window.history, 3, lambda e, i: "#000"))


def test_the_page_names_the_kernel_and_an_older_traces_mix(mixed, tmp_path, qapp):
    from tests import html_page_cdp

    if html_page_cdp.missing():
        pytest.skip(html_page_cdp.missing())
    from kvviz.page import write_page
    from kvviz.ui.history import RunHistory
    from kvviz.ui.panels.summary import SummaryPanel
    from tests.test_html_page import text_of, window_narration

    one = dataclasses.replace(mixed.info, decode_kernels=("native",) * 3)
    browser = html_page_cdp.Browser(1280, 720)
    try:
        for info, status, heading, note in (
                (mixed.info, "kernels PyTorch (naive), C step (concat, static)", "Totals over steps 0\u20133 "
                 "(4 new tokens)", "Decode step: PyTorch (naive), C step (concat, static). Their times differ by "
                 "kernel as well as by cache."),
                (one, "kernel C step", "Totals over steps 0\u20133 (4 new tokens), decode kernel C step", "")):
            page = write_page(tmp_path / "run.html", info, mixed.traces)
            browser.open(page)
            browser.pump()
            assert not browser.problems, browser.problems
            assert status in browser.eval("document.getElementById('status').textContent")
            assert browser.eval("document.querySelector('#panel-summary .heading').textContent") == heading
            assert browser.eval("(document.querySelector('#panel-summary .note.kernels') || {}).textContent || ''") \
                == note
            run = type("Run", (), {"info": info, "traces": mixed.traces})
            told = browser.eval("document.getElementById('narration').textContent")
            assert told == window_narration(run, 3) and "kernel" in told
            history = RunHistory(info=info, traces=mixed.traces)
            panel = SummaryPanel()
            panel.show_step(history, 3)
            window_note = decode_note_text(mixed.traces, list(info.engines), 3)
            assert window_note.startswith("Decode steps alone, against naive: concat ")
            assert window_note in text_of(panel._note.text())
            assert browser.eval("document.querySelector('#panel-summary .note.decode').textContent") == window_note
    finally:
        browser.close()


def test_a_batch_runs_each_engines_steps_back_to_back_in_step_order(torch_cpu):
    from kvviz.config import RunConfig, TraceOptions
    from kvviz.runtime.messages import RunRequest
    from kvviz.runtime.session import EngineSession

    session = EngineSession()
    try:
        session.start(RunRequest(run_id="r", model="tiny-random", threads=1, run=RunConfig(
            prompt=PROMPT, max_new_tokens=12, engines=("naive", "concat"), trace=TraceOptions(masks=False))))
        order: list[str] = []
        for key, stream in list(session._streams.items()):
            def watched(stream=stream, key=key):
                for trace in stream:
                    order.append(key)
                    yield trace
            session._streams[key] = watched()
        batch = session.rounds(12, 60.0)
        assert [[(t.engine, t.step) for t in r] for r in batch] == [[("naive", k), ("concat", k)] for k in range(12)]
        # the first round alone (it times the pace), then each engine's eleven steps back to back
        assert order == ["naive", "concat"] + ["naive"] * 11 + ["concat"] * 11
    finally:
        session.close()


def test_a_paced_run_runs_its_engines_ahead_in_batches_not_between_the_ticks(qtbot, torch_cpu):
    """The Speed control paces what is shown: the engines were asked for batches of BATCH_S, never a round a
    tick, so a step never follows a pause (nor the other engine's step) because of the pace."""
    from kvviz.config import RunConfig, TraceOptions
    from kvviz.runtime.messages import RunRequest
    from kvviz.ui.worker import BATCH_S, RunWorker

    worker = RunWorker(isolate=False)
    asked: list[tuple[int, float]] = []
    got: list[int] = []
    send, receive = worker.session.send_rounds, worker.session.receive_rounds
    worker.session.send_rounds = lambda most, budget_s=0.0: (asked.append((most, budget_s)), send(most, budget_s))[1]
    worker.session.receive_rounds = lambda: (lambda r: (got.append(len(r)), r)[1])(receive())
    shown: list[float] = []
    worker.step_traced.connect(lambda t: shown.append(t.latency_ms))
    run = RunConfig(prompt=PROMPT, max_new_tokens=30, engines=("concat",), trace=TraceOptions(masks=False))
    with qtbot.waitSignal(worker.run_finished, timeout=60_000):
        worker.start_run(RunRequest(run_id="r", model="tiny-random", run=run, steps_per_s=100, threads=1))
    worker.shut_down()
    assert len(shown) == 30
    assert asked and all(budget == BATCH_S for _most, budget in asked)
    assert max(got) > 5 and len(got) < 10  # rounds ran many to a batch, shown one a tick


def test_the_summary_gives_the_decode_speedup_with_the_prefill_apart_and_its_spread(qtbot):
    """naive's prefill takes 100 ms, every decode step 4 ms against concat's 1 ms (its odd steps 2 ms): the decode
    speedup leaves the prefill out (4x, where the totals say 3.47x) and the odd and even steps show the spread."""
    import re

    from tests.test_wall_ui import TINY, cached_history, summary_panel

    panel = summary_panel(qtbot)
    hist = cached_history(TINY, 10.0, 1.0, (5, 6, 7, 8), 4, engines=("naive", "concat"))
    for step, trace in enumerate(hist.traces["naive"]):
        hist.traces["naive"][step] = dataclasses.replace(trace, latency_ms=100.0 if step == 0 else 4.0)
    for step, trace in enumerate(hist.traces["concat"]):
        hist.traces["concat"][step] = dataclasses.replace(trace, latency_ms=2.0 if step % 2 else 1.0)
    panel.show_step(hist, 4)
    note = re.sub("<[^>]+>", "", panel._note.text())
    # decode: naive 16 ms, concat 6 ms (odd steps 1 and 3: 4 ms against naive's 8; even 2 and 4: 2 ms)
    assert "Decode steps alone, against naive: concat 2.7\u00d7 (odd steps 2.0\u00d7, even 4.0\u00d7)." in note
    assert "Prefill (step 0, apart): naive 100.0 ms, concat 1.0 ms." in note.replace("\u00a0", " ")
    assert panel.table_values()["concat"]["speedup_vs_naive"] == pytest.approx(116 / 7)


def test_a_refused_kernel_brings_its_reason_into_view_on_a_short_screen(qtbot, tmp_path):
    """At 1280x720 the form scrolls, and the one line that says why Run is greyed out sits under it: picking a
    kernel a ticked engine cannot use scrolls that line into view."""
    from PySide6.QtWidgets import QWidget

    from kvviz.ui.form import inputs_dock

    form = a_form(qtbot, tmp_path)
    host = QWidget()
    qtbot.addWidget(host)
    dock = inputs_dock(form, host)
    host.resize(320, 380)
    dock.resize(300, 360)
    host.show()
    dock.show()
    qtbot.waitExposed(dock)
    form.set_engines(("naive", "static"))
    area = dock.widget()
    area.verticalScrollBar().setValue(0)
    form.kernel_combo.setCurrentIndex(form.kernel_combo.findData("native"))
    form.show_problem(form.problem())
    form.kernel_combo.activated.emit(form.kernel_combo.currentIndex())
    label = form.validation_label
    qtbot.waitUntil(lambda: area.verticalScrollBar().value() > 0)
    top = label.mapTo(area.viewport(), label.rect().topLeft()).y()
    assert label.isVisible() and 0 <= top < area.viewport().height()
    assert label.text().startswith("Naive cannot decode with the C step kernel")
