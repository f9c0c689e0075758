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


def test_memory_dialog_strategies_and_mla(qtbot):
    from kvviz.ui.dialogs.memory import MemoryDialog

    dialog = MemoryDialog()
    qtbot.addWidget(dialog)
    dialog.set_preset("qwen3-0.6b")
    dialog.set_lengths([100, 1000])
    dialog.window_spin.setValue(256)
    from kvviz.ui.dialogs.memory import MLA_COLUMN

    assert dialog.strategy_table.isColumnHidden(MLA_COLUMN)
    # hand-worked (tests/test_cache_math.py): 114,688 B per token bf16; window 256 = 28.0 MiB (and tova, h2o, knorm:
    # the same W slots); snapkv with no prompt keeps every token; int8 59,136 B
    assert dialog.strategy_rows() == [["100"] + ["10.9 MiB"] * 7 + ["5.6 MiB"],
                                      ["1,000", "109.4 MiB"] + ["28.0 MiB"] * 5 + ["109.4 MiB", "56.4 MiB"]]
    assert "stop growing at 256 tokens (28.0 MiB)" in dialog.strategy_label.text()
    dialog.mla_combo.setCurrentIndex(dialog.mla_combo.findData("deepseek-v3"))
    assert dialog.strategy_rows()[1][-1] == "67.0 MiB"  # 1,000 x 70,272 B
    assert "70,272 B per token, 1.4%" in dialog.strategy_label.text()
    dialog.sinks_spin.setValue(256)
    assert "must be fewer than the window" in dialog.error_label.text() and dialog.strategy_table.rowCount() == 0
