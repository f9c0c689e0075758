"""The real window, driven as a person would: type a prompt, press Run, wait for the window's own
run_finished (emitted in the GUI thread), read what the badge, the history and the panels show."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt

from kvviz.records.trace import RunSummary
from tests.conftest import settings_at

ROOT = Path(__file__).resolve().parent.parent
ENGINES = ("naive", "concat", "static", "paged")
PROMPT = "A cache is a promise"


def type_prompt(qtbot, window, text: str) -> None:
    window.form.prompt_edit.clear()
    qtbot.keyClicks(window.form.prompt_edit, text)


def run_to_end(qtbot, window, timeout=120_000):
    with qtbot.waitSignal(window.run_finished, timeout=timeout):
        qtbot.mouseClick(window.form.run_button, Qt.MouseButton.LeftButton)


def test_compare_run_of_all_four_engines(qtbot, open_window):
    window = open_window(isolate=True)  # the app's own worker: engines in a child process
    type_prompt(qtbot, window, PROMPT)
    window.form.set_engines(ENGINES)
    window.form.tokens_spin.setValue(40)
    window.toolbar.speed_spin.setValue(0)
    seen = []
    window.step_traced.connect(seen.append)
    run_to_end(qtbot, window)

    assert window.error_text() == ""
    assert window.transport.badge.text() == "identical"
    assert window.history.n_steps() == 40
    assert window.history.info.prompt == PROMPT
    # Lockstep: step k of every engine before step k+1 of any.
    assert [(t.engine, t.step) for t in seen] == [(e, k) for k in range(40) for e in ENGINES]

    # The summary panel shows the traces' totals.
    own = {e: RunSummary.from_traces([t for t in seen if t.engine == e]) for e in ENGINES}
    shown = window.grid.panels["summary"].table_values()
    for e in ENGINES:
        assert shown[e]["total_ms"] == pytest.approx(own[e].total_ms)
        for key in ("kv_projections", "bytes_copied", "bytes_written", "bytes_gathered", "peak_cache_bytes"):
            assert shown[e][key] == getattr(own[e], key), (e, key)
    assert own["naive"].kv_projections > own["concat"].kv_projections == own["paged"].kv_projections

    # The work matrix at a decode step: one computed row for a cache, every row for naive.
    from kvviz.ui.panels.work_matrix import CACHED, COMPUTED, RECOMPUTED

    step = 25
    window.select_step(step)
    window.refresh()
    matrix = window.grid.panels["work_matrix"]
    n = len(window.history.info.prompt_ids) + step
    for engine in ENGINES:
        kinds = matrix.cell_kinds(engine)
        assert kinds.shape == (n, n)
        computed_rows = np.flatnonzero(((kinds == COMPUTED) | (kinds == RECOMPUTED)).any(axis=1))
        if engine == "naive":
            assert computed_rows.tolist() == list(range(n))
        else:
            assert computed_rows.tolist() == [n - 1]
            assert (kinds[n - 1, : n - 1] == CACHED).all()

    # The status bar: device, model, parameters and KV bytes per token, from the config.
    info = window.history.info
    assert info.kv_bytes_per_token == 2 * info.n_layer * info.n_kv_head * info.head_dim * 4
    fields = window.status_fields
    status = " ".join(w.text() for w in (fields.device, fields.model, fields.params,
                                         window.status_fields.kv))
    assert "cpu" in status and "tiny-random" in status and "parameters" in status
    assert "2.0 KiB per token" in status


def test_timeline_scrubs_back_and_every_panel_follows(qtbot, open_window):
    window = open_window()
    type_prompt(qtbot, window, PROMPT)
    window.form.set_engines(("naive", "concat"))
    window.form.tokens_spin.setValue(12)
    window.toolbar.speed_spin.setValue(0)
    run_to_end(qtbot, window)
    assert window.selected_step == 11 and window.transport.timeline.maximum() == 11
    window.scrub(-4)
    assert window.selected_step == 7 and window.transport.timeline.value() == 7
    window.refresh()
    n = len(window.history.info.prompt_ids) + 7
    assert window.grid.panels["work_matrix"].cell_kinds("concat").shape == (n, n)
    assert window.grid.panels["summary"].table_values()["concat"]["kv_projections"] == \
        RunSummary.from_traces(window.history.upto("concat", 7)).kv_projections
    assert "step 7 / 11" in window.transport.step_label.text()
    assert window.grid.panels["attention"].weights().shape == (n, n)  # its rows folded again from step 0
    window.act_first.trigger()
    assert window.selected_step == 0 and "prefill" in window.transport.step_label.text()
    window.act_next.trigger()
    assert window.selected_step == 1
    window.act_last.trigger()
    assert window.selected_step == 11
    window.act_next.trigger()  # at the end of a finished run: nothing more to show
    assert window.selected_step == 11
    window.refresh()
    assert {k: f.error for k, f in window.grid.frames.items() if f.error} == {}  # no panel failed on the way


def test_pause_step_resume_and_stop(qtbot, open_window):
    window = open_window()
    type_prompt(qtbot, window, PROMPT)
    window.form.set_engines(("concat", "static"))
    window.form.tokens_spin.setValue(300)
    window.toolbar.speed_spin.setValue(25)
    assert window.start_run()
    qtbot.waitUntil(lambda: window.history.n_steps() >= 3, timeout=30_000)
    window.act_pause.trigger()
    assert window.state.value == "paused" and window.act_pause.text() == "&Resume"
    qtbot.wait(200)  # a round already under way may still land
    n = window.history.n_steps()
    qtbot.wait(300)
    assert window.history.n_steps() == n
    window.act_step.trigger()
    qtbot.waitUntil(lambda: window.history.n_steps() == n + 1, timeout=10_000)
    assert {len(v) for v in window.history.traces.values()} == {n + 1}
    window.act_next.trigger()  # Right at the newest step of a paused run: one more step
    qtbot.waitUntil(lambda: window.history.n_steps() == n + 2, timeout=10_000)
    qtbot.wait(200)
    assert window.history.n_steps() == n + 2
    window.act_pause.trigger()  # resume
    assert window.state.value == "running"
    qtbot.waitUntil(lambda: window.history.n_steps() >= n + 5, timeout=30_000)
    with qtbot.waitSignal(window.run_finished, timeout=30_000):
        window.act_stop.trigger()
    stopped_at = window.history.n_steps()
    assert 0 < stopped_at < 300 and window.state.value == "idle"
    qtbot.wait(150)
    assert window.history.n_steps() == stopped_at
    assert window.error_text() == ""
    # The steps so far stay viewable.
    window.select_step(1)
    window.refresh()
    assert window.selected_step == 1
    # And the window is usable for the next run.
    window.form.tokens_spin.setValue(4)
    window.toolbar.speed_spin.setValue(0)
    run_to_end(qtbot, window)
    assert window.history.n_steps() == 4


def test_step_from_idle_starts_a_paused_run(qtbot, open_window):
    window = open_window()
    window.form.set_engines(("concat",))
    window.form.tokens_spin.setValue(50)
    window.act_step.trigger()
    qtbot.waitUntil(lambda: window.history.n_steps() == 1, timeout=30_000)
    assert window.state.value == "paused"
    qtbot.wait(200)
    assert window.history.n_steps() == 1
    window.act_stop.trigger()
    qtbot.waitUntil(lambda: window.state.value == "idle", timeout=10_000)


def test_shortcuts_cover_the_transport(open_window):
    window = open_window()
    keys = {act: act.shortcut().toString() for act in (
        window.act_run, window.act_pause, window.act_step, window.act_stop, window.act_prev, window.act_next,
        window.act_first, window.act_last, window.act_faster, window.act_slower, window.act_open)}
    assert keys[window.act_run] == "Ctrl+R" and keys[window.act_pause] == "Space"
    assert keys[window.act_step] == "N" and keys[window.act_stop] == "Esc"
    assert keys[window.act_prev] == "Left" and keys[window.act_next] == "Right"
    assert all(keys.values())
    window.toolbar.speed_spin.setValue(20)
    window.act_faster.trigger()
    assert window.toolbar.speed_spin.value() == 50
    window.act_slower.trigger()
    window.act_slower.trigger()
    assert window.toolbar.speed_spin.value() == 10


def test_the_form_refuses_bad_input_with_a_reason(qtbot, open_window):
    window = open_window()
    asked = []
    window.run_requested.connect(asked.append)

    def refused(reason_part: str) -> None:
        assert not window.start_run()
        assert reason_part in window.validation_text()
        assert window.form.validation_label.isVisibleTo(window)
        assert not window.form.run_button.isEnabled()

    window.form.prompt_edit.setPlainText("   ")
    refused("Type a prompt")
    window.form.prompt_edit.setPlainText("ok")
    window.form.set_engines(())
    refused("at least one engine")
    window.form.set_engines(("concat",))
    window.form.tokens_spin.setValue(2047)
    refused("exceeds the model's context of 2048")
    window.form.tokens_spin.setValue(10)
    window.form.greedy_check.setChecked(False)
    window.form.temperature_spin.setValue(0.0)
    refused("Temperature must be above 0")
    window.form.temperature_spin.setValue(0.7)
    window.form.top_p_spin.setValue(0.0)
    refused("Top-p must be above 0")
    window.form.top_p_spin.setValue(0.9)
    assert window.validation_text() == "" and window.form.run_button.isEnabled()
    assert asked == []


def test_a_worker_failure_is_shown_and_the_steps_so_far_stay(qtbot, open_window, watch_engines):
    def fail(trace) -> None:
        if trace.step == 5:
            raise RuntimeError("injected: the device fell over")

    unwatch = watch_engines(fail)
    window = open_window()
    window.form.set_engines(("naive", "concat"))
    window.form.tokens_spin.setValue(20)
    window.toolbar.speed_spin.setValue(0)
    with qtbot.waitSignal(window.run_failed, timeout=60_000) as failed:
        window.start_run()
    qtbot.waitUntil(lambda: window.state.value == "idle", timeout=10_000)
    assert "injected: the device fell over" in failed.args[1]
    assert "injected: the device fell over" in window.error_text()
    assert window.history.n_steps() == 5
    window.select_step(2)
    window.refresh()
    assert window.selected_step == 2
    # The app stays usable: the next run clears the message and runs.
    unwatch()
    window.form.tokens_spin.setValue(3)
    run_to_end(qtbot, window)
    assert window.error_text() == "" and window.history.n_steps() == 3


def test_out_of_device_memory_is_one_line_and_the_app_stays_up(qtbot, open_window, watch_engines, torch_cpu):
    """A CUDA out-of-memory error mid-run (raised here as torch raises it; no GPU needed) reaches the
    window as the one-line hint, the steps so far stay, and the next run works."""
    def run_out(trace) -> None:
        if trace.step == 3:
            raise torch_cpu.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0)")

    unwatch = watch_engines(run_out)
    window = open_window()
    window.form.set_engines(("concat",))
    window.form.tokens_spin.setValue(10)
    window.toolbar.speed_spin.setValue(0)
    with qtbot.waitSignal(window.run_failed, timeout=60_000) as failed:
        window.start_run()
    qtbot.waitUntil(lambda: window.state.value == "idle", timeout=10_000)
    message = failed.args[1]
    assert message.startswith("out of device memory") and "\n" not in message and "--dtype bf16" in message
    assert message in window.error_text() and window.history.n_steps() == 3
    unwatch()
    window.form.tokens_spin.setValue(3)
    run_to_end(qtbot, window)
    assert window.error_text() == "" and window.history.n_steps() == 3


def test_device_memory_in_the_status_bar(qtbot, open_window, monkeypatch):
    """Traces that carry the allocator's figure (CUDA's, faked here on the CPU) put it in the status
    bar; a CPU run, whose traces carry none, hides the field."""
    import kvviz.engines.base

    window = open_window()
    window.form.set_engines(("static",))
    window.form.tokens_spin.setValue(4)
    window.toolbar.speed_spin.setValue(0)
    run_to_end(qtbot, window)
    window.refresh()
    assert window.status_fields.mem.isHidden()
    monkeypatch.setattr(kvviz.engines.base, "allocated_bytes", lambda device: 3 * (1 << 30) + 123 * (1 << 20))
    run_to_end(qtbot, window)
    window.refresh()
    assert not window.status_fields.mem.isHidden() and window.status_fields.mem.text() == "device memory 3.1 GiB"


def test_a_missing_checkpoint_is_a_message_not_a_crash(qtbot, open_window, tmp_path):
    window = open_window()
    missing = str(tmp_path / "no-such-checkpoint")
    window.form.set_model(missing)
    assert window.form.current_model() == missing
    with qtbot.waitSignal(window.run_failed, timeout=60_000):
        assert window.start_run()
    assert "no-such-checkpoint" in window.error_text()
    qtbot.waitUntil(lambda: window.state.value == "idle", timeout=10_000)


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_a_checkpoint_folder_runs_in_the_window(qtbot, open_window, tmp_path, arch):
    """Model > Open checkpoint... picks a folder; a run of two engines on it agrees, the status bar's
    figures come from its config (GQA Llama: 2 of 4 heads cached; GPT-2: every head)."""
    from kvviz.config import ModelConfig
    from kvviz.format import fmt_bytes, fmt_count_short
    from kvviz.models import build_decoder
    from kvviz.models.hf import save_hf_checkpoint, train_tokenizer_json

    kv_heads = 2 if arch == "llama" else 4
    cfg = ModelConfig(name=arch, arch=arch, vocab_size=300, d_model=64, n_layer=2, n_head=4, n_kv_head=kv_heads,
                      head_dim=16, d_ff=96, max_seq_len=128, tie_embeddings=arch == "gpt2")
    folder = save_hf_checkpoint(build_decoder(cfg).init_weights(0), tmp_path / arch,
                                tokenizer_json=train_tokenizer_json(300))
    window = open_window()
    window.form.set_model(str(folder))
    type_prompt(qtbot, window, PROMPT)
    window.form.set_engines(("concat", "paged"))
    window.form.tokens_spin.setValue(6)
    window.toolbar.speed_spin.setValue(0)
    run_to_end(qtbot, window)
    assert window.error_text() == ""
    assert window.transport.badge.text() == "identical" and window.history.n_steps() == 6
    per_token = 2 * 2 * kv_heads * 16 * 4  # layers x (K, V) x KV heads x head_dim x fp32
    assert window.status_fields.kv.text() == f"KV {fmt_bytes(per_token)} per token"
    assert window.status_fields.params.text() == f"{fmt_count_short(cfg.param_count())} parameters"


def test_a_narrow_window_clips_no_plot(qtbot, open_window):
    """Each panel's content fits its cell: a long plot title is scaled down, a long legend entry
    wraps after its comma, the log-scale switch sits in the title row (a 1400-pixel window had cut
    off the right of the work matrix, the bytes plots and the attention map). 1300 pixels: the width of
    a 1366-pixel laptop screen; narrower windows crowd the panels (double-click one to give it the grid)."""
    import pyqtgraph as pg
    from PySide6.QtWidgets import QLabel, QTableWidget

    from kvviz.ui.shell.grid import TitledFrame

    window = open_window()
    window.resize(1300, 760)
    type_prompt(qtbot, window, PROMPT)
    window.form.set_engines(ENGINES)
    window.form.tokens_spin.setValue(20)
    window.toolbar.speed_spin.setValue(0)
    run_to_end(qtbot, window)
    window.select_step(5)
    for _ in range(3):
        qtbot.wait(20)
        window.refresh()
    # A panel with no readable room waits behind a tab (grid.give_way): the others are laid out.
    frames = [f for f in window.findChildren(TitledFrame) if f.isVisible()]
    assert len(frames) + len(window.grid.moved) == 8 and frames
    for frame in frames:
        panel = frame.panel
        assert panel.width() <= frame.width(), panel.key
        table = panel.findChildren(QTableWidget)  # a table scrolls: only what is outside it must fit
        width = max([panel.minimumSizeHint().width()] if not table else
                    [w.minimumSizeHint().width() for w in panel.findChildren(QLabel)])
        assert width <= panel.width(), panel.key
        for canvas in panel.findChildren(pg.GraphicsLayoutWidget):
            assert canvas.ci.geometry().width() <= canvas.width() + 1, (panel.key, canvas.ci.geometry().width())
    title = window.grid.panels["attention"]._plot.titleLabel
    drawn = title.item.boundingRect().width() * title.item.scale()
    if window.grid.frames["attention"].isVisible():  # else behind its tab, not drawn
        assert "layer 0, head 0, step 5" in title.text and drawn <= title.width() + 1  # fits: shrunk if need be
    assert window.grid.panels["bytes"]._log.parent() is not window.grid.panels["bytes"]  # in the frame's title row


def test_settings_survive_a_restart(qtbot, open_window, tmp_path):
    path = tmp_path / "restart.ini"
    first = open_window(settings=settings_at(path))
    type_prompt(qtbot, first, "Remember me")
    first.form.set_engines(("static", "paged"))
    first.form.tokens_spin.setValue(77)
    first.toolbar.speed_spin.setValue(5)
    first.form.block_spin.setValue(8)
    first.form.greedy_check.setChecked(False)
    first.form.top_k_spin.setValue(12)
    first.form.seed_spin.setValue(42)
    first.resize(first.minimumWidth(), 640)  # the offscreen screen is 800 pixels: stay inside it
    hidden = list(first.grid.panel_actions)[1]
    first.grid.panel_actions[hidden].setChecked(False)
    first.toolbar.hide()
    first.form.add_model_path(str(tmp_path / "ckpt"))
    first.form.set_model("tiny-random")
    size = first.size()
    first.close()

    second = open_window(settings=settings_at(path))
    assert second.form.prompt_edit.toPlainText() == "Remember me"
    assert second.form.checked_engines() == ("static", "paged")
    assert second.form.tokens_spin.value() == 77 and second.toolbar.speed_spin.value() == 5
    assert second.form.block_spin.value() == 8
    assert not second.form.greedy_check.isChecked() and second.form.top_k_spin.value() == 12
    assert second.form.seed_spin.value() == 42
    # The height shows the geometry came back (the default is 920); the width is not compared, since
    # restoreGeometry fits a window to its screen and the offscreen screen is narrower than the window.
    assert second.height() == size.height() != 920
    assert second.grid.frames[hidden].isHidden() and not second.grid.panel_actions[hidden].isChecked()
    assert second.toolbar.isHidden()
    assert second.form.model_combo.findData(str(tmp_path / "ckpt")) >= 0


def test_every_registered_panel_is_laid_out_with_its_help(open_window):
    from kvviz.ui.panels import PANELS

    window = open_window()
    assert list(window.grid.panels) == [k for k, _ in PANELS]
    assert window.grid.load_errors == []
    for key, frame in window.grid.frames.items():
        help_text = window.grid.panels[key].help_text()
        assert help_text != "" and frame.toolTip().startswith(help_text) and "Double-click" in frame.toolTip()
        assert ("Click a point" in frame.toolTip()) == window.grid.panels[key].picks_steps
        assert frame.header.text() == window.grid.panels[key].title()
    key = next(iter(window.grid.frames))
    window.grid.toggle_focus(key)
    assert [k for k, f in window.grid.frames.items() if not f.isHidden()] == [key]
    window.grid.toggle_focus(key)
    from kvviz.ui.grid import DEFAULT_HIDDEN

    assert [k for k, f in window.grid.frames.items() if f.isHidden()] == list(DEFAULT_HIDDEN)


def grid_rows(window) -> list[list[str]]:
    """The panels each shown row of the grid holds, left to right."""
    return [[row.widget(i).panel.key for i in range(row.count())] for row in window.grid.rows if not row.isHidden()]


def test_hidden_panels_give_the_others_their_room(qtbot, open_window, tmp_path):
    """Panels hidden in View leave no hole: the shown ones are laid out afresh (three or fewer in one
    row, more in two), each arrangement keeps the sizes it was dragged to, and the checked panels'
    sizes survive a restart."""
    path = tmp_path / "grid.ini"
    window = open_window(settings=settings_at(path))
    window.resize(1920, 1200)  # room for every panel readable (a smaller window gives way: test_lecture_layout)
    keys = window.grid.shown_panels()  # those shown by default (grid.DEFAULT_HIDDEN are not)
    assert grid_rows(window) == [keys[:4], keys[4:]]
    window.grid.panel_actions[keys[1]].setChecked(False)
    window.grid.panel_actions[keys[6]].setChecked(False)
    shown = [k for k in keys if k not in (keys[1], keys[6])]
    assert grid_rows(window) == [shown[:3], shown[3:]]
    qtbot.wait(10)
    widths = [window.grid.frames[k].width() for k in shown]
    assert min(widths) > 1.2 * (window.grid.rows[0].width() / 4)  # wider than a cell of four columns
    window.grid.rows[0].setSizes([500, 200, 200])
    dragged = window.grid.rows[0].sizes()
    for k in keys[3:]:
        window.grid.panel_actions[k].setChecked(False)
    assert grid_rows(window) == [[keys[0], keys[2]]]
    assert window.grid.frames[keys[3]].isHidden() and not window.grid.frames[keys[3]].isVisibleTo(window)
    window.grid.toggle_focus(keys[0])
    assert grid_rows(window) == [[keys[0]]] and window.grid.frames[keys[2]].isHidden()
    window.grid.toggle_focus(keys[0])
    for k in keys[3:]:
        if k != keys[6]:
            window.grid.panel_actions[k].setChecked(True)
    assert grid_rows(window) == [shown[:3], shown[3:]] and window.grid.rows[0].sizes() == dragged
    window.close()

    again = open_window(settings=settings_at(path))
    again.resize(1920, 1200)
    assert grid_rows(again) == [shown[:3], shown[3:]]
    assert again.grid.rows[0].sizes() == dragged or abs(again.grid.rows[0].sizes()[0] - dragged[0]) <= 2
    for act in again.grid.panel_actions.values():
        act.setChecked(False)
    assert grid_rows(again) == [] and not again.grid.no_panels_label.isHidden()
    assert "View" in again.grid.no_panels_label.text()
    again.act_reset_layout.trigger()
    assert grid_rows(again) == [keys[:4], keys[4:]] and again.grid.no_panels_label.isHidden()
    assert max(again.grid.rows[0].sizes()) - min(again.grid.rows[0].sizes()) <= 1  # equal columns again


def test_panels_hidden_and_shown_mid_run_draw_the_newest_step(qtbot, open_window):
    """Hiding panels, focusing one and presenting while a run streams in moves panels between rows:
    the run goes on, and every panel shown at the end shows the newest step."""
    window = open_window()
    window.resize(1920, 1200)  # every panel readable in the grid
    type_prompt(qtbot, window, PROMPT)
    window.form.set_engines(ENGINES)
    window.form.tokens_spin.setValue(150)
    window.toolbar.speed_spin.setValue(50)
    keys = window.grid.shown_panels()  # those shown by default (grid.DEFAULT_HIDDEN are not)
    moves = [lambda: window.grid.panel_actions[keys[0]].setChecked(False),
             lambda: window.grid.toggle_focus(keys[3]),
             lambda: window.presentation.set(True, full_screen=False),
             lambda: window.grid.toggle_focus(keys[3]),
             lambda: window.grid.panel_actions[keys[5]].setChecked(False),
             lambda: window.grid.panel_actions[keys[0]].setChecked(True),
             lambda: window.presentation.set(False)]
    with qtbot.waitSignal(window.run_started, timeout=60_000):
        window.start_run()
    for move in moves:
        before = window.history.n_steps()
        qtbot.waitUntil(lambda n=before: window.history.n_steps() > n + 5, timeout=60_000)
        move()
    qtbot.waitUntil(lambda: window.state.value == "idle", timeout=120_000)
    for _ in range(3):
        qtbot.wait(20)
        window.refresh()
    assert window.error_text() == "" and window.history.n_steps() == 150
    assert window.transport.badge.text() == "identical"
    assert grid_rows(window) == [[k for k in keys if k != keys[5]][:4], [k for k in keys if k != keys[5]][4:]]
    newest = (window.history.version, window.selected_step)
    assert window.selected_step == 149
    for key in window.grid.shown_panels():
        assert window.grid.painted.get(key) == newest, key
    assert window.grid.panels["summary"].table_values()["concat"]["kv_projections"] > 0


def test_a_click_in_a_panel_shows_that_step_in_the_window(qtbot, open_window):
    from PySide6.QtCore import QPointF

    window = open_window()
    window.resize(1400, 900)
    type_prompt(qtbot, window, PROMPT)
    window.form.set_engines(("naive", "concat"))
    window.form.tokens_spin.setValue(20)
    window.toolbar.speed_spin.setValue(0)
    run_to_end(qtbot, window)
    assert window.selected_step == 19
    plot = window.grid.panels["latency"].export_items()[0]
    vb = plot.getViewBox()
    view = plot.scene().views()[0]
    point = view.mapFromScene(vb.mapViewToScene(QPointF(7.1, sum(vb.viewRange()[1]) / 2)))
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=point)
    assert window.selected_step == 7 and window.transport.timeline.value() == 7
    qtbot.waitUntil(lambda: window.grid.painted.get("summary") == (window.history.version, 7))
    heading = window.grid.panels["summary"]._heading.text()
    assert "0–7" in heading or "0-7" in heading


ALL_PANELS = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier  # with A: all panels again


def test_ctrl_and_a_number_shows_one_panel_alone(qtbot, open_window):
    window = open_window()
    keys = window.grid.shown_panels()  # those shown by default (grid.DEFAULT_HIDDEN are not)
    qtbot.keyClick(window, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)
    assert grid_rows(window) == [[keys[1]]]
    qtbot.keyClick(window, Qt.Key.Key_A, ALL_PANELS)  # Ctrl+Shift+A (Ctrl+0 is the zoom's 100%)
    assert grid_rows(window) == [keys[:4], keys[4:]]
    window.grid.panel_actions[keys[4]].setChecked(False)  # hidden in View: Ctrl+5 shows it, alone
    qtbot.keyClick(window, Qt.Key.Key_5, Qt.KeyboardModifier.ControlModifier)
    assert grid_rows(window) == [[keys[4]]] and window.grid.panel_actions[keys[4]].isChecked()
    qtbot.keyClick(window, Qt.Key.Key_A, ALL_PANELS)
    assert len(sum(grid_rows(window), [])) == 8
    rows = dict(window.shortcut_rows())
    assert rows["Work matrix alone in the grid"] == "Ctrl+2" and rows["All panels in the grid again"] == "Ctrl+Shift+A"


def test_step_narration_follows_the_selected_step_without_moving_the_grid(qtbot, open_window, tmp_path):
    path = tmp_path / "narration.ini"
    window = open_window(settings=settings_at(path))
    window.resize(1300, 800)
    assert window.transport.narration.text() == "" and window.act_narration.isChecked()
    type_prompt(qtbot, window, PROMPT)
    window.form.set_engines(ENGINES)
    window.form.tokens_spin.setValue(20)
    window.toolbar.speed_spin.setValue(0)
    run_to_end(qtbot, window)
    grid_top = window.grid.geometry().top()
    texts = []
    for step in (0, 5, 19):
        window.select_step(step)
        qtbot.waitUntil(lambda s=step: f"Step {s}," in window.transport.narration.text())
        texts.append(window.transport.narration.text())
        assert window.grid.geometry().top() == grid_top  # two lines, always: the grid never moves
    assert "prefill" in texts[0] and "decode" in texts[1] and "again" in texts[2]
    # Two lines at any height, and what it shows fits them (the longer forms left to the tooltip)
    line = window.transport.narration.fontMetrics().lineSpacing()
    narration = window.transport.narration
    assert narration.height() <= 2 * line + 4 and narration.heightForWidth(narration.width()) <= narration.height()
    assert "Cache traffic" in window.transport.narration.toolTip()
    window.resize(1000, 700)  # a long sentence on one line sets no width (it had widened the window)
    qtbot.waitUntil(lambda: window.width() == 1000)
    assert window.minimumSizeHint().width() < 1000
    window.resize(1300, 1000)  # tall: two lines, the bytes too where they fit
    qtbot.waitUntil(lambda: window.transport.narration.height() >= 2 * line)
    narration = window.transport.narration
    assert narration.heightForWidth(narration.width()) <= narration.height()
    window.select_step(10)
    # selectable, for notes: the keys still work
    qtbot.mouseClick(window.transport.narration, Qt.MouseButton.LeftButton)
    qtbot.keyClick(window.focusWidget() or window, Qt.Key.Key_Left)
    assert window.selected_step == 9
    window.act_narration.trigger()  # View > Step narration: off
    assert window.transport.narration.isHidden() and window.grid.geometry().top() <= grid_top
    window.close()
    again = open_window(settings=settings_at(path))
    assert not again.act_narration.isChecked() and again.transport.narration.isHidden()


def test_step_narration_is_told_once_a_frame_while_a_run_streams(qtbot, open_window):
    """Each telling is a text layout: while a run streams in, the narration is told with each frame
    (the frames rest in proportion to their cost), never more often; the run's last step is told
    when it ends."""
    window = open_window()
    window.form.set_engines(("concat", "static"))
    window.form.tokens_spin.setValue(600)
    window.toolbar.speed_spin.setValue(0)
    told: list[str] = []
    real = window.transport.narration.setText
    window.transport.narration.setText = lambda text: (told.append(text), real(text))
    frames = window.frames.frames_shown
    run_to_end(qtbot, window)
    assert 2 <= len(told) <= window.frames.frames_shown - frames + 1, (len(told), window.frames.frames_shown)
    qtbot.waitUntil(lambda: "Step 599," in window.transport.narration.text())


def test_presentation_mode_gives_the_panels_the_screen(qtbot, open_window, tmp_path):
    path = tmp_path / "present.ini"
    window = open_window(settings=settings_at(path))
    window.toolbar.hide()  # a choice of the user's that presenting must not undo
    assert window.grid.width() < window.width() - 200  # the Inputs dock beside it
    window.act_present.trigger()  # F11
    assert window.presentation.active() and window.act_present.isChecked()
    assert window.isFullScreen()
    assert window.form_dock.isHidden() and window.statusBar().isHidden()
    assert not window.transport.timeline.isHidden() and not window.menuBar().isHidden()
    qtbot.waitUntil(lambda: window.grid.width() >= window.width() - 20)  # the panels get the width
    assert window.focusWidget() is None or not window.form_dock.isAncestorOf(window.focusWidget())
    window.close()  # closed while presenting: what is saved is the window from before

    again = open_window(settings=settings_at(path))
    assert not again.presentation.active() and not again.isFullScreen()
    assert not again.form_dock.isHidden() and not again.statusBar().isHidden() and again.toolbar.isHidden()
    again.act_present.trigger()
    again.act_present.trigger()  # F11 again: back
    assert not again.presentation.active() and not again.act_present.isChecked() and not again.isFullScreen()
    assert not again.form_dock.isHidden() and not again.statusBar().isHidden() and again.toolbar.isHidden()
    again.form_dock.hide()
    again.presentation.set(True, full_screen=False)
    assert not again.isFullScreen() and again.form_dock.isHidden()
    again.presentation.set(False)
    assert again.form_dock.isHidden()  # hidden before presenting: still hidden


def run_script(code: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=timeout)


def test_closing_mid_run_stops_the_worker_cleanly(tmp_path):
    proc = run_script(f"""
        import sys
        from PySide6.QtCore import QSettings, QTimer
        from kvviz.ui import app
        qt = app.ensure_app()
        window = app.create_window(QSettings({str(tmp_path / 'c.ini')!r}, QSettings.Format.IniFormat))
        window.show()
        def go():
            window.form.prompt_edit.setPlainText("Close me")
            window.form.set_model("tiny-random")
            window.form.set_engines(("naive", "concat", "static", "paged"))
            window.form.tokens_spin.setValue(2000)
            window.toolbar.speed_spin.setValue(0)
            window.torch_threads = 1
            assert window.start_run(), window.validation_text()
        def close_when_running(trace):
            if trace.step == 5 and trace.engine == "paged":
                print("closing at step", trace.step, flush=True)
                QTimer.singleShot(0, window.close)
        window.environment_ready.connect(go)
        window.step_traced.connect(close_when_running)
        QTimer.singleShot(150_000, lambda: qt.exit(3))
        code = qt.exec()
        print("exit", code, "state", window.state.value, "steps", window.history.n_steps(), flush=True)
        print("engine process left:", window._worker.session._proc, flush=True)
        sys.exit(code)
    """)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "closing at step 5" in proc.stdout
    assert "engine process left: None" in proc.stdout
    assert "QThread: Destroyed while thread is still running" not in proc.stderr
    assert "Traceback" not in proc.stderr


def test_no_display_gives_a_hint_and_exit_code_2():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["PYTHONPATH"] = str(ROOT)
    code = ("import sys, runpy; sys.argv = ['main.py']\n"
            "try:\n    runpy.run_path('main.py', run_name='__main__')\n"
            "except SystemExit as e:\n"
            "    print('qt loaded' if 'PySide6.QtWidgets' in sys.modules else 'no qt'); raise\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=60)
    if not sys.platform.startswith("linux"):
        pytest.skip("the no-display check is for Linux")
    assert proc.returncode == 2
    assert proc.stdout.strip() == "no qt"
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "kvviz shot" in lines[0] and "QT_QPA_PLATFORM=offscreen" in lines[0]


def test_has_display_rules():
    from kvviz.ui.qtapp import has_display

    assert not has_display({}, "linux")
    assert has_display({"DISPLAY": ":0"}, "linux")
    assert has_display({"WAYLAND_DISPLAY": "wayland-0"}, "linux")
    assert has_display({"QT_QPA_PLATFORM": "offscreen"}, "linux")
    assert has_display({}, "darwin") and has_display({}, "win32")


def test_a_zoom_out_of_range_is_one_line_and_exit_code_2():
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen")
    for args in (["gui", "--zoom", "500"], ["--zoom", "20"]):
        proc = subprocess.run([sys.executable, "-m", "kvviz", *args], capture_output=True, text=True, env=env,
                              cwd=ROOT, timeout=60)
        lines = proc.stderr.strip().splitlines()
        # the bound of every command's --zoom (kvviz.options), said as every bound is
        assert proc.returncode == 2 and len(lines) == 1 and "must be at least 50 and at most 300" in lines[0], \
            proc.stderr


def test_escape_leaves_presentation_mode_before_it_stops_a_run(qtbot, open_window):
    window = open_window()
    window.form.set_engines(("concat",))
    window.form.tokens_spin.setValue(500)
    window.toolbar.speed_spin.setValue(5)
    with qtbot.waitSignal(window.run_started, timeout=60_000):
        window.start_run()
    qtbot.keyClick(window, Qt.Key.Key_F11)
    assert window.presentation.active()
    assert "Esc" in window.act_present.toolTip() and "Esc" not in window.act_stop.toolTip()
    qtbot.keyClick(window, Qt.Key.Key_Escape)
    assert not window.presentation.active() and window.state.value == "running"  # the run goes on
    assert "Esc" in window.act_stop.toolTip() and "Esc" not in window.act_present.toolTip()
    qtbot.keyClick(window, Qt.Key.Key_Escape)  # out of presentation mode, Esc is Stop again
    qtbot.waitUntil(lambda: window.state.value == "idle", timeout=30_000)
    assert window.history.n_steps() < 500


# View > Zoom, live (no restart, no QT_SCALE_FACTOR): tests/test_lecture_window.py


def test_help_lists_every_shortcut_from_the_actions_themselves(qtbot, open_window):
    from PySide6.QtGui import QAction, QKeySequence
    from PySide6.QtWidgets import QTableWidget

    from kvviz.ui.export_actions import install_export_actions

    window = open_window()
    install_export_actions(window)
    rows = dict(window.shortcut_rows())
    assert rows["Run"] == "Ctrl+R, F5" and rows["Pause"] == "Space" and rows["Presentation mode"] == "F11"
    assert "Ctrl+Q" in rows["Quit"] and rows["Quit"].count("Ctrl+Q") == 1
    assert rows["Image..."] == "Ctrl+E"  # an export action, installed after the window was built
    with_keys = {a.property("shortcut_help") or a.text().replace("&", "")
                 for a in window.findChildren(QAction) if a.shortcuts()}
    assert with_keys <= set(rows)  # none left out
    qtbot.keyClick(window, Qt.Key.Key_F1)
    dialog = window.shortcuts_dialog
    qtbot.waitUntil(lambda: dialog is not None and dialog.isVisible())
    assert not dialog.isModal()
    table = dialog.findChild(QTableWidget)
    shown = [(table.item(i, 0).text(), table.item(i, 1).text()) for i in range(table.rowCount())]
    assert shown == window.shortcut_rows()
    assert window.act_shortcuts.shortcut() == QKeySequence(QKeySequence.StandardKey.HelpContents)


def test_keys_reach_the_transport_but_not_while_typing(qtbot, open_window):
    window = open_window()
    window.activateWindow()
    window.form.set_engines(("concat",))
    window.form.tokens_spin.setValue(30)
    window.form.prompt_edit.setFocus()
    window.form.prompt_edit.setPlainText("ab")
    window.form.prompt_edit.moveCursor(window.form.prompt_edit.textCursor().MoveOperation.End)
    qtbot.keyClick(window.form.prompt_edit, Qt.Key.Key_Space)
    qtbot.keyClick(window.form.prompt_edit, Qt.Key.Key_N)
    assert window.form.prompt_edit.toPlainText() == "ab n" and window.state.value == "idle"
    window.transport.timeline.setFocus()
    qtbot.keyClick(window, Qt.Key.Key_N)  # Step from idle: a paused run, one step in
    qtbot.waitUntil(lambda: window.history.n_steps() == 1, timeout=30_000)
    qtbot.keyClick(window, Qt.Key.Key_Right)  # at the newest step of a paused run: one more
    qtbot.waitUntil(lambda: window.history.n_steps() == 2, timeout=10_000)
    qtbot.keyClick(window, Qt.Key.Key_Left)
    assert window.selected_step == 0
    qtbot.keyClick(window, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: window.state.value == "idle", timeout=10_000)


def test_memory_calculator_opens_from_the_model_menu(open_window):
    from kvviz.ui.dialogs.memory import MemoryDialog

    win = open_window()
    assert win.act_memory in win.model_menu.actions()
    win.act_memory.trigger()
    dialog = win._memory_dialog
    assert isinstance(dialog, MemoryDialog) and dialog.isVisible()
    win.act_memory.trigger()
    assert win._memory_dialog is dialog  # one instance, raised again


def test_idle_ticks_build_the_work_matrix_plots_that_a_run_then_uses(qtbot, open_window):
    """Building a plot per engine cost ~13 ms each at the start of the first run: the window builds
    them while idle, and the run lays out those same plots."""
    from kvviz.ui.panels import attention

    attention._spare.clear()
    window = open_window()
    panel = window.grid.panels["work_matrix"]
    qtbot.waitUntil(lambda: not window.grid.warming, timeout=10_000)  # every panel warmed up
    # Every engine's plot built, and those of a run of all four laid out (transparent until it draws).
    offered = tuple(k for k, _ in window.env.engines)
    assert tuple(panel._views) == offered and all(v.plot.opacity() == 0 for v in panel._views.values())
    built = {e: v.plot for e, v in panel._views.items()}
    positions = window.form.models["tiny-random"].config.max_seq_len
    warmed = [b for b in attention._spare if b.size == positions * positions]
    assert len(warmed) == 1  # the attention weights' buffer for the longest run, pages faulted in
    type_prompt(qtbot, window, PROMPT)
    window.form.set_engines(("concat", "paged"))
    window.form.tokens_spin.setValue(3)
    run_to_end(qtbot, window)
    assert panel.export_items() == [built["concat"], built["paged"]]
    assert all(acc.buf.base is warmed[0] for acc in window.grid.panels["attention"]._acc.values())
    window.form.set_engines(ENGINES)
    run_to_end(qtbot, window)
    assert panel.export_items() == [built[e] for e in ENGINES]  # the same four plots again
    assert all(p.isVisible() and p.opacity() == 1 for p in panel.export_items())
    assert panel.worked_rows("paged").sum() == 1  # and they draw the run
