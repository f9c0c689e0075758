"""What the window says about the run it shows: the status bar describes the panels' run (a replayed
trace's model too), a run the form no longer describes is marked, the model load is a busy bar where
the eye is, and a long run is announced with its expected duration, then counted down."""
from __future__ import annotations

import os

from PySide6.QtCore import QTimer

from kvviz.records import traceio
from tests.test_ui_window import PROMPT, type_prompt


def status_text(window) -> str:
    fields = window.status_fields
    return " ".join(w.text() for w in (fields.device, fields.model, fields.params,
                                       window.status_fields.kv))


def short_run(qtbot, window, engines=("concat",), tokens=4):
    type_prompt(qtbot, window, PROMPT)
    window.form.set_engines(engines)
    window.form.tokens_spin.setValue(tokens)
    window.toolbar.speed_spin.setValue(0)
    with qtbot.waitSignal(window.run_finished, timeout=60_000):
        window.start_run()


def test_the_status_bar_describes_the_run_shown_not_the_form(qtbot, open_window, tmp_path):
    window = open_window()
    short_run(qtbot, window)
    assert "model tiny-random" in status_text(window) and window.transport.shown_run_label.isHidden()
    saved = tmp_path / "run.json"
    saved.write_text(traceio.dumps_run(window.history.info, window.history.traces))
    window.form.set_model("tiny")  # another preset in the form: the panels still show tiny-random's run
    assert "model tiny-random" in status_text(window)
    mark = window.transport.shown_run_label
    assert mark.isVisibleTo(window) and "tiny-random" in mark.text()
    window.form.set_model("tiny-random")
    assert window.transport.shown_run_label.isHidden()
    window.form.set_model("tiny")
    from kvviz.ui.export_actions import install_export_actions

    assert install_export_actions(window).open_trace(str(saved))
    qtbot.waitUntil(lambda: window.history.n_steps() == 4)
    window.refresh()
    assert "model tiny-random" in status_text(window)  # the trace's model, not the form's "tiny"
    assert window.transport.shown_run_label.text().startswith("replay")


def test_loading_is_a_busy_bar_then_steps_and_time_left(qtbot, open_window):
    window = open_window()
    type_prompt(qtbot, window, PROMPT)
    window.form.set_engines(("naive", "concat"))
    window.form.tokens_spin.setValue(300)
    window.toolbar.speed_spin.setValue(50)
    seen: list[tuple[int, int, str]] = []
    sampler = QTimer()
    bar = window.transport.progress
    sampler.timeout.connect(lambda: seen.append((bar.minimum(), bar.maximum(),
                                                 bar.text() if bar.isVisibleTo(window) else "")))
    window.start_run()
    assert bar.isVisibleTo(window) and bar.maximum() == 0  # busy: the model loads
    assert "loading tiny-random" in window.transport.progress.format()
    sampler.start(50)
    qtbot.waitUntil(lambda: window.history.n_steps() >= 60, timeout=60_000)
    window.stop_run()
    qtbot.waitUntil(lambda: window.state.value == "idle", timeout=10_000)
    sampler.stop()
    counting = [text for lo, hi, text in seen if hi == 300 and "left" in text]
    assert counting, seen[-5:]
    assert "/ 300 steps" in counting[-1]
    assert window.transport.progress.isHidden()


def test_a_long_run_is_announced_with_how_long_it_will_take(qtbot, open_window):
    window = open_window()
    type_prompt(qtbot, window, PROMPT)
    window.form.set_engines(("naive",))
    window.toolbar.speed_spin.setValue(0)
    window.form.tokens_spin.setValue(5)
    assert window.form.estimate_label.isHidden()
    window.toolbar.speed_spin.setValue(1)  # 1 step/s: 60 steps take a minute whatever the model
    window.form.tokens_spin.setValue(60)
    assert window.form.estimate_label.isVisibleTo(window)
    assert "1.0 min" in window.form.estimate_label.text() and "Speed" in window.form.estimate_label.text()
    window.toolbar.speed_spin.setValue(0)
    window.form.tokens_spin.setValue(5)
    assert window.form.estimate_label.isHidden()
    short_run(qtbot, window, engines=("naive",), tokens=30)
    measured, from_run = window.form_estimate_ms()
    assert from_run and measured > 0
    # Measured on this model, 100x the steps: announced, and said to come from the last run.
    window.form.tokens_spin.setValue(2000)
    ms, from_run = window.form_estimate_ms()
    assert from_run and ms > 30 * measured
    if ms >= 10_000:
        assert "last run" in window.form.estimate_label.text()


