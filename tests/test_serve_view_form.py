"""The serve form: the workload table edited as a person does (presets, add, edit, remove), the first
reason it cannot run, and a bad request refused by the library in one line in the window."""
from __future__ import annotations

from PySide6.QtCore import Qt

from kvviz.serving.workload import preset
from kvviz.ui.serve.form import ServeForm


def test_presets_fill_the_table_and_edits_reach_the_spec(qtbot):
    form = ServeForm()
    qtbot.addWidget(form)
    form.set_models(["tiny"], "tiny")
    course = preset("course-batch").requests
    assert [(r.prompt, r.new_tokens, r.arrival) for r in form.spec().requests] == \
        [(r.prompt, r.new_tokens, r.arrival) for r in course]
    form.preset_combo.setCurrentIndex(form.preset_combo.findData("random"))
    form.random_spin.setValue(5)
    qtbot.mouseClick(form.preset_button, Qt.MouseButton.LeftButton)
    assert len(form.spec().requests) == 5 and form.preset_name() == "random:5"
    qtbot.mouseClick(form.add_button, Qt.MouseButton.LeftButton)
    assert form.problem() == "request 5: the prompt is empty"
    form.table.item(5, 0).setText("Hello there")
    form.table.item(5, 2).setData(Qt.ItemDataRole.EditRole, 7)
    assert form.problem() == "" and form.spec().requests[5] == type(form.spec().requests[5])("Hello there", 8, 7)
    form.table.selectRow(0)
    qtbot.mouseClick(form.remove_button, Qt.MouseButton.LeftButton)
    assert len(form.spec().requests) == 5 and form.spec().requests[-1].prompt == "Hello there"
    form.set_schedulers(())
    assert form.problem() == "tick at least one scheduler" and not form.run_button.isEnabled()
    form.set_schedulers(("chunked",))
    form.token_budget.setValue(8)
    assert form.problem() == "the token budget is smaller than one block"
    spec = form.spec()
    assert (spec.schedulers, spec.token_budget, spec.block_size) == (("chunked",), 8, 16)


def test_a_pool_smaller_than_a_request_is_one_line_in_the_window(qtbot, torch_cpu, tmp_path):
    from conftest import settings_at

    from kvviz.ui.serve.window import ServeWindow
    from kvviz.ui.serve.worker import ServeWorker

    w = ServeWindow(ServeWorker(threads=1, isolate=False), settings_at(tmp_path / "serve.ini"))
    qtbot.addWidget(w)
    w.show()
    w.form.set_models(["tiny-random"], "tiny-random")
    w.form.set_schedulers(("paged",))
    w.form.blocks.setValue(1)
    with qtbot.waitSignal(w.run_finished, timeout=60_000):
        assert w.start_run()
    assert w.error_text() == "a pool of 1 block of 16 is smaller than request 1 needs (3 blocks)"  # counted from 0
    header = w.form.table.verticalHeaderItem  # the table counts as the message does: request 1 is its row "1"
    assert [header(r).text() for r in range(w.form.table.rowCount())] == ["0", "1", "2", "3"]
    assert "\n" not in w.error_text() and w.state == "idle"
    w.close()
