"""The run form's W, S, R fields: shown with the engines that read them, validated in one line each."""
from __future__ import annotations


def test_cache_fields_show_with_their_engines_and_refuse_bad_values(qtbot, open_window):
    window = open_window()
    form = window.form
    assert not set(form.checked_engines()) & {"window", "sinks", "int8"}  # not ticked by default
    form.prompt_edit.setPlainText("0123456789")  # 10 byte tokens
    form.tokens_spin.setValue(11)  # the run stores 10 + 11 - 1 = 20 tokens
    form.set_engines(("concat",))
    assert not form.window_spin.isVisibleTo(window) and not form.residual_spin.isVisibleTo(window)
    form.set_engines(("concat", "window"))
    assert form.window_spin.isVisibleTo(window) and not form.sinks_spin.isVisibleTo(window)
    form.set_engines(("sinks", "int8"))
    assert form.window_spin.isVisibleTo(window) and form.sinks_spin.isVisibleTo(window)
    assert form.residual_spin.isVisibleTo(window)

    def refused(part: str) -> None:
        assert not window.start_run()
        assert part in window.validation_text(), window.validation_text()

    form.window_spin.setValue(4)
    form.sinks_spin.setValue(4)
    refused("Sinks (4) must be fewer than the window (4)")
    form.sinks_spin.setValue(2)
    form.window_spin.setValue(21)
    refused("Window (21) is larger than the run, which stores 20 tokens")
    form.window_spin.setValue(20)
    form.residual_spin.setValue(21)
    refused("Residual (21) is larger than the run")
    form.residual_spin.setValue(3)
    assert window.validation_text() == ""
    run = form.build_run()
    assert (run.window, run.sinks, run.residual) == (20, 2, 3)
    form.residual_spin.setValue(0)
    assert form.build_run().residual is None
