"""The windows' hooks into features built beside them: the compare window's Repeat reaches the session, the status
bar names a kernel comparison's kernels and lanes, the Serve window says how vLLM beside it stands, and the Watch
window's Pause text is the shell's."""
from __future__ import annotations

from PySide6.QtCore import QSettings


def test_the_watch_windows_pause_text_is_the_shells():
    """Pause and Resume in the Watch window are the one key map's texts, set by the shell alone."""
    from kvviz.ui.watch.window import WatchWindow

    assert "_update_pause_text" not in vars(WatchWindow)


def test_the_forms_repeat_runs_the_window_run_that_many_times(open_window, qtbot):
    from kvviz.records.repeats import RepeatedRunInfo

    window = open_window()
    window.form.prompt_edit.setPlainText("The cache holds")
    window.form.set_engines(("concat",))
    window.form.tokens_spin.setValue(3)
    window.form.repeat_spin.setValue(3)
    window.toolbar.speed_spin.setValue(0)
    assert window.build_request().repeat == 3
    with qtbot.waitSignal(window.run_finished, timeout=120_000):
        assert window.start_run()
    info = window.history.info
    assert isinstance(info, RepeatedRunInfo) and info.repeat == 3
    assert [len(ms) for ms in info.earlier_ms["concat"]] == [3, 3]  # the two runs before the one shown
    assert window.history.n_steps() == 3


def test_the_status_bar_names_a_kernel_comparisons_kernels_and_its_lanes(qapp):
    from PySide6.QtWidgets import QStatusBar

    from kvviz.kernels import lanes
    from kvviz.records.trace import RunInfo
    from kvviz.ui.status import StatusFields

    fields = StatusFields(QStatusBar())
    engines = lanes(("concat", "static"), ("torch", "native"))
    fields.show_run(RunInfo(model_name="tiny-random", engines=engines, max_new_tokens=4,
                            decode_kernels=("torch", "native") * 2))
    assert fields.kernel.text() == "kernels PyTorch vs C step"
    assert fields.kernel.toolTip().endswith(
        "lanes (concat · PyTorch, concat · C step, static · PyTorch, static · C step)")
    fields.show_run(RunInfo(model_name="tiny-random", engines=("concat", "static"), max_new_tokens=4,
                            decode_kernels=("native", "native")))
    assert fields.kernel.text() == "kernel C step"  # one kernel: said as before


def test_the_serve_window_says_vllms_wait_in_the_status_bar_and_its_failure_in_the_error_strip(qtbot, tmp_path):
    from kvviz.serving.history import ServeHistory
    from kvviz.serving.record import PeerProgress
    from kvviz.ui.serve.window import ServeWindow

    window = ServeWindow(None, QSettings(str(tmp_path / "serve.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(window)
    window.run_id = "r1"
    window.show_run(ServeHistory(run_id="r1"))
    window._on_steps_traced("r1", [("vllm", PeerProgress("starting", 3.2), {})])
    assert window.statusBar().currentMessage() == (
        "vLLM: starting, 3 s waited (35-50 s on a CPU); the schedulers wait for it")
    assert window.error_text() == ""
    window._on_steps_traced("r1", [("vllm", PeerProgress("failed", 4.0, "no vLLM at /nowhere/python"), {})])
    assert window.error_text() == "vLLM failed: no vLLM at /nowhere/python"