def test_a_trace_opened_while_the_app_starts_leaves_it_able_to_run(qtbot, open_window, tmp_path):
    """File > Open trace before the engine list (and the panels, as the app builds them after its first
    paint) have arrived: the replay shows, and the window still
    becomes ready to run (it had stayed at "loading PyTorch..." for good)."""
    from kvviz.ui import app
    from kvviz.ui.export_actions import install_export_actions
    from tests.conftest import settings_at

    first = open_window()
    short_run(qtbot, first)
    saved = tmp_path / "run.json"
    saved.write_text(traceio.dumps_run(first.history.info, first.history.traces))
    first.close()

    window = app.create_window(settings_at(tmp_path / "second.ini"), isolate=False, defer_panels=True)
    qtbot.addWidget(window)
    window.show()
    assert window.env is None  # still starting: the engine list comes later
    assert install_export_actions(window).open_trace(str(saved))
    qtbot.waitUntil(lambda: window.env is not None, timeout=90_000)
    window.form.set_model("tiny-random")
    window.form.prompt_edit.setPlainText(PROMPT)
    assert window.validation_text() == "" and window.act_run.isEnabled()
    assert window.history.n_steps() == 4 and window.transport.shown_run_label.text().startswith("replay")
    with qtbot.waitSignal(window.run_finished, timeout=60_000):
        assert window.start_run()
    assert window.error_text() == "" and window.history.n_steps() == window.form.tokens_spin.value()


def test_the_quality_panel_appears_with_an_approximate_cache_unless_hidden_by_hand(qtbot, open_window, tmp_path):
    window = open_window()
    act = window.grid.panel_actions["quality"]
    assert not act.isChecked() and window.grid.frames["quality"].isHidden()  # hidden by default: 8 panels
    short_run(qtbot, window, engines=("concat",))
    assert not act.isChecked()  # exact caches only: nothing to measure
    short_run(qtbot, window, engines=("concat", "window"), tokens=40)
    assert act.isChecked() and window.grid.frames["quality"].isVisibleTo(window)
    act.trigger()  # the user hides it in View: it stays hidden
    short_run(qtbot, window, engines=("concat", "window"), tokens=40)
    assert not act.isChecked()


def test_window_cost_counts_only_the_time_a_run_steps(monkeypatch):
    """CPU over wall while RUNNING, paused time left out; nothing said under half a second."""
    import kvviz.ui.status as status

    clock = {"cpu": 0.0, "wall": 0.0}
    monkeypatch.setattr(status.time, "process_time", lambda: clock["cpu"])
    monkeypatch.setattr(status.time, "perf_counter", lambda: clock["wall"])
    cost = status.WindowCost()
    cost.resume()
    clock.update(cpu=0.3, wall=1.0)
    cost.pause()
    clock.update(cpu=0.4, wall=5.0)  # paused four seconds: not counted
    cost.resume()
    cost.resume()  # a second resume while stepping changes nothing
    clock.update(cpu=0.7, wall=6.0)
    cost.pause()
    assert abs(cost.cpu_s - 0.6) < 1e-9 and cost.wall_s == 2.0
    assert abs(cost.cores() - 0.3) < 1e-9
    cost.reset()
    cost.resume()
    clock.update(cpu=0.8, wall=6.4)
    cost.pause()
    assert cost.cores() is None


def test_after_a_run_the_status_bar_says_what_the_window_cost(qtbot, open_window):
    window = open_window()
    label = window.status_fields.cost
    assert label.isHidden()
    window.toolbar.speed_spin.setValue(40)  # about a second of stepping at 40 steps/s
    type_prompt(qtbot, window, PROMPT)
    window.form.set_engines(("concat",))
    window.form.tokens_spin.setValue(40)
    with qtbot.waitSignal(window.run_finished, timeout=60_000):
        window.start_run()
    assert label.isVisibleTo(window)
    cores = float(label.text().split()[1])
    assert 0 < cores <= 2 * (os.cpu_count() or 1)
    assert f"{window.window_cost.wall_s:.1f} s" in label.toolTip() and window.window_cost.wall_s >= 0.5
